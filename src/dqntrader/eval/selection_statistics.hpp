// How much of a selection's winner is luck: from the per-bar returns of N candidates on the
// window the choice was made on (a T x N matrix left on the device), the expected maximum
// Sharpe ratio of N skill-less trials, the deflated Sharpe ratio of the winner and the
// probability of backtest overfitting by combinatorially symmetric cross-validation, as
// docs/METRICS.md ("Selection statistics") defines them. The matrix is reduced on the device;
// a few numbers per candidate and one per split come back.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "dqntrader/core/types.hpp"
#include "dqntrader/eval/backtest_evaluator.hpp"

namespace dqntrader::eval {

struct SelectionStatistics {
  std::size_t trials = 0;   // N, the candidates
  std::size_t returns = 0;  // T, the bar returns of each
  std::size_t winner = 0;   // the selected candidate's column
  // Per-bar Sharpe ratio of each candidate (mean / std with T - 1; 0 where the returns do not
  // vary), and the variance of those across the candidates (N - 1).
  std::vector<double> sharpes;
  double sharpe_variance = 0;
  // Of the winner's returns (population moments; kurtosis 3 for a normal); NaN, and so the
  // deflated Sharpe ratio, when they do not vary.
  double skewness = 0, kurtosis = 0;
  double expected_max_sharpe = 0;  // SR0: of N independent trials without skill
  double deflated_sharpe = 0;      // DSR: the probability the winner's SR exceeds SR0
  std::size_t blocks = 0;          // S, the row blocks of CSCV
  std::size_t dropped = 0;         // rows left out at the start (T mod S)
  std::vector<double> logits;      // one per split, in the order of the splits
  double pbo = 0;                  // share of logits <= 0
  double probability_of_loss = 0;  // share of splits whose in-sample best loses out of sample
  double slope = 0;  // of the in-sample best's out-of-sample SR regressed on its in-sample SR
  // Why PBO (and the probability of loss and the slope, NaN then, with no logits) could not be
  // measured: a block would hold fewer than 2 rows. Empty when they were.
  std::string pbo_note;
};

/// The statistics of the selection of column winner among the columns of returns (T x N),
/// with blocks row blocks. InputError when N < 2, T < 2, or blocks is odd, below 2 or above
/// 24; where a block would hold fewer than 2 rows, every statistic but PBO and what goes with it
/// (pbo_note says so).
SelectionStatistics selection_statistics(const ExecSpace& space, const ReturnMatrix& returns,
                                         std::size_t winner, std::size_t blocks);

/// The standard normal distribution function and its inverse (p in (0, 1)).
double normal_cdf(double x);
double normal_quantile(double p);

}  // namespace dqntrader::eval

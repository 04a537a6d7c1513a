// The sweep's selection, measured: how much of the winner's validation Sharpe the number of
// members it was the best of explains. Every member's selected policy (its best.dqnpolicy) is
// evaluated once more on the validation window the ranking used, its per-bar returns written
// into one matrix on the device (policies that share a network in one pass), and
// eval::selection_statistics reduces it there: the expected maximum Sharpe ratio of that many
// members without skill, the winner's deflated Sharpe ratio and the probability of backtest
// overfitting (docs/METRICS.md, "Selection statistics").
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "dqntrader/core/types.hpp"
#include "dqntrader/sweep/sweep_plan.hpp"

namespace dqntrader::sweep {

/// The statistics of plan's finished sweep as JSON (leaderboard.json's "selection"): the
/// candidates (members with a best policy: finished or stopped early), the window, the winner
/// (the leaderboard's first) with its validation and test Sharpe ratios, expected_max_sharpe,
/// deflated_sharpe, pbo, probability_of_loss, slope and the splits' logits as a histogram
/// (logit_histogram) (per-bar Sharpe ratios, and the annualised ones beside them). With fewer
/// than two candidates (or fewer than two bars), a "note" that says why instead; with too few
/// bars for the blocks, pbo, probability_of_loss and slope are null and "pbo_note" says why.
nlohmann::json selection_json(const ExecSpace& space, const SweepPlan& plan);

/// The splits' logits as [{"logit", "splits"}, ...]: each value that occurs, ascending, with
/// the number of splits that gave it (a logit takes one of at most 2N + 1 values, so this is
/// every logit, in a few hundred bytes whatever the number of splits).
nlohmann::json logit_histogram(const std::vector<double>& logits);

}  // namespace dqntrader::sweep

// The backtest written the slow, obvious way, in double precision, from the definitions of
// docs/METRICS.md: a sequential position loop, the PnL bar by bar, and each metric
// from its formula. Equity is a product in long double (its range reaches 1e4932), so that
// windows whose equity passes the largest double are defined here too. The library's device
// code is checked against this; nothing of the library is used here.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace dqntrader::oracle {

struct Metrics {
  long bars = 0;
  double total_return, log_return, cagr, annual_volatility, sharpe, sortino, max_drawdown, calmar;
  long trades_closed = 0;
  double win_rate, profit_factor, expectancy, turnover, exposure, total_cost;
  // The size of what each cancelling metric is computed from: a metric near zero that is
  // a difference of large terms can only be as exact, relative to these, as its inputs.
  struct {
    double total_return, log_return, cagr, sharpe, sortino, calmar, expectancy;
  } scale;
};

inline int sign(double x) {
  return (x > 0) - (x < 0);
}

/// close: the window's bars C_0 .. C_N; p: positions p_0 .. p_{N-1} (p_{-1} = 0).
inline Metrics metrics(const std::vector<double>& close, const std::vector<double>& p, double cost,
                       double bars_per_year, double risk_free) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::size_t n = p.size();
  Metrics m;
  m.bars = static_cast<long>(n);
  std::vector<double> r(n);
  long double equity = 1.0L, peak = 1.0L;
  double worst = 0.0, turnover = 0.0, exposed = 0.0, total_cost = 0.0;
  std::vector<double> trades;
  bool open = false;
  double trade = 0.0;
  for (std::size_t t = 0; t < n; ++t) {
    const double previous = t == 0 ? 0.0 : p[t - 1];
    const double move = close[t + 1] / close[t] - 1.0;
    const double traded = std::fabs(p[t] - previous);
    r[t] = p[t] * move - cost * traded;
    equity *= 1.0L + r[t];
    peak = std::max(peak, equity);
    worst = std::min(worst, static_cast<double>(equity / peak - 1.0L));
    turnover += traded;
    total_cost += cost * traded;
    if (p[t] != 0.0)
      exposed += 1.0;
    // trades
    const bool flip = p[t] != 0.0 && previous != 0.0 && sign(p[t]) != sign(previous);
    if (open && (p[t] == 0.0 || flip)) {
      trade -= cost * std::fabs(previous);
      trades.push_back(trade);
      open = false;
    }
    if (p[t] != 0.0 && !open) {
      open = true;
      trade = -cost * std::fabs(p[t]);
    } else if (p[t] != 0.0) {
      trade -= cost * traded;  // a size change while open
    }
    if (p[t] != 0.0)
      trade += p[t] * move;
  }
  const double count = static_cast<double>(n);
  m.total_return = static_cast<double>(equity - 1.0L);  // inf past the largest double
  m.log_return = equity > 0.0L ? static_cast<double>(std::log(equity))
                               : (equity == 0.0L ? -std::numeric_limits<double>::infinity() : nan);
  m.cagr = n > 0 && equity > 0.0L
               ? static_cast<double>(std::pow(equity, static_cast<long double>(bars_per_year) /
                                                          static_cast<long double>(count)) -
                                     1.0L)
               : nan;
  double mean = 0.0;
  for (double x : r)
    mean += x - risk_free;
  mean /= count;
  double squares = 0.0, downside = 0.0;
  for (double x : r) {
    squares += (x - risk_free - mean) * (x - risk_free - mean);
    const double below = std::min(x - risk_free, 0.0);
    downside += below * below;
  }
  const double stdev = n > 1 ? std::sqrt(squares / (count - 1.0)) : nan;
  m.annual_volatility = stdev * std::sqrt(bars_per_year);
  m.sharpe = n > 1 && stdev > 0.0 ? mean / stdev * std::sqrt(bars_per_year) : nan;
  const double downside_deviation = n > 0 ? std::sqrt(downside / count) : 0.0;
  m.sortino = downside_deviation > 0.0 ? std::sqrt(bars_per_year) * mean / downside_deviation : nan;
  m.max_drawdown = worst;
  m.calmar = worst < 0.0 ? m.cagr / std::fabs(worst) : nan;
  m.trades_closed = static_cast<long>(trades.size());
  double wins = 0, losses = 0, sum_wins = 0, sum_losses = 0;
  for (double pnl : trades) {
    if (pnl > 0) {
      wins += 1;
      sum_wins += pnl;
    } else if (pnl < 0) {
      losses += 1;
      sum_losses += pnl;
    }
  }
  if (trades.empty()) {
    m.win_rate = m.profit_factor = m.expectancy = nan;
  } else {
    m.win_rate = wins / trades.size();
    m.profit_factor = sum_losses < 0
                          ? sum_wins / std::fabs(sum_losses)
                          : (sum_wins > 0 ? std::numeric_limits<double>::infinity() : nan);
    const double mean_win = wins > 0 ? sum_wins / wins : 0.0;
    const double mean_loss = losses > 0 ? sum_losses / losses : 0.0;
    m.expectancy = m.win_rate * mean_win - (1.0 - m.win_rate) * std::fabs(mean_loss);
  }
  double mean_abs = 0.0;
  for (double x : r)
    mean_abs += std::fabs(x - risk_free);
  mean_abs /= count;
  m.scale.total_return = static_cast<double>(equity);
  m.scale.log_return = 1.0;  // log_return is a sum: it is exact to an absolute amount
  m.scale.cagr = m.cagr + 1.0;
  m.scale.sharpe = std::sqrt(bars_per_year) * mean_abs / stdev;
  m.scale.sortino = std::sqrt(bars_per_year) * mean_abs / downside_deviation;
  m.scale.calmar = (m.cagr + 1.0) / std::fabs(worst);
  m.scale.expectancy = 0.0;
  if (!trades.empty()) {
    const double mean_win = wins > 0 ? sum_wins / wins : 0.0;
    const double mean_loss = losses > 0 ? sum_losses / losses : 0.0;
    m.scale.expectancy = m.win_rate * mean_win + (1.0 - m.win_rate) * std::fabs(mean_loss);
  }
  m.turnover = n > 0 ? turnover / count : nan;
  m.exposure = n > 0 ? exposed / count : nan;
  m.total_cost = total_cost;
  return m;
}

/// The sequential decision loop: q[(t * positions + incoming) * actions + a]; the first
/// incoming position is flat; argmax ties go to the lowest action; action a holds
/// position index a.
inline std::vector<int> decisions(const std::vector<double>& q, std::size_t n,
                                  std::size_t positions, std::size_t actions, int flat) {
  std::vector<int> path(n);
  int incoming = flat;
  for (std::size_t t = 0; t < n; ++t) {
    const double* row = &q[(t * positions + incoming) * actions];
    int best = 0;
    for (std::size_t a = 1; a < actions; ++a) {
      if (row[a] > row[best])
        best = static_cast<int>(a);
    }
    path[t] = best;
    incoming = best;
  }
  return path;
}

/// The forward pass in double: state = features + one-hot(incoming position); ReLU hidden
/// layers; a linear head or, with dueling, V + A - mean(A). Parameters follow the flat
/// layout: per layer a row-major [inputs x outputs] weight then the bias; the dueling head
/// is one layer of 1 + actions outputs, the value first.
struct Network {
  std::size_t features, positions, actions;
  std::vector<std::size_t> hidden;
  bool dueling;
};

inline std::vector<double> q_values(const Network& net, const std::vector<float>& parameters,
                                    const std::vector<double>& features /* [n][features] */,
                                    std::size_t n) {
  std::vector<double> q(n * net.positions * net.actions);
  std::vector<double> x, y;
  for (std::size_t t = 0; t < n; ++t) {
    for (std::size_t incoming = 0; incoming < net.positions; ++incoming) {
      x.assign(features.begin() + t * net.features, features.begin() + (t + 1) * net.features);
      for (std::size_t p = 0; p < net.positions; ++p)
        x.push_back(p == incoming ? 1.0 : 0.0);
      std::size_t offset = 0;
      auto layer = [&](const std::vector<double>& in, std::size_t outputs, bool relu) {
        std::vector<double> out(outputs, 0.0);
        for (std::size_t o = 0; o < outputs; ++o) {
          double sum = 0.0;
          for (std::size_t i = 0; i < in.size(); ++i)
            sum += in[i] * parameters[offset + i * outputs + o];
          sum += parameters[offset + in.size() * outputs + o];
          out[o] = relu ? std::max(sum, 0.0) : sum;
        }
        offset += in.size() * outputs + outputs;
        return out;
      };
      for (std::size_t width : net.hidden)
        x = layer(x, width, true);
      std::vector<double> head;
      if (net.dueling) {
        const std::vector<double> value = layer(x, 1, false);
        head = layer(x, net.actions, false);
        double mean = 0.0;
        for (double a : head)
          mean += a;
        mean /= static_cast<double>(net.actions);
        for (double& a : head)
          a = value[0] + a - mean;
      } else {
        head = layer(x, net.actions, false);
      }
      for (std::size_t a = 0; a < net.actions; ++a)
        q[(t * net.positions + incoming) * net.actions + a] = head[a];
    }
  }
  return q;
}

}  // namespace dqntrader::oracle

// The metrics of one backtest window (docs/METRICS.md gives each definition).
#pragma once

#include <cstdint>

namespace dqntrader::eval {

/// NaN marks an undefined metric (written as null in JSON); +inf a profit factor without
/// losses (written as "inf").
struct WindowMetrics {
  std::int64_t bars = 0;  // N, bar returns in the window
  double total_return = 0;
  double log_return = 0;  // log(E_N / E_0): finite where total_return overflows
  double cagr = 0;
  double annual_volatility = 0;
  double sharpe = 0;
  double sortino = 0;
  double max_drawdown = 0;
  double calmar = 0;
  std::int64_t trades_closed = 0;
  double win_rate = 0;
  double profit_factor = 0;
  double expectancy = 0;
  double turnover = 0;
  double exposure = 0;
  double total_cost = 0;
};

}  // namespace dqntrader::eval

// The metrics of one backtest window (docs/METRICS.md gives each definition).
#pragma once

#include <cstdint>
#include <type_traits>

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

/// Calls f(name, field) for every field of m (const or not), by the names of docs/METRICS.md:
/// the JSON keys, and the names by which a checkpoint stores them (io/record.hpp).
template <class M, class F,
          class = std::enable_if_t<std::is_same<std::remove_const_t<M>, WindowMetrics>::value>>
void for_each_field(M& m, F&& f) {
  f("bars", m.bars);
  f("total_return", m.total_return);
  f("log_return", m.log_return);
  f("cagr", m.cagr);
  f("annual_volatility", m.annual_volatility);
  f("sharpe", m.sharpe);
  f("sortino", m.sortino);
  f("max_drawdown", m.max_drawdown);
  f("calmar", m.calmar);
  f("trades_closed", m.trades_closed);
  f("win_rate", m.win_rate);
  f("profit_factor", m.profit_factor);
  f("expectancy", m.expectancy);
  f("turnover", m.turnover);
  f("exposure", m.exposure);
  f("total_cost", m.total_cost);
}

}  // namespace dqntrader::eval

#include "dqntrader/eval/metrics_json.hpp"

#include <type_traits>

#include "dqntrader/io/json_values.hpp"

namespace dqntrader::eval {

nlohmann::json to_json(const WindowMetrics& m) {
  nlohmann::json j;
  for_each_field(m, [&j](const char* name, auto value) {
    if constexpr (std::is_floating_point<decltype(value)>::value) {
      j[name] = io::json_number(value);
    } else {
      j[name] = value;
    }
  });
  return j;
}

const MetricDefinition* metric_definitions(std::size_t& count) {
  static const MetricDefinition definitions[] = {
      {"bars", "N, the number of bar returns in the window"},
      {"total_return", "E_N / E_0 - 1"},
      {"log_return", "log(E_N / E_0); NaN if E_N < 0, -inf if E_N = 0"},
      {"cagr", "(E_N / E_0)^(A / N) - 1"},
      {"annual_volatility", "std(r, ddof=1) * sqrt(A); 0 if every r is the same"},
      {"sharpe",
       "mean(r - rf) / std(r - rf, ddof=1) * sqrt(A); NaN if N < 2 or std = 0 (every r the "
       "same)"},
      {"sortino",
       "sqrt(A) * mean(r - rf) / sqrt(mean over all N bars of min(r - rf, 0)^2); NaN if that is 0"},
      {"max_drawdown", "min over t = 0..N of E_t / max_{s<=t} E_s - 1, E_0 included"},
      {"calmar", "CAGR / abs(max drawdown); NaN if max drawdown = 0"},
      {"trades_closed",
       "trades closed in the window; a trade opens when the position leaves 0 or flips sign"},
      {"win_rate", "closed trades with pnl > 0 / closed trades; NaN if none closed"},
      {"profit_factor",
       "sum of positive trade pnl / abs(sum of negative trade pnl); inf if no losses; NaN if no "
       "closed trades"},
      {"expectancy",
       "win rate * mean win - (1 - win rate) * abs(mean loss); NaN if no closed trades"},
      {"turnover", "(1/N) * sum of abs(p_t - p_{t-1})"},
      {"exposure", "fraction of the N bars with p_t != 0"},
      {"total_cost", "sum of c * abs(p_t - p_{t-1})"},
  };
  count = sizeof(definitions) / sizeof(definitions[0]);
  return definitions;
}

}  // namespace dqntrader::eval

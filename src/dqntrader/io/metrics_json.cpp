#include "dqntrader/io/metrics_json.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>

#include "dqntrader/core/error.hpp"
#include "dqntrader/io/input_file.hpp"

namespace dqntrader::io {

nlohmann::json json_number(double value) {
  if (std::isnan(value))
    return nullptr;
  if (std::isinf(value))
    return value > 0 ? "inf" : "-inf";
  return value;
}

double number_of(const nlohmann::json& value) {
  if (value.is_number())
    return value.get<double>();
  if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    if (text == "inf")
      return std::numeric_limits<double>::infinity();
    if (text == "-inf")
      return -std::numeric_limits<double>::infinity();
  }
  return std::numeric_limits<double>::quiet_NaN();
}

nlohmann::json to_json(const eval::WindowMetrics& m) {
  nlohmann::json j;
  j["bars"] = m.bars;
  j["total_return"] = json_number(m.total_return);
  j["log_return"] = json_number(m.log_return);
  j["cagr"] = json_number(m.cagr);
  j["annual_volatility"] = json_number(m.annual_volatility);
  j["sharpe"] = json_number(m.sharpe);
  j["sortino"] = json_number(m.sortino);
  j["max_drawdown"] = json_number(m.max_drawdown);
  j["calmar"] = json_number(m.calmar);
  j["trades_closed"] = m.trades_closed;
  j["win_rate"] = json_number(m.win_rate);
  j["profit_factor"] = json_number(m.profit_factor);
  j["expectancy"] = json_number(m.expectancy);
  j["turnover"] = json_number(m.turnover);
  j["exposure"] = json_number(m.exposure);
  j["total_cost"] = json_number(m.total_cost);
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

std::string format_metric(double value, int precision) {
  if (std::isnan(value))
    return "nan";
  if (std::isinf(value))
    return value > 0 ? "inf" : "-inf";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*g", precision, value);
  return buffer;
}

std::string format_percent(double fraction) {
  if (std::isnan(fraction))
    return "nan";
  if (std::isinf(fraction))
    return fraction > 0 ? "+inf%" : "-inf%";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%+.3g%%", 100.0 * fraction);
  return buffer;
}

std::string format_fixed(double value, int digits) {
  if (std::isnan(value))
    return "nan";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
  return buffer;
}

std::string metric_text(const nlohmann::json& v) {
  if (v.is_null())
    return "nan";
  if (v.is_string())
    return v.get<std::string>();
  if (v.is_number_integer())
    return std::to_string(v.get<long long>());
  return format_metric(v.get<double>());
}

nlohmann::json read_json_file(const std::string& path) {
  const std::string text = read_file(path);
  // The key whose value is being read, for a number the parser cannot hold (1e999): the
  // parser's own message names neither the file nor the key.
  std::string key;
  const nlohmann::json::parser_callback_t note_key =
      [&key](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
        if (event == nlohmann::json::parse_event_t::key)
          key = parsed.get<std::string>();
        return true;
      };
  try {
    return nlohmann::json::parse(text, note_key);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(path, 0, 0, std::string("not valid JSON: ") + e.what());
  } catch (const nlohmann::json::out_of_range& e) {
    std::string what = e.what();
    const std::size_t quote = what.find('\'');
    throw InputError(path, 0, 0,
                     (key.empty() ? std::string() : "key '" + key + "': ") + "the number " +
                         (quote == std::string::npos ? what : what.substr(quote)) +
                         " is out of the range of a double");
  }
}

}  // namespace dqntrader::io

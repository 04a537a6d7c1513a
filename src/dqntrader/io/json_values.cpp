#include "dqntrader/io/json_values.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/hash.hpp"
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

nlohmann::json content_record(const std::string& bytes) {
  char checksum[32];
  std::snprintf(checksum, sizeof checksum, "%016llx",
                static_cast<unsigned long long>(hash64(bytes.data(), bytes.size())));
  return {{"bytes", bytes.size()}, {"checksum", checksum}};
}

}  // namespace dqntrader::io

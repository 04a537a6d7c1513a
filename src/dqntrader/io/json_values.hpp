// Numbers as dqntrader's JSON files write them (null for NaN, "inf"), their text in tables and
// progress lines, and JSON files read with errors naming the file.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace dqntrader::io {

/// A JSON number, or null for NaN, or "inf"/"-inf".
nlohmann::json json_number(double value);

/// The number json_number wrote: a JSON number, +-infinity for "inf"/"-inf", NaN for anything
/// else (null, a missing value).
double number_of(const nlohmann::json& value);

/// "1.234", "nan" or "inf", for tables.
std::string format_metric(double value, int precision = 6);

/// A fraction as a signed percentage in three significant digits: "+12.3%", "-0.52%",
/// "+1.46e+05%"; "nan" and "+inf%" for what is not a number or infinite.
std::string format_percent(double fraction);

/// value with digits decimals ("%.*f"), "nan" for NaN: for progress lines.
std::string format_fixed(double value, int digits);

/// A metric's JSON value as json_number writes it, as tables print it: "nan" for null, the
/// string as written ("inf"), an integer as an integer, a number by format_metric.
std::string metric_text(const nlohmann::json& value);

/// A JSON file, parsed; InputError naming the file when it cannot be opened or is not JSON.
nlohmann::json read_json_file(const std::string& path);

/// What a sweep records of a member's file to notice it changed: {"bytes", "checksum"} (XXH64,
/// 16 hexadecimal digits) of its content.
nlohmann::json content_record(const std::string& bytes);

}  // namespace dqntrader::io

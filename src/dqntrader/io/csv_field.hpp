// One field of a CSV line: as it is, or quoted (with its quotes doubled) when it holds a comma,
// a quote or a line break.
#pragma once

#include <string>

namespace dqntrader::io {

inline std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos)
    return text;
  std::string quoted = "\"";
  for (char c : text)
    quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

}  // namespace dqntrader::io

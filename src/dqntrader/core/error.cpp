#include "dqntrader/core/error.hpp"

namespace dqntrader {

namespace {
std::string locate(const std::string& path, std::size_t line, std::size_t column) {
  // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on ":" + std::string in C++20.
  std::string where = path;
  if (line > 0)
    where.append(":").append(std::to_string(line));
  if (line > 0 && column > 0)
    where.append(":").append(std::to_string(column));
  return where;
}
}  // namespace

namespace {
constexpr char kOpen[] = "{{", kClose[] = "}}";
}  // namespace

std::string field(const std::string& name) {
  return kOpen + name + kClose;
}

std::string spelled(const std::string& message, Spelling spelling) {
  std::string out;
  std::size_t at = 0;
  while (true) {
    const std::size_t open = message.find(kOpen, at);
    const std::size_t close = open == std::string::npos ? open : message.find(kClose, open + 2);
    if (close == std::string::npos) {
      out.append(message, at, std::string::npos);
      return out;
    }
    out.append(message, at, open - at);
    std::string name = message.substr(open + 2, close - open - 2);
    if (spelling == Spelling::command) {
      out.append("--").append(name);
    } else {
      for (char& c : name)
        c = c == '-' ? '_' : c;
      out.append(name).append("=");
    }
    at = close + 2;
  }
}

InputError::InputError(const std::string& path, std::size_t line, std::size_t column,
                       const std::string& what)
    : Error(locate(path, line, column).append(": ").append(what)) {}

}  // namespace dqntrader

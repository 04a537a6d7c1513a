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

InputError::InputError(const std::string& path, std::size_t line, std::size_t column,
                       const std::string& what)
    : Error(locate(path, line, column).append(": ").append(what)) {}

}  // namespace dqntrader

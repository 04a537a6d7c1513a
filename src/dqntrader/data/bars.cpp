#include "dqntrader/data/bars.hpp"

#include <algorithm>

namespace dqntrader::data {

bool ColumnSelection::selects(const std::string& column) const {
  if (std::find(names.begin(), names.end(), column) != names.end())
    return true;
  return std::any_of(prefixes.begin(), prefixes.end(), [&](const std::string& prefix) {
    return !prefix.empty() && column.compare(0, prefix.size(), prefix) == 0;
  });
}

}  // namespace dqntrader::data

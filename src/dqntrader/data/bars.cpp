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

Bars first_bars(const Bars& bars, std::size_t count) {
  count = std::min(count, bars.size());
  auto cut = [count](auto& column) {
    if (column.size() > count)
      column.resize(count);
  };
  Bars first = bars;
  cut(first.timestamp_ms);
  cut(first.open);
  cut(first.high);
  cut(first.low);
  cut(first.close);
  cut(first.volume);
  cut(first.ofi);
  for (NamedColumn& c : first.extra)
    cut(c.values);
  return first;
}

}  // namespace dqntrader::data

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
  return bars_between(bars, 0, count);
}

Bars bars_between(const Bars& bars, std::size_t begin, std::size_t end) {
  end = std::min(end, bars.size());
  begin = std::min(begin, end);
  auto cut = [begin, end](auto& to, const auto& from) {
    if (!from.empty())  // an absent optional column stays absent
      to.assign(from.begin() + static_cast<std::ptrdiff_t>(begin),
                from.begin() + static_cast<std::ptrdiff_t>(end));
  };
  Bars out;
  out.source = bars.source;
  cut(out.timestamp_ms, bars.timestamp_ms);
  cut(out.open, bars.open);
  cut(out.high, bars.high);
  cut(out.low, bars.low);
  cut(out.close, bars.close);
  cut(out.volume, bars.volume);
  cut(out.ofi, bars.ofi);
  for (const NamedColumn& c : bars.extra) {
    out.extra.push_back(NamedColumn{c.name, {}});
    cut(out.extra.back().values, c.values);
  }
  return out;
}

Bars last_bars(const Bars& bars, std::size_t count) {
  return bars_between(bars, bars.size() > count ? bars.size() - count : 0, bars.size());
}

}  // namespace dqntrader::data

#include "dqntrader/data/bars.hpp"

#include <algorithm>
#include <limits>
#include <optional>
#include <stdexcept>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/hash.hpp"
#include "dqntrader/data/timestamp.hpp"

namespace dqntrader::data {

std::uint64_t fingerprint(const Bars& bars) {
  Hasher64 h;
  auto add = [&](const auto& v) { h.update(v.data(), v.size() * sizeof(v[0])); };
  add(bars.timestamp_ms);
  add(bars.open);
  add(bars.high);
  add(bars.low);
  add(bars.close);
  add(bars.volume);
  add(bars.ofi);
  for (const auto& c : bars.extra) {
    h.update(c.name.data(), c.name.size());
    add(c.values);
  }
  return h.digest();
}

std::size_t bar_index(const std::string& name, const std::string& text, const Bars& bars,
                      bool first) {
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos) {
    unsigned long long index = 0;
    try {
      index = std::stoull(text);
    } catch (const std::out_of_range&) {
      index = std::numeric_limits<unsigned long long>::max();
    }
    if (index >= bars.size()) {
      throw InputError(name + " " + text + ": the data has bars 0 .. " +
                       std::to_string(bars.size() - 1));
    }
    return static_cast<std::size_t>(index);
  }
  const std::optional<std::int64_t> ms = parse_iso8601_ms(text);
  if (!ms) {
    throw InputError(name + " '" + text +
                     "': expected a bar index or an ISO-8601 timestamp (YYYY-MM-DD[THH:MM[:SS]])");
  }
  const auto& t = bars.timestamp_ms;
  const std::string range = format_iso8601_ms(t.front()) + " .. " + format_iso8601_ms(t.back());
  if (first) {
    const auto at = std::lower_bound(t.begin(), t.end(), *ms);
    if (at == t.end())
      throw InputError(name + " " + text + " comes after the data's last bar (" + range + ")");
    return static_cast<std::size_t>(at - t.begin());
  }
  const auto after = std::upper_bound(t.begin(), t.end(), *ms);
  if (after == t.begin())
    throw InputError(name + " " + text + " comes before the data's first bar (" + range + ")");
  return static_cast<std::size_t>(after - t.begin()) - 1;
}

void check_symbol(const std::string& option, const std::string& symbol) {
  for (const char c : symbol) {
    const auto u = static_cast<unsigned char>(c);
    if (c == ',' || c == '"' || c == '\'' || u <= 0x20 || u == 0x7f) {
      throw InputError(field(option) + " '" + symbol +
                       "' cannot name an instrument: a symbol holds no commas, quotes, white "
                       "space or control characters");
    }
  }
}

bool BarSelection::selects(const std::string& column) const {
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

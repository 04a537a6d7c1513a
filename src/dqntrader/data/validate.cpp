#include "dqntrader/data/validate.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <sstream>

#include "dqntrader/core/error.hpp"
#include "dqntrader/data/timestamp.hpp"

namespace dqntrader::data {

BarCheck check_bar(double open, double high, double low, double close) {
  BarCheck check{BarProblem::none, BarColumn::close, open, high, low, close};
  const double prices[] = {open, high, low, close};
  const BarColumn columns[] = {BarColumn::open, BarColumn::high, BarColumn::low, BarColumn::close};
  for (int i = 0; i < 4; ++i) {
    if (!(prices[i] > 0.0)) {
      check.problem = BarProblem::nonpositive_price;
      check.column = columns[i];
      return check;
    }
  }
  if (high < low) {
    check.problem = BarProblem::high_below_low;
    check.column = BarColumn::high;
  } else if (open < low || open > high) {
    check.problem = BarProblem::open_outside_range;
    check.column = BarColumn::open;
  } else if (close < low || close > high) {
    check.problem = BarProblem::close_outside_range;
    check.column = BarColumn::close;
  }
  return check;
}

std::string describe(const BarCheck& c) {
  std::ostringstream out;
  out.precision(10);
  switch (c.problem) {
    case BarProblem::none:
      return "bar is valid";
    case BarProblem::nonpositive_price: {
      const char* names[] = {"open", "high", "low", "close"};
      const double values[] = {c.open, c.high, c.low, c.close};
      const int i = static_cast<int>(c.column);
      out << names[i] << " price " << values[i] << " is not positive";
      break;
    }
    case BarProblem::high_below_low:
      out << "high " << c.high << " is below low " << c.low;
      break;
    case BarProblem::open_outside_range:
      out << "open " << c.open << " lies outside [low, high] = [" << c.low << ", " << c.high << "]";
      break;
    case BarProblem::close_outside_range:
      out << "close " << c.close << " lies outside [low, high] = [" << c.low << ", " << c.high
          << "]";
      break;
  }
  return out.str();
}

bool valid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char c = byte(i);
    std::size_t length = 0;
    std::uint32_t code = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      length = 2;
      code = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      length = 3;
      code = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      length = 4;
      code = c & 0x07;
    } else {
      return false;
    }
    if (i + length > text.size())
      return false;
    for (std::size_t k = 1; k < length; ++k) {
      if ((byte(i + k) & 0xC0) != 0x80)
        return false;
      code = (code << 6) | (byte(i + k) & 0x3F);
    }
    const std::uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (code < least[length] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF))
      return false;
    i += length;
  }
  return true;
}

std::string printable(std::string_view text) {
  std::string out;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7F) {
      out += c;
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", u);
      out += hex;
    }
  }
  return out;
}

void check_bars(const Bars& bars) {
  const std::size_t n = bars.size();
  // "bar i (its time), column 'name': what", the bar counted from 0.
  auto fail = [&](std::size_t i, const std::string& column, const std::string& what) {
    std::ostringstream out;
    out << "bar " << i;
    if (i < bars.timestamp_ms.size() && representable(bars.timestamp_ms[i]))
      out << " (" << format_iso8601_ms(bars.timestamp_ms[i]) << ")";
    out << ", column '" << column << "': " << what;
    throw InputError(bars.source, 0, 0, out.str());
  };
  auto finite = [&](std::size_t i, const std::string& column, double v) {
    if (std::isnan(v))
      fail(i, column, "NaN");
    if (!std::isfinite(v))
      fail(i, column, "infinite value");
    if (std::fabs(v) > std::numeric_limits<float>::max())
      fail(i, column,
           "value " + std::to_string(v) + " overflows float (largest magnitude about 3.4e38)");
  };
  if (bars.timestamp_ms.size() != n || bars.open.size() != n || bars.high.size() != n ||
      bars.low.size() != n || (bars.has_volume() && bars.volume.size() != n) ||
      (bars.has_ofi() && bars.ofi.size() != n)) {
    throw InputError(bars.source, 0, 0, "columns have different lengths");
  }
  for (const NamedColumn& column : bars.extra) {
    if (!valid_utf8(column.name)) {
      throw InputError(bars.source, 0, 0,
                       "column name is not UTF-8 text: " + printable(column.name));
    }
    for (const char* standard : {"timestamp", "open", "high", "low", "close", "volume", "ofi"}) {
      if (column.name == standard || column.name.empty()) {
        throw InputError(bars.source, 0, 0,
                         "an extra column may not be named '" + column.name +
                             "' (the standard columns are timestamp, open, high, low, close, "
                             "volume and ofi)");
      }
    }
    if (column.values.size() != n) {
      throw InputError(bars.source, 0, 0, "column '" + column.name + "' has a different length");
    }
  }
  static const char* const price_names[] = {"open", "high", "low", "close"};
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t ms = bars.timestamp_ms[i];
    if (ms == std::numeric_limits<std::int64_t>::min())
      fail(i, "timestamp", "missing (NaT)");
    if (!representable(ms)) {
      fail(i, "timestamp",
           std::to_string(ms) + " ms since the epoch lies outside the years 0000 to 9999");
    }
    const double prices[] = {bars.open[i], bars.high[i], bars.low[i], bars.close[i]};
    for (int c = 0; c < 4; ++c)
      finite(i, price_names[c], prices[c]);
    const BarCheck check = check_bar(bars.open[i], bars.high[i], bars.low[i], bars.close[i]);
    if (check.problem != BarProblem::none)
      fail(i, price_names[static_cast<int>(check.column)], describe(check));
    if (i > 0 && ms <= bars.timestamp_ms[i - 1]) {
      fail(i, "timestamp",
           "timestamps must increase strictly (bar " + std::to_string(i - 1) + " is at " +
               format_iso8601_ms(bars.timestamp_ms[i - 1]) + ")");
    }
    if (bars.has_ofi())
      finite(i, "ofi", bars.ofi[i]);
    if (bars.has_volume()) {
      finite(i, "volume", bars.volume[i]);
      if (bars.volume[i] < 0.0)
        fail(i, "volume", "volume must not be negative");
    }
    for (const NamedColumn& column : bars.extra)
      finite(i, column.name, column.values[i]);
  }
}

}  // namespace dqntrader::data

// Market bars of one instrument, or of several (a panel), on the host, validated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dqntrader/core/error.hpp"

namespace dqntrader::data {

/// A numeric column beyond the required ones, used as a model feature.
struct NamedColumn {
  std::string name;
  std::vector<double> values;
};

/// One instrument's bars in time order. Every Bars value that leaves a loader satisfies
/// the invariants check_bars() enforces: prices > 0, low <= open, close <= high, finite
/// numbers, strictly increasing timestamps.
struct Bars {
  std::string source;                      // file the bars came from (for messages)
  std::vector<std::int64_t> timestamp_ms;  // UTC milliseconds since 1970-01-01
  std::vector<double> open, high, low, close;
  std::vector<double> volume;  // empty when the data has no volume column
  std::vector<double> ofi;     // order-flow imbalance; empty when absent
  std::vector<NamedColumn> extra;

  std::size_t size() const { return close.size(); }
  bool has_volume() const { return !volume.empty(); }
  bool has_ofi() const { return !ofi.empty(); }
};

/// Bars of several instruments (a universe), each satisfying Bars' invariants on its own
/// calendar, in the order their symbols first appear in the data. A single instrument is a
/// panel of one (its symbol empty when the data name none).
struct Panel {
  std::vector<std::string> symbols;
  std::vector<Bars> instruments;

  std::size_t size() const { return instruments.size(); }
};

/// Calls f(bars) for every instrument of panel in order. Of a panel of several, an InputError
/// f throws that does not name the instrument's source ("path[symbol]") is prefixed with it.
template <class F>
void for_each_instrument(const Panel& panel, F&& f) {
  for (const Bars& bars : panel.instruments) {
    try {
      f(bars);
    } catch (const InputError& e) {
      if (panel.size() == 1 || std::string(e.what()).rfind(bars.source + ":", 0) == 0)
        throw;  // one instrument, or a message that names it
      throw InputError(bars.source + ": " + e.what());
    }
  }
}

/// The first count bars of bars (all of them when count is larger), every column cut alike.
Bars first_bars(const Bars& bars, std::size_t count);

/// Bars [begin, end) of bars, every column cut alike (end clamped to the size).
Bars bars_between(const Bars& bars, std::size_t begin, std::size_t end);

/// The last count bars of bars (all of them when count is larger).
Bars last_bars(const Bars& bars, std::size_t count);

/// XXH64 of every column's values (and the extra columns' names): equal for equal bars, from
/// whichever file or array they came. Checkpoints, policies and sweeps record it.
std::uint64_t fingerprint(const Bars& bars);

/// InputError naming field(option) unless symbol is empty or could name an instrument of a
/// CSV file: text without commas, quotes, white space or control characters.
void check_symbol(const std::string& option, const std::string& symbol);

/// A bar given as an index (all digits) or an ISO-8601 timestamp: the first bar at or after it
/// (first = true) or the last bar at or before it. InputError naming `name` (how the caller
/// calls the bound: field("start")) when it lies outside the bars or is neither.
std::size_t bar_index(const std::string& name, const std::string& text, const Bars& bars,
                      bool first);

/// What a loader keeps: the optional numeric columns kept as extra features (the named ones
/// and every column whose name starts with one of the prefixes) and, of a CSV file with a
/// `symbol` column (bars of several instruments, one row per instrument and time), the rows
/// of one instrument: symbol's, or, when symbol is empty, those of the file's one symbol (a
/// file of several is refused, naming them). A file without a symbol column is one
/// instrument, read whatever symbol says. The bars of a file of several name their source
/// "path[symbol]".
struct BarSelection {
  std::vector<std::string> names;
  std::vector<std::string> prefixes;
  std::string symbol;

  bool selects(const std::string& column) const;
};

}  // namespace dqntrader::data

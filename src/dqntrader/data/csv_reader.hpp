// Reads bars from a CSV file and validates every value.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dqntrader/data/bars.hpp"

namespace dqntrader::data {

/// Bars from CSV text fed a line at a time (without its line end), validated as read_bars_csv
/// validates a file: the first non-empty line is the header, every later one a bar checked
/// against the bars before it. Throws InputError "source:line:column: what" on the first
/// problem (the bars before it stay). read_bars_csv reads a file through it, and `dqntrader
/// act --follow` a stream.
class CsvBarParser {
 public:
  /// every_symbol: rows with a symbol column are read for every instrument, each on its own
  /// (rather than the one selection.symbol chooses, or the file's one).
  CsvBarParser(const std::string& source, const BarSelection& selection = {},
               bool every_symbol = false);
  ~CsvBarParser();
  CsvBarParser(const CsvBarParser&) = delete;
  CsvBarParser& operator=(const CsvBarParser&) = delete;

  /// Takes the next line; true when it added a bar (false for the header and blank lines).
  bool line(std::string_view text);
  /// InputError unless a header and at least one bar were read (the end of a file).
  void finish() const;
  /// The instruments read so far: of every symbol's rows, one per symbol in the order they
  /// first came (none before the first row), else one.
  std::size_t instruments() const;
  /// An instrument's bars (those keep_last left) and symbol (empty without every symbol's).
  const Bars& bars(std::size_t instrument = 0) const;
  const std::string& symbol(std::size_t instrument) const;
  /// The instrument the last bar read went to.
  std::size_t last_instrument() const;
  /// Drops all but an instrument's last count bars (a stream keeps what its decisions read);
  /// its next bar is still checked against the last one read.
  void keep_last(std::size_t count, std::size_t instrument = 0);
  /// Lines taken so far.
  std::size_t lines() const;

  class Impl;

 private:
  std::unique_ptr<Impl> m_impl;
};

/// Reads a CSV file whose first row names the columns. Required: timestamp (integer epoch
/// seconds or milliseconds, or ISO-8601), open, high, low, close. Optional: volume, ofi,
/// extra numeric feature columns chosen by selection, and symbol (a file of several
/// instruments: the rows of selection.symbol's are read, BarSelection); other columns are
/// ignored.
/// A UTF-8 byte-order mark and CRLF line ends are accepted; empty lines are skipped.
///
/// Throws InputError "path:line:column: what" on the first problem: unreadable or empty
/// file, binary content, missing or duplicated column, ragged row, unparsable number,
/// NaN or infinity, a number beyond float range, a price <= 0, high < low, open or close
/// outside [low, high], timestamps not strictly increasing (an instrument's own, in a file of
/// several, naming its symbol), an empty symbol, several symbols and none chosen, a chosen
/// symbol without rows. Nothing is returned then.
Bars read_bars_csv(const std::string& path, const BarSelection& selection = {});

/// Every instrument of a CSV file, validated as read_bars_csv validates one: of a file with a
/// symbol column, one per symbol (a problem names the row's symbol: a repeated timestamp is a
/// duplicated (timestamp, symbol) row); a file without one, or a symbol chosen by selection,
/// is a panel of one.
Panel read_panel_csv(const std::string& path, const BarSelection& selection = {});

/// Writes bars as CSV (timestamp as ISO-8601 UTC with milliseconds), to a temporary file
/// renamed into place; throws Error when the file cannot be written completely.
void write_bars_csv(const std::string& path, const Bars& bars);
/// Several instruments' bars (the same columns each) as one CSV file with a `symbol` column
/// after the timestamp, their rows merged in time order (at one time, in the order given):
/// what read_bars_csv reads one instrument of.
void write_bars_csv(const std::string& path, const std::vector<Bars>& instruments,
                    const std::vector<std::string>& symbols);

}  // namespace dqntrader::data

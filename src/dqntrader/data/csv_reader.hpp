// Reads bars from a CSV file and validates every value.
#pragma once

#include <string>

#include "dqntrader/data/bars.hpp"

namespace dqntrader::data {

/// Reads a CSV file whose first row names the columns. Required: timestamp (integer epoch
/// seconds or milliseconds, or ISO-8601), open, high, low, close. Optional: volume, ofi,
/// and extra numeric feature columns chosen by selection; other columns are ignored.
/// A UTF-8 byte-order mark and CRLF line ends are accepted; empty lines are skipped.
///
/// Throws InputError "path:line:column: what" on the first problem: unreadable or empty
/// file, binary content, missing or duplicated column, ragged row, unparsable number,
/// NaN or infinity, a number beyond float range, a price <= 0, high < low, open or close
/// outside [low, high], timestamps not strictly increasing. Nothing is returned then.
Bars read_bars_csv(const std::string& path, const ColumnSelection& selection = {});

/// Writes bars as CSV (timestamp as ISO-8601 UTC with milliseconds), to a temporary file
/// renamed into place; throws Error when the file cannot be written completely.
void write_bars_csv(const std::string& path, const Bars& bars);

}  // namespace dqntrader::data

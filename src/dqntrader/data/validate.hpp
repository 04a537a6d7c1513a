// The invariants every bar satisfies, shared by the loaders.
#pragma once

#include <string>
#include <string_view>

#include "dqntrader/data/bars.hpp"

namespace dqntrader::data {

enum class BarProblem {
  none,
  nonpositive_price,
  high_below_low,
  open_outside_range,
  close_outside_range
};
enum class BarColumn { open, high, low, close };

struct BarCheck {
  BarProblem problem = BarProblem::none;
  BarColumn column = BarColumn::close;  // the value to point at
  double open = 0, high = 0, low = 0, close = 0;
};

/// Prices > 0, low <= high, open and close within [low, high]. Values must be finite.
BarCheck check_bar(double open, double high, double low, double close);

/// One sentence saying what is wrong, with the values.
std::string describe(const BarCheck& check);

/// Whether text is well-formed UTF-8 (no overlong forms, surrogates or code points past
/// U+10FFFF): what a column's name must be to go into JSON files and policies.
bool valid_utf8(std::string_view text);

/// text with every byte that is not printable ASCII written as \xNN, for messages.
std::string printable(std::string_view text);

/// Checks what the CSV reader checks of a file, for bars made otherwise (the Python module, a
/// .dqnbars cache): every timestamp within the years 0000 to 9999 (NaT, the smallest 64-bit
/// integer, is missing) and strictly increasing; every value finite and within float's range;
/// prices as check_bar says; volume not negative; column lengths equal; extra columns' names
/// UTF-8 and not those of the standard columns. Throws InputError naming the source, the bar's
/// index (from 0) and timestamp, and the column.
void check_bars(const Bars& bars);

}  // namespace dqntrader::data

// The invariants every bar satisfies, shared by the loaders.
#pragma once

#include <string>

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

/// Checks every bar and the timestamps (strictly increasing) and column lengths; throws
/// InputError naming the source and the bar's index and timestamp.
void check_bars(const Bars& bars);

}  // namespace dqntrader::data

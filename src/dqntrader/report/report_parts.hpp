// What the run report and the sweep report share: the page's head and style sheet, the
// colours of the policies and the equity chart (log scale over orders of magnitude, log10 of
// equity past the largest double).
#pragma once

#include <string>
#include <vector>

#include "dqntrader/eval/metrics_engine.hpp"

namespace dqntrader::report {

inline constexpr const char* policy_colour = "#1f5fbf";
/// buy-and-hold, flat, sign-of-ofi.
const char* baseline_colour(const std::string& policy);

/// From <!DOCTYPE html> to <body>, with the style sheet inline.
std::string document_head(const std::string& title);

struct EquityCurve {
  std::string name, colour;
  const eval::PathDetail* path;
};
/// Equity (E_0 = 1) of each curve over time (UTC milliseconds of E_0 .. E_N).
std::string equity_chart(const std::string& id, const std::string& title,
                         const std::vector<EquityCurve>& curves, const std::vector<double>& time);

}  // namespace dqntrader::report

// Metrics of given position paths, and the built-in baseline policies that need no network.
#pragma once

#include <string>
#include <vector>

#include "dqntrader/data/bars.hpp"
#include "dqntrader/eval/backtest_config.hpp"
#include "dqntrader/eval/metrics_engine.hpp"

namespace dqntrader::eval {

/// Evaluates position paths (indices into BacktestConfig::positions) on the device.
class PathEvaluator {
 public:
  PathEvaluator(const ExecSpace& space, Kokkos::View<const double*, DeviceMemory> close,
                const BacktestConfig& config, std::size_t max_returns);

  /// Metrics of path over the window starting at bar begin (path.extent(0) returns).
  WindowMetrics evaluate(std::size_t begin,
                         const Kokkos::View<const std::int8_t*, DeviceMemory>& path);
  PathDetail detail(std::size_t begin, const Kokkos::View<const std::int8_t*, DeviceMemory>& path);

 private:
  ExecSpace m_space;
  MetricsEngine m_metrics;
  Kokkos::View<WindowMetrics*, DeviceMemory> m_result;
};

/// Baselines: buy-and-hold (always +1), flat (always 0), sign-of-ofi (+1, 0 or -1 as the
/// bar's order-flow imbalance is positive, zero or negative).
enum class BuiltinPolicy { buy_and_hold, flat, sign_of_ofi };

/// "buy-and-hold", "flat" or "sign-of-ofi"; InputError otherwise.
BuiltinPolicy parse_builtin_policy(const std::string& name);
const char* to_string(BuiltinPolicy policy);

/// The built-in policy's position path for the decisions of window (device). Throws
/// InputError when the positions lack what the policy holds (+1, 0, -1) or sign-of-ofi
/// gets no ofi (an empty view).
Kokkos::View<std::int8_t*, DeviceMemory> builtin_path(const ExecSpace& space, BuiltinPolicy policy,
                                                      Kokkos::View<const double*, DeviceMemory> ofi,
                                                      const BarRange& window,
                                                      const BacktestConfig& config);

/// The built-in policies a run compares itself with on bars: buy-and-hold and flat, and
/// sign-of-ofi when the bars have ofi.
std::vector<BuiltinPolicy> builtin_policies(const data::Bars& bars);

/// A built-in policy on windows of the bars: its metrics in each, and its per-bar path in each
/// when asked for.
struct BuiltinRun {
  BuiltinPolicy policy;
  std::vector<WindowMetrics> metrics;  // one per window
  std::vector<PathDetail> details;     // one per window, or none
};

/// policies on each of windows of bars (their closes and ofi uploaded once), in their order.
/// InputError as builtin_path().
std::vector<BuiltinRun> evaluate_builtins(const ExecSpace& space, const data::Bars& bars,
                                          const std::vector<BuiltinPolicy>& policies,
                                          const std::vector<BarRange>& windows,
                                          const BacktestConfig& config, bool paths);

}  // namespace dqntrader::eval

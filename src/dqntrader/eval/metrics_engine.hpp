// Position paths -> returns -> WindowMetrics, on the device, by one scan and two
// reductions (definitions in docs/METRICS.md); only the metrics struct ever reaches the host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "dqntrader/core/types.hpp"
#include "dqntrader/eval/backtest_config.hpp"
#include "dqntrader/eval/window_metrics.hpp"

namespace dqntrader::eval {

/// Index of each decision's position in BacktestConfig::positions, one per bar return.
using PositionPath = Kokkos::View<std::int8_t*, DeviceMemory>;

/// Equity, positions and net returns of one path, on the host, for reports.
struct PathDetail {
  std::vector<double> equity;      // E_0 = 1 .. E_N: N + 1 values (+-inf beyond a double's range)
  std::vector<double> log_equity;  // log |E_t|, N + 1 values, finite wherever E_t is not 0
  std::vector<double> positions;   // p_0 .. p_{N-1}
  std::vector<double> returns;     // r_1 .. r_N
};

/// Sums the metrics are made from (internal to the engine; public for its kernels).
struct MetricSums {
  double sum_excess;                                  // sum of (r - rf)
  double sum_downside;                                // sum of min(r - rf, 0)^2
  double sum_turnover;                                // sum of |p_t - p_{t-1}|
  double exposed;                                     // bars with p_t != 0
  double sum_cost;                                    // sum of c |p_t - p_{t-1}|
  double min_drawdown;                                // min over t of E_t / max_{s<=t} E_s - 1
  double closed, wins, losses, sum_wins, sum_losses;  // over closed trades
  // The smallest and largest r: equal when every return is the same, whose deviations from
  // their computed mean are rounding alone (the volatility is then 0, the Sharpe ratio NaN).
  double lowest_return, highest_return;
};

class MetricsEngine {
 public:
  /// close: every bar's close price (device); max_returns: the longest window to serve.
  MetricsEngine(const ExecSpace& space, Kokkos::View<const double*, DeviceMemory> close,
                const BacktestConfig& config, std::size_t max_returns);

  /// Enqueues on space the metrics of path over the window starting at bar begin with
  /// path.extent(0) bar returns, into results(slot). Does not wait.
  void enqueue(const ExecSpace& space, std::size_t begin,
               const Kokkos::View<const std::int8_t*, DeviceMemory>& path,
               const Kokkos::View<WindowMetrics*, DeviceMemory>& results, std::size_t slot) const;

  /// Enqueues on space the per-bar net returns r_1 .. r_N of path over the window starting at
  /// bar begin into returns[0 .. N - 1] (device memory), the same numbers the metrics are made
  /// from. Does not wait.
  void enqueue_returns(const ExecSpace& space, std::size_t begin,
                       const Kokkos::View<const std::int8_t*, DeviceMemory>& path,
                       double* returns) const;

  /// Runs enqueue for one slot and copies the per-bar series back (waits).
  PathDetail detail(const ExecSpace& space, std::size_t begin,
                    const Kokkos::View<const std::int8_t*, DeviceMemory>& path) const;

  const BacktestConfig& config() const { return m_config; }
  std::size_t max_returns() const { return m_returns.extent(0); }

 private:
  // The equity scan of path into returns and the engine's own per-bar series.
  void scan(const ExecSpace& space, std::size_t begin,
            const Kokkos::View<const std::int8_t*, DeviceMemory>& path,
            const Kokkos::View<double*, DeviceMemory>& returns) const;

  BacktestConfig m_config;
  Kokkos::View<const double*, DeviceMemory> m_close;
  Kokkos::View<double*, DeviceMemory> m_positions;  // the position of each action
  Kokkos::View<double*, DeviceMemory> m_returns, m_equity, m_log_equity, m_drawdown, m_trade_pnl;
  Kokkos::View<MetricSums, DeviceMemory> m_sums;
  Kokkos::View<double, DeviceMemory> m_squares;
};

}  // namespace dqntrader::eval

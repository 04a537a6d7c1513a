// Position paths -> returns -> WindowMetrics, on the device, one kernel for many paths
// (definitions in docs/METRICS.md); only the metrics struct ever reaches the host.
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

/// The bars of a path one team of the evaluation kernels takes (metrics_engine.cpp,
/// q_policy.cpp): a window is cut into blocks of this many, whatever the number of paths.
constexpr std::size_t kBlockBars = 4096;

/// The threads of a team of the evaluation kernels: a CUDA block of 256; on the host 2 where
/// space runs 2 or more threads (a path's block is then shared as on CUDA: its runs scanned
/// across the team), else 1.
int evaluation_team_size(const ExecSpace& space);

/// Position paths of one window, several at once: path k's decisions (indices into
/// BacktestConfig::positions) at decisions(k * stride + i), i < returns.
struct Paths {
  Kokkos::View<const std::int8_t*, DeviceMemory> decisions;
  std::size_t returns = 0;  // N: the window's bar returns, one decision each
  std::size_t count = 1;    // paths
  std::size_t stride = 0;   // between consecutive paths' first decisions
};

class MetricsEngine {
 public:
  /// close: every bar's close price (device); max_returns: the longest window to serve;
  /// max_paths: the most paths one launch takes (its blocks' workspace is allocated here).
  MetricsEngine(const ExecSpace& space, Kokkos::View<const double*, DeviceMemory> close,
                const BacktestConfig& config, std::size_t max_returns, std::size_t max_paths = 1);

  /// Enqueues on space the metrics of every path of paths over the window starting at bar
  /// begin, path k's into results(first_slot + k): one kernel, a team a path. Does not wait.
  void enqueue(const ExecSpace& space, std::size_t begin, const Paths& paths,
               const Kokkos::View<WindowMetrics*, DeviceMemory>& results,
               std::size_t first_slot) const;

  /// enqueue() into results(0 ..), that also leaves each path's per-bar net returns r_1 .. r_N,
  /// the numbers its metrics are made from, in device memory: path k's at returns + k *
  /// returns_stride. Does not wait.
  void enqueue_returns(const ExecSpace& space, std::size_t begin, const Paths& paths,
                       const Kokkos::View<WindowMetrics*, DeviceMemory>& results, double* returns,
                       std::size_t returns_stride) const;

  /// The per-bar series of one path over the window starting at bar begin (waits).
  PathDetail detail(const ExecSpace& space, std::size_t begin,
                    const Kokkos::View<const std::int8_t*, DeviceMemory>& path) const;

  const BacktestConfig& config() const { return m_config; }
  std::size_t max_returns() const { return m_max_returns; }

 private:
  // The kernel over paths, with the per-bar outputs that are not null.
  void launch(const ExecSpace& space, const Paths& paths, std::size_t begin,
              const Kokkos::View<WindowMetrics*, DeviceMemory>& results, std::size_t first_slot,
              double* returns, std::size_t returns_stride, double* equity,
              double* log_equity) const;

  BacktestConfig m_config;
  Kokkos::View<const double*, DeviceMemory> m_close;
  Kokkos::View<double*, DeviceMemory> m_positions;  // the position of each action
  std::size_t m_max_returns;
  // The blocks' segments and partial sums, and each path's count of blocks arrived, for
  // max_paths paths of max_returns returns.
  Kokkos::View<unsigned char*, DeviceMemory> m_segments, m_partials;
  Kokkos::View<int*, DeviceMemory> m_arrivals;
};

}  // namespace dqntrader::eval

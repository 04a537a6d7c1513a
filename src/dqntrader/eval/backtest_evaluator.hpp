// BacktestEvaluator: Q-networks -> decisions -> positions -> PnL -> WindowMetrics, all on
// the device; the validation window is uploaded once and the buffers live as long as the
// evaluator. Only WindowMetrics (a few numbers per policy) cross to the host, unless a
// caller asks for the per-bar path of one policy.
#pragma once

#include <memory>
#include <vector>

#include "backends/execution.hpp"
#include "dqntrader/data/features.hpp"
#include "dqntrader/eval/backtest_config.hpp"
#include "dqntrader/eval/metrics_engine.hpp"
#include "dqntrader/eval/q_policy.hpp"
#include "dqntrader/eval/window_metrics.hpp"
#include "dqntrader/nn/network_spec.hpp"

namespace dqntrader::eval {

/// One policy's flat parameters (nn::ParameterLayout), in device memory.
using Parameters = Kokkos::View<const float*, DeviceMemory>;

/// Per-bar returns of several policies: one column a policy, one row a bar return.
using ReturnMatrix = Kokkos::View<double**, Kokkos::LayoutLeft, DeviceMemory>;

/// The bars an evaluation's network pass takes: config.chunk_bars, but no more than the
/// window's decisions (a short window's evaluator allocates what it uses) nor than keeps the
/// activations of `policies` policies within a bound, however many it takes at once: 2^28
/// values (1 GiB in float32) a buffer on CUDA, 2^22 (16 MiB) on the host.
std::size_t evaluation_chunk(const BacktestConfig& config, const nn::NetworkSpec& spec,
                             std::size_t policies, std::size_t decisions);

class BacktestEvaluator {
 public:
  /// window: the bars evaluated (features must be defined there: window.begin >=
  /// features.spec().warmup()); stats: the training-window feature statistics;
  /// max_policies: the most weight sets one evaluate_many call may pass.
  BacktestEvaluator(const ExecSpace& space, const data::FeatureSet& features,
                    const data::FeatureStats& stats, const nn::NetworkSpec& spec, BarRange window,
                    const BacktestConfig& config, std::size_t max_policies = 1);

  /// Metrics of one policy on the window. Waits for the result.
  WindowMetrics evaluate(const Parameters& parameters);

  /// Metrics of parameters.extent(0) policies (one parameter vector per row), evaluated
  /// together: every layer runs as one strided-batched product over the policies.
  std::vector<WindowMetrics> evaluate_many(const ParameterRows& parameters);

  /// Metrics of every policy on each of several windows inside this evaluator's window, each
  /// starting flat: [window][policy].
  std::vector<std::vector<WindowMetrics>> walk_forward(const ParameterRows& parameters,
                                                       const std::vector<BarRange>& windows);

  /// evaluate_many(), recorded on first use and replayed after: the parameter rows are copied
  /// device-to-device into the recorded input, the whole evaluation of every policy replays as
  /// one CUDA graph, and the metrics come back. Every call passes as many policies as the
  /// first (InputError otherwise). On OpenMP this is evaluate_many(). space must be the
  /// instance the evaluator was built with, on a stream of its own (exec::StreamSpace).
  std::vector<WindowMetrics> evaluate_graphed(const ParameterRows& parameters);

  /// The per-bar net returns r_1 .. r_N on the window of every policy of parameters, into
  /// columns first_column .. of returns (N rows, one column a policy), left on the device: the
  /// numbers the metrics are made from. Does not wait.
  void enqueue_returns(const ParameterRows& parameters, const ReturnMatrix& returns,
                       std::size_t first_column);

  /// Equity curve, positions and per-bar returns of one policy (host copies).
  PathDetail path_detail(const Parameters& parameters);

  const BarRange& window() const { return m_window; }
  const BacktestConfig& config() const { return m_metrics.config(); }

 private:
  std::vector<WindowMetrics> fetch(std::size_t count);
  void check(const BarRange& range) const;
  // The metrics of the policies of parameters on range, enqueued into results 0 .. count - 1.
  void enqueue(const ParameterRows& parameters, const BarRange& range);

  ExecSpace m_space;
  BarRange m_window;
  std::size_t m_parameter_count;
  QPolicy m_policy;
  MetricsEngine m_metrics;
  Kokkos::View<WindowMetrics*, DeviceMemory> m_results;
  Kokkos::View<float**, Kokkos::LayoutRight, DeviceMemory> m_graph_parameters;
  std::size_t m_graph_policies = 0;  // how many the recording evaluates
  exec::CapturedWork m_graph;
};

}  // namespace dqntrader::eval

#include "dqntrader/eval/backtest_evaluator.hpp"

#include <algorithm>
#include <string>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/kokkos_compat.hpp"

namespace dqntrader::eval {

namespace {

// The most activations one network pass holds in each of its two buffers. On the host the
// buffers are memory the caches hold and whose pages are touched once: on 2 cores a 16-member
// sweep's test window (32 policies over 10,000 bars) took 2.2 s at 2^28, 0.4 s at 2^22.
#if defined(DQNTRADER_BACKEND_CUDA)
constexpr std::size_t kMostActivations = std::size_t{1} << 28;
#else
constexpr std::size_t kMostActivations = std::size_t{1} << 22;
#endif

ParameterRows as_rows(const Parameters& parameters) {
  return parameter_rows(parameters.data(), 1, parameters.extent(0));
}
}  // namespace

std::size_t evaluation_chunk(const BacktestConfig& config, const nn::NetworkSpec& spec,
                             std::size_t policies, std::size_t decisions) {
  std::size_t widest = 1;
  for (std::size_t w : spec.hidden)
    widest = std::max(widest, w);
  const std::size_t per_bar = std::max<std::size_t>(policies, 1) * spec.positions * widest;
  const std::size_t most = std::max<std::size_t>(kMostActivations / per_bar, 1);
  return std::max<std::size_t>(1, std::min({config.chunk_bars, decisions, most}));
}

BacktestEvaluator::BacktestEvaluator(const ExecSpace& space, const data::FeatureSet& features,
                                     const data::FeatureStats& stats, const nn::NetworkSpec& spec,
                                     BarRange window, const BacktestConfig& config,
                                     std::size_t max_policies)
    : m_space(space),
      m_window(window),
      m_parameter_count(nn::ParameterLayout(spec).size()),
      m_policy(space, spec, config.precision, features, stats, max_policies,
               evaluation_chunk(config, spec, max_policies, window.returns()), window.returns(),
               config.flat_index()),
      m_metrics(space, features.close(), config, window.returns(), max_policies),
      m_results(Kokkos::view_alloc(space, std::string("dqntrader::eval::results")), max_policies) {
  validate(config);
  if (spec.positions != config.positions.size()) {
    throw InputError("the network has " + std::to_string(spec.positions) +
                     " positions, the backtest " + std::to_string(config.positions.size()));
  }
  if (window.begin < features.spec().warmup() || window.end > features.bars() ||
      window.end < window.begin + 2) {
    throw InputError("evaluation window [" + std::to_string(window.begin) + ", " +
                     std::to_string(window.end) +
                     ") must hold at least 2 bars, start at or after the feature warm-up (" +
                     std::to_string(features.spec().warmup()) + ") and end by the last bar (" +
                     std::to_string(features.bars()) + ")");
  }
}

void BacktestEvaluator::check(const BarRange& range) const {
  if (range.begin < m_window.begin || range.end > m_window.end || range.end < range.begin + 2) {
    throw InputError("window [" + std::to_string(range.begin) + ", " + std::to_string(range.end) +
                     ") lies outside the evaluator's [" + std::to_string(m_window.begin) + ", " +
                     std::to_string(m_window.end) + ") or holds fewer than 2 bars");
  }
}

std::vector<WindowMetrics> BacktestEvaluator::fetch(std::size_t count) {
  auto host = Kokkos::create_mirror_view(m_results);
  Kokkos::deep_copy(m_space, host, m_results);
  compat::fence(m_space, "dqntrader::eval: the host needs the metrics");
  return std::vector<WindowMetrics>(host.data(), host.data() + count);
}

void BacktestEvaluator::enqueue(const ParameterRows& parameters, const BarRange& range) {
  if (parameters.extent(0) > m_results.extent(0)) {
    throw InputError(std::to_string(parameters.extent(0)) + " policies; the evaluator takes " +
                     std::to_string(m_results.extent(0)));
  }
  const std::size_t n = range.returns();
  m_policy.enqueue(m_space, parameters, range.begin, n);
  m_metrics.enqueue(m_space, range.begin, m_policy.paths(parameters.extent(0), n), m_results, 0);
}

WindowMetrics BacktestEvaluator::evaluate(const Parameters& parameters) {
  return evaluate_many(as_rows(parameters)).front();
}

std::vector<WindowMetrics> BacktestEvaluator::evaluate_many(const ParameterRows& parameters) {
  enqueue(parameters, m_window);
  return fetch(parameters.extent(0));
}

std::vector<std::vector<WindowMetrics>> BacktestEvaluator::walk_forward(
    const ParameterRows& parameters, const std::vector<BarRange>& windows) {
  std::vector<std::vector<WindowMetrics>> metrics;
  for (const BarRange& range : windows) {
    check(range);
    enqueue(parameters, range);
    metrics.push_back(fetch(parameters.extent(0)));
  }
  return metrics;
}

std::vector<WindowMetrics> BacktestEvaluator::evaluate_graphed(const ParameterRows& parameters) {
  const std::size_t count = parameters.extent(0);
  if (parameters.extent(1) != m_parameter_count || count == 0 || count > m_results.extent(0) ||
      (m_graph.captured() && count != m_graph_policies)) {
    throw InputError(std::to_string(count) + " parameter vectors of " +
                     std::to_string(parameters.extent(1)) + " values; the network has " +
                     std::to_string(m_parameter_count) + " and the recorded evaluation takes " +
                     std::to_string(m_graph.captured() ? m_graph_policies : m_results.extent(0)));
  }
  // The recording's input, allocated by the first call (an evaluator that never records
  // takes none).
  if (m_graph_parameters.extent(0) == 0) {
    m_graph_parameters = Kokkos::View<float**, Kokkos::LayoutRight, DeviceMemory>(
        Kokkos::view_alloc(m_space, Kokkos::WithoutInitializing,
                           std::string("dqntrader::eval::graph_parameters")),
        count, m_parameter_count);
  }
  const auto input = m_graph_parameters;
  const std::size_t size = m_parameter_count;
  Kokkos::parallel_for(
      "dqntrader::eval::graph_input", Kokkos::RangePolicy<ExecSpace>(m_space, 0, count * size),
      KOKKOS_LAMBDA(const std::size_t i) {
        input(i / size, i % size) = parameters(i / size, i % size);
      });
  auto work = [this, count] {
    enqueue(parameter_rows(m_graph_parameters.data(), count, m_parameter_count), m_window);
  };
  if (!m_graph.captured()) {
    work();  // warm every kernel and library path before recording
    compat::fence(m_space, "dqntrader::eval: warm-up must finish before graph capture");
    m_graph.capture(m_space, work);
    m_graph_policies = count;
  }
  m_graph.replay(m_space);
  return fetch(count);
}

void BacktestEvaluator::enqueue_returns(const ParameterRows& parameters,
                                        const ReturnMatrix& returns, std::size_t first_column) {
  const std::size_t n = m_window.returns(), count = parameters.extent(0);
  if (count > m_results.extent(0) || returns.extent(0) != n ||
      first_column + count > returns.extent(1)) {
    throw InputError(std::to_string(count) + " policies' " + std::to_string(n) +
                     " returns from column " + std::to_string(first_column) +
                     " do not fit a matrix of " + std::to_string(returns.extent(0)) + " x " +
                     std::to_string(returns.extent(1)) + " (the evaluator takes " +
                     std::to_string(m_results.extent(0)) + " policies)");
  }
  m_policy.enqueue(m_space, parameters, m_window.begin, n);
  m_metrics.enqueue_returns(m_space, m_window.begin, m_policy.paths(count, n), m_results,
                            returns.data() + first_column * returns.stride(1), returns.stride(1));
}

PathDetail BacktestEvaluator::path_detail(const Parameters& parameters) {
  const std::size_t n = m_window.returns();
  m_policy.enqueue(m_space, as_rows(parameters), m_window.begin, n);
  return m_metrics.detail(m_space, m_window.begin, m_policy.path(0, n));
}

}  // namespace dqntrader::eval

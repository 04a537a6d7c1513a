#include "dqntrader/eval/path_evaluator.hpp"

#include <string>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/kokkos_compat.hpp"
#include "dqntrader/core/transfer.hpp"

namespace dqntrader::eval {

PathEvaluator::PathEvaluator(const ExecSpace& space,
                             Kokkos::View<const double*, DeviceMemory> close,
                             const BacktestConfig& config, std::size_t max_returns)
    : m_space(space),
      m_metrics(space, close, config, max_returns),
      m_result(Kokkos::view_alloc(space, std::string("dqntrader::eval::path_result")), 1) {}

WindowMetrics PathEvaluator::evaluate(std::size_t begin,
                                      const Kokkos::View<const std::int8_t*, DeviceMemory>& path) {
  m_metrics.enqueue(m_space, begin, Paths{path, path.extent(0), 1, path.extent(0)}, m_result, 0);
  auto host = Kokkos::create_mirror_view(m_result);
  Kokkos::deep_copy(m_space, host, m_result);
  compat::fence(m_space, "dqntrader::eval: the host needs the metrics");
  return host(0);
}

PathDetail PathEvaluator::detail(std::size_t begin,
                                 const Kokkos::View<const std::int8_t*, DeviceMemory>& path) {
  return m_metrics.detail(m_space, begin, path);
}

BuiltinPolicy parse_builtin_policy(const std::string& name) {
  if (name == "buy-and-hold")
    return BuiltinPolicy::buy_and_hold;
  if (name == "flat")
    return BuiltinPolicy::flat;
  if (name == "sign-of-ofi")
    return BuiltinPolicy::sign_of_ofi;
  throw InputError("unknown policy '" + name + "' (expected buy-and-hold, flat or sign-of-ofi)");
}

const char* to_string(BuiltinPolicy policy) {
  switch (policy) {
    case BuiltinPolicy::buy_and_hold:
      return "buy-and-hold";
    case BuiltinPolicy::flat:
      return "flat";
    case BuiltinPolicy::sign_of_ofi:
      return "sign-of-ofi";
  }
  return "unknown";
}

namespace {
int index_of(const BacktestConfig& config, double position, BuiltinPolicy policy) {
  for (std::size_t i = 0; i < config.positions.size(); ++i) {
    if (config.positions[i] == position)
      return static_cast<int>(i);
  }
  throw InputError(std::string("policy ") + to_string(policy) + " holds position " +
                   std::to_string(position) + ", which the positions do not include");
}
}  // namespace

namespace {

// The built-in policy's decisions over window, into path (window.returns() of them).
void write_builtin_path(const ExecSpace& space, BuiltinPolicy policy,
                        Kokkos::View<const double*, DeviceMemory> ofi, const BarRange& window,
                        const BacktestConfig& config,
                        const Kokkos::View<std::int8_t*, DeviceMemory>& path) {
  const std::size_t n = window.returns(), begin = window.begin;
  const std::int8_t flat = static_cast<std::int8_t>(index_of(config, 0.0, policy));
  if (policy == BuiltinPolicy::sign_of_ofi) {
    if (ofi.extent(0) == 0)
      throw InputError("policy sign-of-ofi needs an 'ofi' column in the data");
    const std::int8_t long_index = static_cast<std::int8_t>(index_of(config, 1.0, policy));
    const std::int8_t short_index = static_cast<std::int8_t>(index_of(config, -1.0, policy));
    Kokkos::parallel_for(
        "dqntrader::eval::sign_of_ofi", Kokkos::RangePolicy<ExecSpace>(space, 0, n),
        KOKKOS_LAMBDA(const std::size_t i) {
          const double x = ofi(begin + i);
          path(i) = x > 0.0 ? long_index : (x < 0.0 ? short_index : flat);
        });
  } else {
    const std::int8_t held = policy == BuiltinPolicy::flat
                                 ? flat
                                 : static_cast<std::int8_t>(index_of(config, 1.0, policy));
    Kokkos::deep_copy(space, path, held);
  }
}

}  // namespace

Kokkos::View<std::int8_t*, DeviceMemory> builtin_path(const ExecSpace& space, BuiltinPolicy policy,
                                                      Kokkos::View<const double*, DeviceMemory> ofi,
                                                      const BarRange& window,
                                                      const BacktestConfig& config) {
  Kokkos::View<std::int8_t*, DeviceMemory> path(
      Kokkos::view_alloc(space, std::string("dqntrader::eval::builtin_path")), window.returns());
  write_builtin_path(space, policy, ofi, window, config, path);
  return path;
}

std::vector<BuiltinPolicy> builtin_policies(const data::Bars& bars) {
  std::vector<BuiltinPolicy> policies = {BuiltinPolicy::buy_and_hold, BuiltinPolicy::flat};
  if (!bars.ofi.empty())
    policies.push_back(BuiltinPolicy::sign_of_ofi);
  return policies;
}

std::vector<BuiltinRun> evaluate_builtins(const ExecSpace& space, const data::Bars& bars,
                                          const std::vector<BuiltinPolicy>& policies,
                                          const std::vector<BarRange>& windows,
                                          const BacktestConfig& config, bool paths) {
  std::vector<BuiltinRun> out;
  if (policies.empty() || windows.empty())
    return out;
  std::size_t longest = 0;
  for (const BarRange& w : windows)
    longest = std::max(longest, w.returns());
  const auto close = upload(space, bars.close, "dqntrader::eval::builtin_close");
  const auto ofi = upload(space, bars.ofi, "dqntrader::eval::builtin_ofi");
  const std::size_t count = policies.size();
  const MetricsEngine engine(space, close, config, longest, count);
  Kokkos::View<std::int8_t*, DeviceMemory> decisions(
      Kokkos::view_alloc(space, Kokkos::WithoutInitializing,
                         std::string("dqntrader::eval::builtin_paths")),
      count * longest);
  Kokkos::View<WindowMetrics*, DeviceMemory> results(
      Kokkos::view_alloc(space, std::string("dqntrader::eval::builtin_results")), count);
  auto host = Kokkos::create_mirror_view(results);
  for (const BuiltinPolicy policy : policies)
    out.push_back(BuiltinRun{policy, {}, {}});
  // Each window: every policy's path, then their metrics in one launch and one copy.
  for (const BarRange& w : windows) {
    const std::size_t n = w.returns();
    auto path = [&](std::size_t p) {
      return Kokkos::subview(decisions, std::make_pair(p * n, (p + 1) * n));
    };
    for (std::size_t p = 0; p < count; ++p)
      write_builtin_path(space, policies[p], ofi, w, config, path(p));
    engine.enqueue(space, w.begin, Paths{decisions, n, count, n}, results, 0);
    Kokkos::deep_copy(space, host, results);
    compat::fence(space, "dqntrader::eval: the host needs the built-in policies' metrics");
    for (std::size_t p = 0; p < count; ++p) {
      out[p].metrics.push_back(host(p));
      if (paths)
        out[p].details.push_back(engine.detail(space, w.begin, path(p)));
    }
  }
  return out;
}

}  // namespace dqntrader::eval

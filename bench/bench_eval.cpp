// Backtest evaluation at the reference workloads (docs/BENCHMARKS.md, Reference workloads):
//   EVAL-1M   1,000,000 bars, state 64 (61 features + 3 position one-hot), MLP
//             64-512-512-512-3, cost 0.0005, A = 98,280; one weight set and 64 at once.
//   EVAL-CPU  the 2-core scale: 100,000 bars, MLP 64-256-256-3.
// Reports bars/s (policy-bars/s for many weight sets) and FLOP/s; the FLOP count is the
// network's: per bar the feature product of layer 1 once, then the rest of the network for
// each of the three incoming positions.
#include <benchmark/benchmark.h>
#include <Kokkos_Core.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/execution.hpp"
#include "dqntrader/core/kokkos_compat.hpp"
#include "dqntrader/data/features.hpp"
#include "dqntrader/data/synthetic.hpp"
#include "dqntrader/eval/backtest_evaluator.hpp"
#include "dqntrader/nn/network_spec.hpp"

namespace dqntrader {
namespace {

struct Workload {
  const char* name;
  std::size_t bars;
  std::vector<std::size_t> hidden;
};

double network_flops(const nn::NetworkSpec& spec, std::size_t bars) {
  double per_position = 0.0;
  std::size_t in = spec.hidden.front();
  for (std::size_t l = 1; l < spec.hidden.size(); ++l) {
    per_position += 2.0 * in * spec.hidden[l];
    in = spec.hidden[l];
  }
  per_position += 2.0 * in * spec.actions;
  const double first = 2.0 * spec.features * spec.hidden.front();
  return static_cast<double>(bars) * (first + spec.positions * per_position);
}

// Everything one workload needs, built once per process.
struct Setup {
  exec::StreamSpace stream;
  data::Bars bars;
  std::unique_ptr<data::FeatureSet> features;
  data::FeatureStats stats;
  nn::NetworkSpec spec;
  eval::BarRange window;

  explicit Setup(const Workload& w) {
    data::FeatureConfig config;
    config.return_window = 56;  // 56 returns + volatility + 4 ofi = 61 features
    config.volatility_window = 16;
    config.ofi_window = 4;
    data::SynthConfig synth;
    synth.bars = w.bars + 57;
    synth.seed = 7;
    synth.interval_ms = 60000;
    bars = data::generate_bars(synth);
    const data::FeatureSpec feature_spec = data::resolve_features(config, bars);
    features = std::make_unique<data::FeatureSet>(stream.space(), bars, feature_spec);
    window = {feature_spec.warmup(), feature_spec.warmup() + w.bars + 1};  // w.bars returns
    stats = features->fit(window.begin, window.end);
    spec.features = feature_spec.count();
    spec.hidden = w.hidden;
  }
};

Setup& setup_for(const Workload& w) {
  static std::map<std::string, std::unique_ptr<Setup>> cache;
  static const bool hooked = [] {
    // Device buffers must go before Kokkos does.
    Kokkos::push_finalize_hook([] { cache.clear(); });
    return true;
  }();
  (void)hooked;
  auto& slot = cache[w.name];
  if (!slot)
    slot = std::make_unique<Setup>(w);
  return *slot;
}

void run_eval(benchmark::State& state, const Workload& w, std::size_t policies, std::size_t chunk,
              bool graphed, Precision precision = Precision::fp32) {
  Setup& s = setup_for(w);
  const ExecSpace& space = s.stream.space();
  eval::BacktestConfig config;
  config.bars_per_year = 98280;
  config.chunk_bars = chunk;
  config.precision = precision;
  const nn::ParameterLayout layout(s.spec);
  Kokkos::View<float**, Kokkos::LayoutRight, DeviceMemory> parameters("bench::parameters", policies,
                                                                      layout.size());
  {
    auto host = Kokkos::create_mirror_view(parameters);
    for (std::size_t k = 0; k < policies; ++k) {
      const std::vector<float> p = nn::initial_parameters(layout, 100 + k);
      for (std::size_t j = 0; j < p.size(); ++j)
        host(k, j) = p[j];
    }
    Kokkos::deep_copy(parameters, host);
  }
  eval::BacktestEvaluator evaluator(space, *s.features, s.stats, s.spec, s.window, config,
                                    policies);
  const eval::Parameters first = Kokkos::subview(parameters, 0, Kokkos::ALL);
  auto once = [&] {
    if (policies > 1) {
      evaluator.evaluate_many(parameters);
    } else if (graphed) {
      evaluator.evaluate_graphed(eval::parameter_rows(first.data(), 1, first.extent(0)));
    } else {
      evaluator.evaluate(first);
    }
  };
  once();  // warm-up (and the graph's capture)
  double sharpe = evaluator.evaluate(first).sharpe;
  for (auto _ : state) {
    compat::fence(space, "dqntrader::bench::eval: start from an idle device");
    const auto start = std::chrono::steady_clock::now();
    once();  // returns after the metrics reached the host
    const auto stop = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(stop - start).count());
  }
  const double bars = static_cast<double>(s.window.returns()) * policies;
  state.counters["bars/s"] =
      benchmark::Counter(bars, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["FLOP/s"] =
      benchmark::Counter(network_flops(s.spec, s.window.returns()) * policies,
                         benchmark::Counter::kIsIterationInvariantRate);
  state.counters["policies"] = static_cast<double>(policies);
  state.counters["sharpe_policy0"] = sharpe;
  state.SetLabel(to_string(config.precision));
}

void register_all() {
  static const Workload eval_1m{"EVAL-1M", 1000000, {512, 512, 512}};
  static const Workload eval_cpu{"EVAL-CPU", 100000, {256, 256}};
  auto add = [](const std::string& name, auto fn) {
    benchmark::RegisterBenchmark(name.c_str(), fn)->UseManualTime()->Unit(benchmark::kMillisecond);
  };
  add("eval/EVAL-1M/K1", [](benchmark::State& s) { run_eval(s, eval_1m, 1, 131072, false); });
  add("eval/EVAL-1M/K1/graphed",
      [](benchmark::State& s) { run_eval(s, eval_1m, 1, 131072, true); });
  add("eval/EVAL-1M/K64", [](benchmark::State& s) { run_eval(s, eval_1m, 64, 8192, false); });
#if defined(DQNTRADER_BACKEND_CUDA)
  // The same in bf16 products, what evaluations took on CUDA before every one that reports or
  // deploys took float32 (the decision a policy file defines): the change's cost.
  add("eval/EVAL-1M/K1/bf16",
      [](benchmark::State& s) { run_eval(s, eval_1m, 1, 131072, false, Precision::bf16); });
  add("eval/EVAL-1M/K64/bf16",
      [](benchmark::State& s) { run_eval(s, eval_1m, 64, 8192, false, Precision::bf16); });
#endif
  add("eval/EVAL-CPU/K1", [](benchmark::State& s) { run_eval(s, eval_cpu, 1, 16384, false); });
  add("eval/EVAL-CPU/K1/graphed",
      [](benchmark::State& s) { run_eval(s, eval_cpu, 1, 16384, true); });
  add("eval/EVAL-CPU/K8", [](benchmark::State& s) { run_eval(s, eval_cpu, 8, 4096, false); });
}

const bool registered = (register_all(), true);

}  // namespace
}  // namespace dqntrader

// Training epochs at the reference workloads (docs/BENCHMARKS.md, Reference workloads):
//   EPOCH      2,000 gradient steps at batch 1,024, 256 environments stepping one bar per
//              gradient step, replay capacity 1,000,000, double DQN, Huber, Adam lr 1e-4,
//              clip 10, hard target update every 1,000 steps; network 64-512-512-512-3;
//              then EVAL-1M validation (1,000,000 bars, one weight set).
//   EPOCH-CPU  the 2-core scale: hidden 256-256, batch 256, 200 steps, 100,000 validation bars.
//   POP-K      a population of K members trained as one loop (seeds 1..K), on the EPOCH
//              network and batch (train/POP-K/EPOCH/K<k>) and on the train defaults' network
//              and batch (train/POP-K/default/K<k>), K = 1 ... 64 (the defaults' to 256);
//              on OpenMP the defaults' network for K = 1 ... 8 (train/POP-K-CPU/default/K<k>);
//              on CUDA the defaults' network also on the fused learning path
//              (train/POP-K/default-fused/K<k>) and on the path --learning-path auto takes
//              (train/POP-K/default-auto/K<k>, named in the label; train/learning_path.hpp).
//              200 steps an epoch
//              (100 on OpenMP), validated on 100,000 bars (20,000), recorded cycles as
//              --graph-steps auto chooses them.
// Reports the epoch time split into training and validation, steps per second and the
// time of one step (environment step, sampling, learning step and the periodic guard,
// vaccine and probe work, amortised) and, graphed, the kernels a recorded step holds; for
// populations also agent-steps per second (members x steps / training seconds), the device
// memory the population takes (free memory before construction less after the first epoch;
// a member's share is the slope over K) and the rate of the step's products (the FLOPs the
// products need: every member's online network over the batches' s and s' and the
// environments' states and its target over s' forward, the online network's weight and input
// gradients over the batch backward; on CUDA one member's target runs over all the rows, more
// than it needs, which is not counted).
#include <benchmark/benchmark.h>
#include <Kokkos_Core.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/execution.hpp"
#include "dqntrader/data/synthetic.hpp"
#include "dqntrader/train/dqn_trainer.hpp"

namespace dqntrader {
namespace {

struct Workload {
  const char* name;
  std::vector<std::size_t> hidden;
  std::size_t batch, steps, environments, validation_bars, training_bars;
};

// The benchmarks' stream, released before Kokkos finalizes.
exec::StreamSpace& stream_space() {
  static std::unique_ptr<exec::StreamSpace> stream;
  static const bool hooked = [] {
    Kokkos::push_finalize_hook([] { stream.reset(); });
    return true;
  }();
  (void)hooked;
  if (!stream)
    stream = std::make_unique<exec::StreamSpace>();
  return *stream;
}

void run_epochs(benchmark::State& state, const Workload& w, std::size_t graph_steps) {
  train::TrainConfig config;
  config.hidden = w.hidden;
  config.batch_size = w.batch;
  config.steps_per_epoch = w.steps;
  config.environments = w.environments;
  config.replay_capacity = 1000000;
  config.learning_starts = w.batch;
  config.learning_rate = 1e-4;
  config.clip_norm = 10;
  config.target_update = 1000;
  config.return_window = 56;  // 56 returns + volatility + 4 ofi = 61 features, state 64
  config.volatility_window = 16;
  config.ofi_window = 4;
  config.bars_per_year = 98280;
  config.chunk_bars = 131072;
  config.epochs = 1000;
  config.graph_steps = graph_steps;
  const std::size_t total = w.training_bars + w.validation_bars + 57;
  config.val_fraction =
      static_cast<double>(w.validation_bars + 1) / static_cast<double>(total - 56);
  data::SynthConfig synth;
  synth.bars = total;
  synth.seed = 7;
  synth.interval_ms = 60000;
  const data::Bars bars = data::generate_bars(synth);
  train::DqnTrainer trainer(stream_space().space(), config, bars);
  trainer.run_epoch();  // warm-up: first launches, the validation graph's capture
  double train_seconds = 0, validation_seconds = 0, epochs = 0;
  for (auto _ : state) {
    // Returns after validation reached the host.
    const train::EpochReport r = trainer.run_epoch().front();
    state.SetIterationTime(r.train_seconds + r.validation_seconds);
    train_seconds += r.train_seconds;
    validation_seconds += r.validation_seconds;
    epochs += 1;
  }
  state.counters["train_s"] = train_seconds / epochs;
  state.counters["validation_s"] = validation_seconds / epochs;
  state.counters["steps/s"] = static_cast<double>(w.steps) * epochs / train_seconds;
  state.counters["step_us"] = 1e6 * train_seconds / (static_cast<double>(w.steps) * epochs);
  state.counters["kernels/step"] = trainer.recorded_kernels_per_step();
  state.SetLabel(to_string(config.precision));
}

struct PopulationWorkload {
  const char* name;
  std::vector<std::size_t> hidden;  // empty: the train defaults' network and batch
  std::size_t batch, environments;
  std::size_t steps, validation_bars, training_bars;
  const char* learning_path = "products";  // --learning-path
};

// FLOPs the products of one agent-step need (see the header).
double step_flops(const train::TrainConfig& c, std::size_t inputs) {
  std::vector<double> widths{static_cast<double>(inputs)};
  for (std::size_t h : c.hidden)
    widths.push_back(static_cast<double>(h));
  widths.push_back(3);
  double forward = 0, input_gradients = 0;
  for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
    forward += widths[l] * widths[l + 1];
    if (l > 0)
      input_gradients += widths[l] * widths[l + 1];
  }
  const double b = static_cast<double>(c.batch_size), e = static_cast<double>(c.environments);
  return 2 * ((2 * b + e) * forward + b * forward + b * (forward + input_gradients));
}

void run_population(benchmark::State& state, const PopulationWorkload& w, std::size_t k) {
  train::TrainConfig config;
  if (!w.hidden.empty()) {
    config.hidden = w.hidden;
    config.batch_size = w.batch;
    config.environments = w.environments;
    config.learning_rate = 1e-4;
    config.target_update = 1000;
    config.return_window = 56;  // state 64, as EPOCH
    config.chunk_bars = 131072;
  }
  config.learning_path = w.learning_path;
  config.steps_per_epoch = w.steps;
  config.learning_starts = config.batch_size;
  config.epochs = 1000;
  const std::size_t warmup = std::max(config.return_window, config.volatility_window) + 1;
  const std::size_t total = w.training_bars + w.validation_bars + warmup;
  config.val_fraction =
      static_cast<double>(w.validation_bars + 1) / static_cast<double>(total - warmup + 1);
  data::SynthConfig synth;
  synth.bars = total;
  synth.seed = 7;
  synth.interval_ms = 60000;
  const data::Bars bars = data::generate_bars(synth);
  // Members of different seeds train on one market: the bars given, named as a data file
  // would be (the built-in market's seed would choose the data too).
  config.data = "bench:synthetic-seed-7";
  std::vector<train::TrainConfig> members(k, config);
  for (std::size_t m = 0; m < k; ++m)
    members[m].seed = 1 + m;
  Kokkos::fence();
  const double free_before = static_cast<double>(exec::free_memory());
  train::DqnTrainer trainer(stream_space().space(), members, bars);
  trainer.run_epoch();  // warm-up: first launches, the recorded cycle and validation graph
  const double free_after = static_cast<double>(exec::free_memory());
  double train_seconds = 0, validation_seconds = 0, epochs = 0;
  for (auto _ : state) {
    const train::EpochReport r = trainer.run_epoch().front();
    state.SetIterationTime(r.train_seconds);
    train_seconds += r.train_seconds;
    validation_seconds += r.validation_seconds;
    epochs += 1;
  }
  const double steps = static_cast<double>(w.steps) * epochs;
  const double members_k = static_cast<double>(k);
  state.counters["members"] = members_k;
  state.counters["train_s"] = train_seconds / epochs;
  state.counters["validation_s"] = validation_seconds / epochs;
  state.counters["step_us"] = 1e6 * train_seconds / steps;
  state.counters["agent_steps/s"] = members_k * steps / train_seconds;
  state.counters["kernels/step"] = trainer.recorded_kernels_per_step();
  state.counters["device_MiB"] = (free_before - free_after) / (1024.0 * 1024.0);
  state.counters["product_TFLOP/s"] =
      members_k * steps * step_flops(config, trainer.network().state_size()) / train_seconds / 1e12;
  state.SetLabel(std::string(to_string(config.precision)) + ", " +
                 train::describe(trainer.learning_path()));
}

void register_all() {
  static const Workload epoch{"EPOCH", {512, 512, 512}, 1024, 2000, 256, 1000000, 200000};
  static const Workload epoch_cpu{"EPOCH-CPU", {256, 256}, 256, 200, 256, 100000, 50000};
  for (const Workload* w : {&epoch, &epoch_cpu}) {
    // Eager: every kernel launched one by one; graphed: cycles of 50 steps (the vaccine,
    // guard and probe periods all divide 50) recorded once and replayed.
    for (std::size_t graph_steps : {std::size_t{0}, std::size_t{50}}) {
      benchmark::RegisterBenchmark(
          (std::string("train/") + w->name + (graph_steps > 0 ? "/graphed" : "/eager")).c_str(),
          [w, graph_steps](benchmark::State& s) { run_epochs(s, *w, graph_steps); })
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->Iterations(3);
    }
  }
#if defined(DQNTRADER_BACKEND_CUDA)
  static const PopulationWorkload pop_epoch{"POP-K/EPOCH", {512, 512, 512}, 1024,  256,
                                            200,           100000,          200000};
  static const PopulationWorkload pop_default{"POP-K/default", {}, 0, 0, 200, 100000, 200000};
  // The defaults' network on the fused path, and on the path --learning-path auto chooses (the
  // label names it).
  static const PopulationWorkload pop_fused{
      "POP-K/default-fused", {}, 0, 0, 200, 100000, 200000, "fused"};
  static const PopulationWorkload pop_auto{
      "POP-K/default-auto", {}, 0, 0, 200, 100000, 200000, "auto"};
  const std::vector<std::size_t> defaults_k{1, 2, 4, 8, 16, 32, 64, 128, 256};
  const std::vector<std::pair<const PopulationWorkload*, std::vector<std::size_t>>> populations{
      {&pop_epoch, {1, 2, 4, 8, 16, 32, 64}},
      {&pop_default, defaults_k},
      {&pop_fused, defaults_k},
      {&pop_auto, defaults_k}};
#else
  static const PopulationWorkload pop_cpu{"POP-K-CPU/default", {}, 0, 0, 100, 20000, 50000};
  const std::vector<std::pair<const PopulationWorkload*, std::vector<std::size_t>>> populations{
      {&pop_cpu, {1, 2, 4, 8}}};
#endif
  for (const auto& [w, ks] : populations) {
    for (std::size_t k : ks) {
      benchmark::RegisterBenchmark(
          (std::string("train/") + w->name + "/K" + std::to_string(k)).c_str(),
          [w = w, k](benchmark::State& s) { run_population(s, *w, k); })
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond)
          ->Iterations(3);
    }
  }
}

const bool registered = (register_all(), true);

}  // namespace
}  // namespace dqntrader

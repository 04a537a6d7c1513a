// Training epochs at the reference workloads of DESIGN.md section 6:
//   EPOCH      2,000 gradient steps at batch 1,024, 256 environments stepping one bar per
//              gradient step, replay capacity 1,000,000, double DQN, Huber, Adam lr 1e-4,
//              clip 10, hard target update every 1,000 steps; network 64-512-512-512-3;
//              then EVAL-1M validation (1,000,000 bars, one weight set).
//   EPOCH-CPU  the 2-core scale: hidden 256-256, batch 256, 200 steps, 100,000 validation bars.
// Reports the epoch time split into training and validation, steps per second and the
// time of one step (environment step, sampling, learning step and the periodic guard,
// vaccine and probe work, amortised) and, graphed, the kernels a recorded step holds.
#include <benchmark/benchmark.h>
#include <Kokkos_Core.hpp>

#include <map>
#include <memory>
#include <string>

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

void run_epochs(benchmark::State& state, const Workload& w, std::size_t graph_steps) {
  static std::unique_ptr<exec::StreamSpace> stream;
  static const bool hooked = [] {
    Kokkos::push_finalize_hook([] { stream.reset(); });
    return true;
  }();
  (void)hooked;
  if (!stream)
    stream = std::make_unique<exec::StreamSpace>();
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
  train::DqnTrainer trainer(stream->space(), config, bars);
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
}

const bool registered = (register_all(), true);

}  // namespace
}  // namespace dqntrader

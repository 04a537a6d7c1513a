// DQNTrainer: double DQN trained on the device, validated on the device.
//
// One step, with no host round trip, on the execution space given and a side stream that
// takes the work which can run beside it (step() in dqn_trainer.cpp says which; the order
// below is the order of the data): once learning has started, a batch is drawn from the
// replay ring (from the vaccine set every vaccine_interval-th step) and one kernel rebuilds
// by index the batch's states s and s' and the environments' states; one pass of the online
// and the target network together (one batched product per hidden layer) evaluates all of
// them up to the head; the fused TD kernel evaluates the head where it needs it and gives the
// Huber loss, dL/dQ (from the target's Q-values of s') and the environments' online Q-values;
// the environments act on those and write their transitions into the ring (before learning
// starts, the online network evaluates the environments alone); then backward
// fills the gradients, Adam (with clipping and its finite check) updates, the target follows
// (hard every target_update steps or soft with tau), the guard checks every guard_interval
// steps and the causal probe runs every probe_interval steps. A batch is drawn before the
// step's own transitions enter the ring. Nothing is logged and nothing is read back inside
// the loop: at the epoch's end one small struct of sums comes back and the BacktestEvaluator
// validates the online network on the validation window.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dqntrader/core/types.hpp"
#include "dqntrader/data/bars.hpp"
#include "dqntrader/data/features.hpp"
#include "dqntrader/eval/window_metrics.hpp"
#include "dqntrader/io/checkpoint_file.hpp"
#include "dqntrader/io/policy_file.hpp"
#include "dqntrader/nn/network_spec.hpp"
#include "dqntrader/train/train_config.hpp"

namespace dqntrader::train {

struct EpochReport {
  std::size_t epoch = 0;                  // 1-based
  std::int64_t steps = 0;                 // steps taken so far
  std::int64_t learning_steps = 0;        // of which gradient steps
  double loss = 0, mean_q = 0;            // means over the epoch's gradient steps (NaN if none)
  double epsilon = 0, learning_rate = 0;  // at the epoch's end
  std::int64_t skipped = 0;   // gradient steps skipped for non-finite gradients, this epoch
  std::int64_t restores = 0;  // guard restores, this epoch
  std::int64_t consecutive_faults = 0;  // skipped steps or restores in a row at the epoch's end
  std::vector<eval::WindowMetrics> validation;  // one per walk-forward window
  double validation_sharpe = 0;                 // mean over the windows
  std::vector<std::pair<std::string, double>>
      probe;  // mean |dQ| per feature group (NaN if no probe ran)
  double train_seconds = 0, validation_seconds = 0;
};

/// A run's bar ranges: training at the start of the bars after the feature warm-up and
/// validation on the last val_fraction of them, or, with separate validation data
/// (validation_bars > 0), training on all the bars and validation on all of that data, each
/// after the warm-up. InputError when either is too short for the settings.
struct RunWindows {
  std::size_t train_begin = 0, train_end = 0, val_begin = 0, val_end = 0;
};
RunWindows split_windows(const TrainConfig& config, std::size_t bars, std::size_t validation_bars,
                         std::size_t warmup);

class DqnTrainer {
 public:
  /// bars: the training data (and, without validation, the validation tail); validation:
  /// separate validation bars or nullptr. space should be an exec::StreamSpace's, so that
  /// validation can run as a recorded graph on CUDA.
  DqnTrainer(const ExecSpace& space, const TrainConfig& config, const data::Bars& bars,
             const data::Bars* validation = nullptr);
  ~DqnTrainer();
  DqnTrainer(const DqnTrainer&) = delete;
  DqnTrainer& operator=(const DqnTrainer&) = delete;

  /// steps_per_epoch steps, then validation.
  EpochReport run_epoch();

  /// Metrics of parameters (host, flat layout) on the validation windows.
  std::vector<eval::WindowMetrics> validate(const std::vector<float>& parameters);

  /// The online network's parameters (host copy).
  std::vector<float> parameters() const;

  /// Everything needed to continue exactly where the trainer stands (between epochs):
  /// online and target parameters, Adam's moments and counters, the guard's snapshot and
  /// counters, the replay ring and its count, the environments, the step counter (the
  /// position of every random stream) and the host's counters.
  std::vector<io::Section> state() const;
  /// Puts a state back; InputError (naming source) when a section is missing or sized for
  /// another configuration.
  void restore(const std::vector<io::Section>& sections, const std::string& source);

  /// Writes NaN at the next step into one place, for testing fault handling: "batch" (a
  /// sampled return), "gradient", "weight" (online parameter 0) or "price" (every close
  /// price from then on). InputError for another kind.
  void inject_fault(const std::string& kind);
  /// Kernels per step in the recorded cycle of graph_steps steps (the vaccine, guard and
  /// probe work amortised over the cycle); 0 before a cycle is recorded, without graphs and
  /// on OpenMP, where nothing is recorded.
  double recorded_kernels_per_step() const;

  /// A policy file of the given parameters, with this run's features and statistics.
  io::PolicyFile policy(const std::vector<float>& parameters) const;

  const nn::NetworkSpec& network() const;
  const data::FeatureSpec& features() const;
  /// Training and validation bar ranges (validation in the validation data when separate).
  std::pair<std::size_t, std::size_t> training_window() const;
  std::pair<std::size_t, std::size_t> validation_window() const;
  /// The walk-forward validation windows (one unless val_windows says more), in the bars the
  /// validation runs on (the validation data when separate).
  const std::vector<eval::BarRange>& validation_windows() const;
  /// The position each action stands for.
  const std::vector<double>& positions() const;
  std::size_t vaccine_bars() const;

  class Engine;

 private:
  std::unique_ptr<Engine> m_engine;
};

}  // namespace dqntrader::train

// DQNTrainer: double DQN trained on the device, validated on the device, for a population
// of K members trained as one loop (one agent is a population of one: there is no other path).
//
// The members share the shapes (network, batch, environments, replay capacity, episode
// length, features), the data and the loop (epochs, steps, intervals) and may differ in the
// rest (train_config.hpp: a setting's Scope). Every device array carries the member as
// its outermost index; per-member settings live in small device arrays read by the kernels;
// every random stream is keyed by (member seed, step, purpose), so member i's numbers do not
// depend on K or on its neighbours.
//
// One step, with no host round trip, on the execution space given and a side stream that
// takes the work which can run beside it (step() in dqn_trainer.cpp says which; the order
// below is the order of the data): once learning has started, a batch is drawn from each
// member's replay ring (from the vaccine set every vaccine_interval-th step, for the members
// that use it) and one kernel rebuilds by index the batches' states s and s' and the
// environments' states; one pass of every member's online and target networks together (one
// batched product per hidden layer) evaluates all of them up to the head; the fused TD kernel
// evaluates the heads where it needs them and gives each member's Huber loss, dL/dQ (from its
// target's Q-values of s') and its environments' online Q-values; the environments act on
// those and write their transitions into their rings (before learning starts, the online
// networks evaluate the environments alone); then backward fills the gradients (one batched
// product per layer over the members), Adam (each member's clipping and finite check) updates,
// the targets follow (hard every member's target_update steps or soft with its tau), the guard
// checks every guard_interval steps and the causal probe runs every probe_interval steps. A
// batch is drawn before the step's own transitions enter the ring. Nothing is logged and
// nothing is read back inside the loop: at the epoch's end one small struct of sums per member
// comes back and the BacktestEvaluator validates every member's online network on the
// validation window in one pass.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dqntrader/core/types.hpp"
#include "dqntrader/data/bars.hpp"
#include "dqntrader/data/features.hpp"
#include "dqntrader/eval/policy_file.hpp"
#include "dqntrader/eval/window_metrics.hpp"
#include "dqntrader/io/checkpoint_file.hpp"
#include "dqntrader/nn/network_spec.hpp"
#include "dqntrader/train/learning_path.hpp"
#include "dqntrader/train/run_data.hpp"
#include "dqntrader/train/train_config.hpp"

namespace dqntrader::io {
class Snapshot;
}

namespace dqntrader::train {

/// One member's epoch.
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
  double train_seconds = 0, validation_seconds = 0;  // the population's, shared
};

class DqnTrainer {
 public:
  /// members: each member's settings (check_population() must accept them); bars: the
  /// training data (and, without validation, the validation tail); validation: separate
  /// validation bars or nullptr; both must outlive the trainer (compact() reads them again). space
  /// should be an exec::StreamSpace's, so that validation can run as a recorded graph on CUDA.
  DqnTrainer(const ExecSpace& space, const std::vector<TrainConfig>& members,
             const data::Bars& bars, const data::Bars* validation = nullptr);
  /// One agent: a population of one.
  DqnTrainer(const ExecSpace& space, const TrainConfig& config, const data::Bars& bars,
             const data::Bars* validation = nullptr);
  ~DqnTrainer();
  DqnTrainer(const DqnTrainer&) = delete;
  DqnTrainer& operator=(const DqnTrainer&) = delete;

  std::size_t members() const;

  /// steps_per_epoch steps of every active member, then validation of every member in one
  /// pass: one report per member (a stopped member's repeats its last state; one that
  /// compact() freed has validation_sharpe NaN). interrupted, when given, is asked before each
  /// step (or recorded cycle of steps); when it says true, Interrupted is thrown there.
  std::vector<EpochReport> run_epoch(const std::function<bool()>& interrupted = {});

  /// Member m's online network's parameters (host copy).
  std::vector<float> parameters(std::size_t member) const;

  /// Everything needed to continue exactly where the population stands (between epochs):
  /// every member's online and target parameters, Adam's moments and counters, the guard's
  /// snapshots and counters, the replay rings and their counts, the environments, the step
  /// counters (the position of every random stream), which members still step, and the host's
  /// counters.
  std::vector<io::Section> state() const;
  /// The same state into a snapshot (what a checkpoint writes from): the device's part copied
  /// into its reserved memory.
  void snapshot(io::Snapshot& out) const;
  /// Puts a state back; InputError (naming source) when a section is missing or sized for
  /// another configuration.
  void restore(const std::vector<io::Section>& sections, const std::string& source);

  /// Writes NaN at member m's next step into one place, for testing fault handling: "batch"
  /// (a sampled return), "gradient", "weight" (online parameter 0) or "price" (the member's
  /// every reward from then on: every close price it sees is NaN). InputError for another
  /// kind. The other members are not touched.
  void inject_fault(std::size_t member, const std::string& kind);
  /// Member m takes no more steps (early stopping, a spent fault budget): its state stays as
  /// it is, and the others go on unchanged (nothing for a member compact() freed).
  void stop(std::size_t member);
  /// Frees the slots of the stopped members: the population is made again of the members that
  /// still step, their state moved into it through the host (so the two never hold device
  /// memory together), and a stopped member's step costs nothing from then on. Members keep
  /// their indices; a freed member has no parameters (Error) and a report of NaN. Its
  /// bitwise effect on the others: none on OpenMP; on CUDA the batched products may choose
  /// other algorithms for the smaller batch count (within float rounding). The state
  /// (state()) records which members hold slots, and restore() makes the population of those.
  void compact();
  /// The members that hold a slot (members() until compact() frees some).
  std::size_t slots() const;

  /// Population based training's exploit (sweep/schedule.hpp): for each (to, from), member
  /// `to` takes member `from`'s online and target networks, Adam's moments and its position in
  /// the learning-rate schedule and bias correction, and the guard's snapshot, device to
  /// device; its replay ring, environments, random streams and fault counts stay its own. No
  /// member is copied to twice or both copied to and from (Error otherwise).
  void copy_members(const std::vector<std::pair<std::size_t, std::size_t>>& copies);
  /// Member m's settings now: those given, or as set_member last changed them.
  const TrainConfig& member(std::size_t m) const;
  /// Changes member m's settings from its next step on; only its own settings may change
  /// (Scope::learning: not its seed, nor its vaccine or probe on or off, and its
  /// n-step at most the population's largest when it was made). InputError otherwise. The
  /// state (state()) carries the members' settings.
  void set_member(std::size_t m, const TrainConfig& settings);
  /// Kernels per step in the recorded cycle (the vaccine, guard and probe work amortised over
  /// the cycle); 0 before a cycle is recorded, without graphs and on OpenMP, where nothing is
  /// recorded.
  double recorded_kernels_per_step() const;

  /// A policy file of the given parameters, with this run's features and statistics.
  eval::PolicyFile policy(const std::vector<float>& parameters) const;

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
  /// How the learning steps compute (--learning-path; learning_step.hpp).
  LearningPath learning_path() const;

  class Engine;

 private:
  std::unique_ptr<Engine> make_engine(const std::vector<std::size_t>& slots) const;
  std::size_t slot(std::size_t member) const;
  // What set_member checks: InputError when member m cannot train with settings.
  void check_member(std::size_t m, const TrainConfig& settings) const;

  ExecSpace m_space;
  const data::Bars* m_bars;
  const data::Bars* m_validation;
  data::FeatureSpec m_spec;
  TrainConfig m_loop;        // the population's loop (population_config)
  int m_n_step_windows = 1;  // the n-step the replay's windows are sized for
  // population_settings() of the members: what set_member may not change.
  std::vector<std::pair<std::string, std::string>> m_shared;
  std::vector<TrainConfig> m_members;  // every member's settings now
  std::vector<std::size_t> m_slots;    // the members the engine holds, in its order
  std::unique_ptr<Engine> m_engine;
};

}  // namespace dqntrader::train

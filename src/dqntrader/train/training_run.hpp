// A whole training run of a population (one agent is a population of one): data, the
// trainer, the epoch loop with each member's early stopping and fault budget, checkpoints of
// the whole population, and one run directory per member:
//   config.json               every effective setting of the member
//   metrics.jsonl             one record per epoch (deterministic: the same seed gives the
//                             same file)
//   timings.jsonl             the epoch's training and validation seconds (and the epoch
//                             before's records and checkpoint seconds), then the run's phases
//                             ({"run": to_json(RunPhases)})
//   best.dqnpolicy            the parameters with the best validation Sharpe so far
//   last.dqnpolicy            the parameters after the last epoch
//   baselines.json            the built-in policies' validation metrics (written at the start)
//   final_metrics.json        the validation metrics of the best policy (docs/METRICS.md
//                             keys), under "baselines" those of the built-in policies, the
//                             validation bars as "validation_window" (first_bar, last_bar)
//                             and, with a test window, "test" (to_json(TestResult))
//   fault_report.json         only when the fault budget stopped the member
// and, in the population's checkpoint directory (a single run's: its run directory),
//   checkpoint-<E>.dqnckpt    the population's state after epoch E (the last `checkpoints`)
#pragma once

#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dqntrader/core/types.hpp"
#include "dqntrader/data/bars.hpp"
#include "dqntrader/eval/backtest_config.hpp"
#include "dqntrader/eval/window_metrics.hpp"
#include "dqntrader/train/run_data.hpp"
#include "dqntrader/train/train_config.hpp"

namespace dqntrader::io {
class BackgroundWriter;
class SnapshotPool;
}  // namespace dqntrader::io

namespace dqntrader::train {

/// A built-in policy on the run's validation windows.
struct Baseline {
  std::string policy;                        // buy-and-hold, flat, sign-of-ofi
  std::vector<eval::WindowMetrics> windows;  // one per walk-forward window
  double validation_sharpe = 0;              // mean over the windows, as the run's own
};

/// The test window, looked at once when a run ends (after every choice it made): the selected
/// policy (best validation epoch), the last policy and the built-in policies there.
struct TestResult {
  std::string source;                       // the file of the test bars (or the built-in market)
  std::size_t first_bar = 0, last_bar = 0;  // the window, in those bars
  std::uint64_t fingerprint = 0;            // of those bars
  eval::WindowMetrics best, last;
  std::vector<std::pair<std::string, eval::WindowMetrics>> baselines;  // policy, metrics
};

/// final_metrics.json's "test": {"window": {"data", "first_bar", "last_bar", "fingerprint"},
/// "best": metrics, "last": metrics, "baselines": {policy: metrics}}.
nlohmann::json to_json(const TestResult& test);

/// Where a population's wall time went, in seconds: its data read; its set-up (the trainer,
/// its directories, a resume); the baselines; learning and validation (the epochs' own);
/// each epoch's records and checkpoint (its snapshot, and any wait for the files before it:
/// checkpoint_wait, the part of checkpoint spent waiting for the writer to take it);
/// the schedule's decisions; the test window (and the members that never learned); its files
/// at the end (and, where the run writes alone, the wait for them).
struct RunPhases {
  double data = 0, setup = 0, baselines = 0, learning = 0, validation = 0, records = 0,
         checkpoint = 0, checkpoint_wait = 0, schedule = 0, test = 0, files = 0, wall = 0;
};
/// {"data_seconds", ..., "wall_seconds"}, as timings.jsonl's last line holds it under "run".
nlohmann::json to_json(const RunPhases& phases);
/// "learning and validation 3.96 + 0.41 s of 5.20 s (84%); data 0.01, set-up ..., files 0.02 s".
std::string phases_line(const RunPhases& phases);

struct RunResult {
  std::size_t epochs = 0;
  std::size_t best_epoch = 0;
  double best_sharpe = 0;
  double last_sharpe = 0;    // the validation Sharpe of the last epoch run
  eval::WindowMetrics best;  // validation metrics of the best policy (first window)
  bool stopped_early = false;
  bool failed = false;              // its fault budget stopped it (fault_report.json)
  std::string failure;              // what stopped it
  std::vector<Baseline> baselines;  // buy-and-hold, flat and, with ofi, sign-of-ofi
  std::optional<TestResult> test;   // none without a test window, or when the member failed
  // What the run wrote last into each of its files (by name: metrics.jsonl, best.dqnpolicy,
  // ...): their content once its writes have reached the disk.
  std::map<std::string, std::string> files;
  RunPhases phases;  // its population's
  // What its population's schedule did to it: the "schedule" entries of its metrics.jsonl,
  // each with its "epoch" (empty without a schedule).
  nlohmann::json schedule = nlohmann::json::array();
};

struct ResumeOptions {
  bool resume = false;  // continue from the newest valid checkpoint in config.out
  // With resume: even when settings or data differ from the checkpoint's (says what differs).
  // Without: start again in a run directory that holds a run, clearing its files first.
  bool force = false;
};

/// What a directory holds of dqntrader's: "a sweep" (sweep.json), "a training run" (a run's
/// config.json, records, policies or checkpoints), or "" (nothing, or no directory).
std::string held_run(const std::string& directory);

/// The built-in policies on the validation windows of validation_bars (the bars validation
/// runs on), evaluated on the device once.
std::vector<Baseline> evaluate_baselines(const ExecSpace& space, const data::Bars& validation_bars,
                                         const std::vector<eval::BarRange>& windows,
                                         const eval::BacktestConfig& config);

/// Baselines as JSON: policy -> {"validation": metrics of the first window, "validation_sharpe",
/// and "validation_windows" when there are several}, as metrics.jsonl records a policy.
nlohmann::json baselines_json(const std::vector<Baseline>& baselines);

/// What the caller of a run follows and may stop it by.
struct RunHooks {
  // Called after each epoch's records and checkpoint with it and the epochs to run; what it
  // throws stops the run there (its checkpoint written).
  std::function<void(std::size_t epoch, std::size_t epochs)> on_epoch;
  // Asked before every step (or recorded cycle of steps): true stops the run there with
  // Interrupted, its last checkpoint its state (resume continues from it bitwise).
  std::function<bool()> interrupted;
};

/// Runs training as config says, in config.out; progress and one summary line per epoch go to
/// log. Error when the fault budget stopped it. InputError, before anything is written, when
/// config.out holds a sweep, or a training run and resume asks neither to resume nor to force.
RunResult run_training(const ExecSpace& space, const TrainConfig& config, std::ostream& log,
                       const ResumeOptions& resume = {}, const RunHooks& hooks = {});

/// What a population's schedule did to one member after an epoch.
struct ScheduleStep {
  nlohmann::json record;  // goes into its metrics.jsonl record of the epoch as "schedule"
  bool stop = false;      // it takes no more steps (stopped early)
};

class DqnTrainer;

/// What the populations of a sweep share where their settings agree: the bars their settings
/// load, and the built-in policies' metrics on their validation and test windows. The first
/// population that needs one computes it; the others with the same settings take it from here.
class SharedInputs {
 public:
  /// The bars of data_key(population), loaded once.
  std::shared_ptr<const RunData> data(const TrainConfig& population);
  /// The baselines that key names (the bars, the windows, the backtest settings), made once.
  const std::vector<Baseline>& baselines(const std::string& key,
                                         const std::function<std::vector<Baseline>()>& make);

 private:
  std::map<std::string, std::shared_ptr<const RunData>> m_data;
  std::map<std::string, std::vector<Baseline>> m_baselines;
};

struct PopulationOptions {
  std::string checkpoints;  // the directory of the population's checkpoints
  // Where its files are written: the caller's writer (a sweep's, whose populations follow one
  // another while their files reach the disk; the caller waits for it), or, without one, the
  // run's own, waited for before the run returns.
  io::BackgroundWriter* writer = nullptr;
  // The pinned memory its checkpoints are copied into from the device: the caller's (a
  // sweep's, reused by population after population; it must outlive the writer's batches), or
  // the run's own.
  io::SnapshotPool* snapshots = nullptr;
  // What it shares with the populations before and after it (a sweep's), or none.
  SharedInputs* shared = nullptr;
  // Called after each epoch with it and the epochs to run (progress of a sweep).
  std::function<void(std::size_t epoch, std::size_t epochs)> on_epoch;
  // Asked before every step: true stops the run with Interrupted (RunHooks::interrupted).
  std::function<bool()> interrupted;
  // The population's schedule (sweep/schedule.hpp), after each epoch's results and before its
  // records and checkpoint: given the epoch, each member's validation Sharpe of it and whether
  // it still trains, it may change the members through the trainer and says what it did to
  // each (none: nothing happens between epochs).
  std::function<std::vector<ScheduleStep>(std::size_t epoch, const std::vector<double>& sharpes,
                                          const std::vector<bool>& running, DqnTrainer& trainer)>
      schedule;
};

/// Trains members (check_population() must accept them) as one population, each in its run
/// directory members[m].out, the population's checkpoints in options.checkpoints (resume
/// continues from the newest there). A member whose fault budget runs out is stopped and
/// reported (failed, fault_report.json) while the others go on. One result per member.
std::vector<RunResult> run_population(const ExecSpace& space,
                                      const std::vector<TrainConfig>& members,
                                      const PopulationOptions& options, std::ostream& log,
                                      const ResumeOptions& resume = {});

}  // namespace dqntrader::train

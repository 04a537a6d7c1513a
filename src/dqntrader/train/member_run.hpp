// One member's run within its population's: its run directory and the files in it, its records
// so far and where it stands (the best epoch, early stopping, its fault budget), and what its
// population's checkpoint keeps of it.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dqntrader/io/atomic_file.hpp"
#include "dqntrader/train/dqn_trainer.hpp"
#include "dqntrader/train/run_checkpoint.hpp"
#include "dqntrader/train/training_run.hpp"

namespace dqntrader::train {

struct MemberRun {
  explicit MemberRun(const TrainConfig& settings);

  /// The files it wrote since the last take (records, policies, final metrics), in order: its
  /// population writes them beside its next steps (io::write_files). Their content is in
  /// result.files as soon as they are given.
  std::vector<io::FileWrite> take_writes() { return std::exchange(m_writes, {}); }
  /// Replaces the file name of its run directory by bytes, or appends them to it.
  void replace(const std::string& name, std::string bytes);
  void append(const std::string& name, const std::string& bytes);

  TrainConfig config;
  std::string dir;  // its run directory, with a trailing '/'
  RunResult result;
  std::vector<float> best_parameters;
  std::vector<float> last_parameters;  // once it is closed (finished)
  std::size_t since_best = 0;
  std::string metrics_text, timings_text;  // its metrics.jsonl and timings.jsonl
  bool done = false;                       // stopped (early, or by its fault budget) or finished
  bool finished = false;                   // its last.dqnpolicy is written
  std::string fault_kind;                  // its test fault, at fault_epoch
  std::size_t fault_epoch = 0;
  // Counted from its records as they are written: whether a gradient step was ever finite
  // (a record with a loss), the learning steps of the last one, and what its population's
  // schedule did to it (the records' "schedule" entries, each with its "epoch").
  bool learned = false;
  std::int64_t learning_steps = 0;
  nlohmann::json schedule = nlohmann::json::array();

  /// Member m's epoch, from its report: its record (for metrics.jsonl, written by
  /// write_records), its line in the log, its best policy when the epoch improved it, and
  /// whether it stops: its fault budget spent (fault_report.json; it failed) or no better
  /// Sharpe for `patience` epochs.
  nlohmann::json end_epoch(const EpochReport& r, DqnTrainer& trainer, std::size_t m,
                           const std::string& checkpoints, std::size_t epochs,
                           std::uint64_t fingerprint, std::ostream& log);
  /// The epoch's lines of metrics.jsonl and timings.jsonl (with a schedule, the seconds its
  /// decision took; the epoch's other phases, timings), and the record counted.
  void write_records(const nlohmann::json& record, const EpochReport& r,
                     const std::optional<double>& schedule_seconds, const nlohmann::json& timings);
  /// It takes no more steps: its parameters now (member m's) are its last, kept and written.
  void close(const DqnTrainer& trainer, std::size_t m, std::uint64_t fingerprint);
  /// Its best.dqnpolicy and last.dqnpolicy as they stand.
  void write_best(const DqnTrainer& trainer, std::uint64_t fingerprint);
  void write_last(const DqnTrainer& trainer, std::uint64_t fingerprint);
  /// final_metrics.json: the best policy's validation metrics, the baselines', the validation
  /// window and, with a test window, what the test window showed.
  void write_final_metrics(const std::vector<Baseline>& baselines, std::size_t val_begin,
                           std::size_t val_end);
  /// Fails it when it took gradient steps and never a finite one (its learning rate or rewards
  /// overflow): it learned nothing, so it did not finish.
  void fail_if_it_never_learned();

  /// What its population's checkpoint keeps of it, and where a resume takes it from.
  RunCheckpoint::Member checkpoint() const;
  void restore(const RunCheckpoint::Member& saved);

 private:
  void count(const nlohmann::json& record);
  std::vector<io::FileWrite> m_writes;
};

}  // namespace dqntrader::train

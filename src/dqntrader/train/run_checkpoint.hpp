// A population run's record in its checkpoints, beside the trainer's state (DqnTrainer::state):
// written and read here, side by side, so that a field added to one side is added to the other.
// The sections, after the trainer's, in this order (the format of checkpoint-<E>.dqnckpt):
//   members             u64: the population's members
//   epoch               i64: the epoch the checkpoint was written after
//   data_fingerprint    u64: of the bars the run learns and validates on
//   test_fingerprint    u64: of its test window's bars, 0 without one (absent in checkpoints
//                       written before it was recorded)
// then, for each member m:
//   settings/m          JSON: the settings that decide what it computes (identity())
//   run/m               MemberState, a record (io/record.hpp): where its run stands
//   best_parameters/m   float32 values: its best parameters so far
//   best_metrics/m      eval::WindowMetrics, a record: their validation metrics
//   last_parameters/m   float32 values: its last parameters, once it has finished
//   metrics.jsonl/m     its records so far, and timings.jsonl/m its timings
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "dqntrader/eval/window_metrics.hpp"
#include "dqntrader/io/checkpoint_file.hpp"
#include "dqntrader/train/train_config.hpp"

namespace dqntrader::train {

/// Where a member's run stands, as the checkpoint holds it (a record of its fields by name).
struct MemberState {
  double best_sharpe = 0, last_sharpe = 0;
  std::int64_t best_epoch = 0, since_best = 0, epoch = 0, done = 0, failed = 0, stopped_early = 0;
};

template <class S, class F,
          class = std::enable_if_t<std::is_same<std::remove_const_t<S>, MemberState>::value>>
void for_each_field(S& s, F&& f) {
  f("best_sharpe", s.best_sharpe);
  f("last_sharpe", s.last_sharpe);
  f("best_epoch", s.best_epoch);
  f("since_best", s.since_best);
  f("epoch", s.epoch);
  f("done", s.done);
  f("failed", s.failed);
  f("stopped_early", s.stopped_early);
}

/// The checkpoint format this build writes: 2, whose structs are records of named fields
/// (io/record.hpp). Format 1 held them as the bytes of their structs; upgrade() reads it.
constexpr std::uint32_t kCheckpointFormat = 2;

/// A checkpoint's sections in the format this build reads: those of format 1 (the structs as
/// their bytes, in the layouts that format froze) rewritten as records; InputError naming source
/// for a format this build does not know (a newer one) or a struct of the wrong size.
void upgrade(std::vector<io::Section>& sections, std::uint32_t format, const std::string& source);

struct RunCheckpoint {
  struct Member {
    nlohmann::json settings;  // identity() of its settings
    MemberState state{};
    std::vector<float> best_parameters;
    eval::WindowMetrics best_metrics;
    std::optional<std::vector<float>> last_parameters;  // once it has finished
    std::string metrics, timings;                       // its metrics.jsonl and timings.jsonl
  };
  std::int64_t epoch = 0;
  std::uint64_t data_fingerprint = 0;
  std::optional<std::uint64_t> test_fingerprint;  // none in checkpoints from before it was kept
  std::vector<Member> members;

  /// The record's sections, appended to sections (after the trainer's).
  void append_to(std::vector<io::Section>& sections) const;
  /// The record in sections; InputError naming source when a section is missing or malformed.
  static RunCheckpoint read(const std::vector<io::Section>& sections, const std::string& source);
};

/// The settings that decide what a run computes, as a checkpoint records them: all but where
/// it writes, how long it runs, when it stops early, how it launches its kernels and the
/// testing fault.
nlohmann::json identity(TrainConfig config);

/// The checkpoints in a directory, newest first.
std::vector<std::string> checkpoint_paths(const std::string& directory);

}  // namespace dqntrader::train

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
//   run/m               MemberState: where its run stands
//   best_parameters/m   float32 values: its best parameters so far
//   best_metrics/m      eval::WindowMetrics: their validation metrics
//   last_parameters/m   float32 values: its last parameters, once it has finished
//   metrics.jsonl/m     its records so far, and timings.jsonl/m its timings
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "dqntrader/eval/window_metrics.hpp"
#include "dqntrader/io/checkpoint_file.hpp"
#include "dqntrader/train/train_config.hpp"

namespace dqntrader::train {

/// Where a member's run stands, as the checkpoint holds it (its bytes are the format).
struct MemberState {
  double best_sharpe, last_sharpe;
  std::int64_t best_epoch, since_best, epoch, done, failed, stopped_early;
};

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

// The bars of a training run, as its settings say: those it learns and validates on, and apart
// from them its test window's, cut off before training sees the rest; and the fingerprints
// that tie checkpoints, policies and sweeps to them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "dqntrader/data/bars.hpp"
#include "dqntrader/eval/backtest_config.hpp"
#include "dqntrader/eval/policy_file.hpp"
#include "dqntrader/train/train_config.hpp"

namespace dqntrader::train {

/// The bars a run learns and validates on, as its settings say (the data file or the built-in
/// market; the separate validation file, if any), and apart from them the test window's: the
/// test file, or the last test_fraction of the validation file (or, without one, of the data),
/// cut off before training sees the rest. InputError for a directory given as a bar file, and
/// for a test file whose bars do not all come after the training and validation bars.
struct RunData {
  data::Bars bars;                // training (and, without a validation file, validation) bars
  data::Bars validation;          // empty without val_data
  std::uint64_t fingerprint = 0;  // of both, as checkpoints record it (not of the test window)
  // The test window: bars test_begin .. test.size() - 1 of test (the bars before test_begin
  // are history for its first features only); test is empty when the run has none.
  data::Bars test;
  std::size_t test_begin = 0;
  std::uint64_t test_fingerprint = 0;
  // How test-fraction cut the test window off the bars (empty for a test file, or none).
  std::string cut;

  const data::Bars* separate_validation() const {
    return validation.size() > 0 ? &validation : nullptr;
  }
  bool has_test() const { return test.size() > 0; }
};
RunData load_run_data(const TrainConfig& config);

/// The settings load_run_data() reads, as text: two configurations with the same key load the
/// same bars (from the same files).
std::string data_key(const TrainConfig& config);

/// InputError naming the option when one of config's bar files (--data, --val-data, --test-data)
/// lies in directory (links followed) where written(its path relative to directory) says a run
/// or a sweep there writes or removes it: the run would destroy what it reads.
void refuse_inputs_among_outputs(const TrainConfig& config, const std::string& directory,
                                 const std::function<bool(const std::filesystem::path&)>& written);

/// A run's bar ranges: training at the start of the bars after the feature warm-up and
/// validation on the last val_fraction of them, or, with separate validation data
/// (validation_bars > 0), training on all the bars and validation on all of that data, each
/// after the warm-up. InputError when either is too short for the settings.
struct RunWindows {
  std::size_t train_begin = 0, train_end = 0, val_begin = 0, val_end = 0;
};
RunWindows split_windows(const TrainConfig& config, std::size_t bars, std::size_t validation_bars,
                         std::size_t warmup);

/// The device memory one member of a population of config's shape takes, for a network of
/// `features` features validated on `validation_returns` bar returns: its parameters,
/// optimizer and guard state, replay ring, states, activations and gradients, probe states and
/// its share of validation (a chunk of at most the window). An upper bound of what the trainer
/// allocates per member (on OpenMP, tests/test_population.cpp measures its peak), by which a
/// sweep sizes its populations.
std::size_t member_bytes(const TrainConfig& config, std::size_t features,
                         std::size_t validation_returns);

/// The test window of the run's data for features reading warmup bars before a decision: bars
/// max(test_begin, warmup) .. the test file's end. InputError naming the file when it holds
/// fewer than 3 (a window needs 2 bar returns to say anything).
eval::BarRange test_window(const RunData& data, std::size_t warmup);

/// A fingerprint as files record it: 16 hexadecimal digits.
std::string fingerprint_text(std::uint64_t fingerprint);

/// InputError unless data is what the policy file at policy_path (best.dqnpolicy or
/// last.dqnpolicy of a run) was trained on; the second form takes the file read already.
void check_same_data(const RunData& data, const std::string& policy_path);
void check_same_data(const RunData& data, const eval::PolicyFile& policy,
                     const std::string& policy_path);

}  // namespace dqntrader::train

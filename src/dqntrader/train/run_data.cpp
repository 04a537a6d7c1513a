#include "dqntrader/train/run_data.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <utility>

#include "dqntrader/core/error.hpp"
#include "dqntrader/data/bar_cache.hpp"
#include "dqntrader/data/synthetic.hpp"
#include "dqntrader/data/timestamp.hpp"
#include "dqntrader/eval/policy_file.hpp"

namespace dqntrader::train {

namespace {

// "1 bar", "2 bars".
std::string bars_text(std::size_t count) {
  return std::to_string(count) + (count == 1 ? " bar" : " bars");
}

// InputError unless the bars of a separate test file all come after every bar training and
// validation see: a test window that is not unseen measures nothing.
void check_unseen(const RunData& run, const TrainConfig& config) {
  std::int64_t last = run.bars.timestamp_ms.back();
  std::string seen = run.bars.source;
  if (run.validation.size() > 0 && run.validation.timestamp_ms.back() > last) {
    last = run.validation.timestamp_ms.back();
    seen = run.validation.source;
  }
  const auto& t = run.test.timestamp_ms;
  const std::size_t overlapping =
      static_cast<std::size_t>(std::upper_bound(t.begin(), t.end(), last) - t.begin());
  if (overlapping == 0)
    return;
  throw InputError(field("test-data") + " " + config.test_data + ": its bars 0 .. " +
                   std::to_string(overlapping - 1) + " (" + data::format_iso8601_ms(t.front()) +
                   " .. " + data::format_iso8601_ms(t[overlapping - 1]) +
                   ") are not after the bars training and validation see, which end at " +
                   data::format_iso8601_ms(last) + " in " + seen +
                   "; a test window must come after them (give a later file, or " +
                   field("test-fraction") + " instead)");
}

}  // namespace

RunData load_run_data(const TrainConfig& config) {
  data::ColumnSelection columns;
  columns.names = config.feature_columns;
  columns.prefixes = config.feature_prefixes;
  // A bar file of the setting `option`: a directory given for one is named as such.
  auto load = [&columns](const char* option, const std::string& path) {
    if (std::filesystem::is_directory(path)) {
      throw InputError(field(option) + " " + path +
                       " is a directory, not a bar file (CSV or .dqnbars)");
    }
    return data::load_bars(path, columns);
  };
  RunData run;
  if (config.data.empty()) {
    data::SynthConfig synth;
    synth.bars = config.synth_bars;
    synth.seed = config.seed;
    run.bars = data::generate_bars(synth);
  } else {
    run.bars = load("data", config.data);
  }
  if (!config.val_data.empty())
    run.validation = load("val-data", config.val_data);
  if (!config.test_data.empty()) {
    run.test = load("test-data", config.test_data);
    check_unseen(run, config);
  } else if (config.test_fraction > 0.0) {
    // The test window is the tail of the last bars in time: the validation file's, or the
    // data's. What training and validation see is the rest.
    data::Bars& last = config.val_data.empty() ? run.bars : run.validation;
    const std::size_t held = static_cast<std::size_t>(
        std::llround(static_cast<double>(last.size()) * config.test_fraction));
    if (held < 3 || held >= last.size()) {
      throw InputError(last.source, 0, 0,
                       "test-fraction " + number_text(config.test_fraction) + " of " +
                           std::to_string(last.size()) + " bars leaves " + bars_text(held) +
                           " for the test window, which needs at least 3 and bars before it "
                           "(or " +
                           field("test-fraction") + " 0 for none)");
    }
    run.test = std::move(last);
    run.test_begin = run.test.size() - held;
    last = data::first_bars(run.test, run.test_begin);
    run.cut = "test-fraction " + number_text(config.test_fraction) + " holds out the last " +
              bars_text(held) + " of the " + bars_text(run.test.size()) + " in " + run.test.source +
              " for the test window, leaving " + bars_text(run.test_begin);
  }
  if (run.has_test())
    run.test_fingerprint = data::fingerprint(run.test);
  run.fingerprint =
      data::fingerprint(run.bars) ^
      (config.val_data.empty() ? 0 : data::fingerprint(run.validation) * 0x9E3779B97F4A7C15ull);
  return run;
}

void refuse_inputs_among_outputs(const TrainConfig& config, const std::string& directory,
                                 const std::function<bool(const std::filesystem::path&)>& written) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::path root = fs::weakly_canonical(directory, error);
  if (error)
    return;  // a directory that cannot be resolved holds none of them
  for (const auto& [option, file] :
       {std::pair<std::string, const std::string&>{field("data"), config.data},
        {field("val-data"), config.val_data},
        {field("test-data"), config.test_data}}) {
    if (file.empty())
      continue;
    const fs::path real = fs::weakly_canonical(file, error);
    if (error)
      continue;
    const fs::path inside = real.lexically_relative(root);
    if (inside.empty() || *inside.begin() == ".." || !written(inside))
      continue;
    throw InputError(option + " " + file + " is " + (root / inside).string() +
                     ", a file the run in " + directory +
                     " writes or removes: it would destroy what it reads; move the bars "
                     "elsewhere or choose another " +
                     field("out"));
  }
}

std::string fingerprint_text(std::uint64_t fingerprint) {
  char text[32];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(fingerprint));
  return text;
}

void check_same_data(const RunData& data, const std::string& policy_path) {
  check_same_data(data, eval::read_policy(policy_path), policy_path);
}

void check_same_data(const RunData& data, const eval::PolicyFile& policy,
                     const std::string& policy_path) {
  if (!policy.info.contains("data_fingerprint") ||
      policy.info["data_fingerprint"] != fingerprint_text(data.fingerprint)) {
    throw InputError(
        policy_path, 0, 0,
        "the data differ from the data this run was trained on (fingerprints do not match)");
  }
}

}  // namespace dqntrader::train

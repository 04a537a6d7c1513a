#include "dqntrader/train/run_data.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <utility>

#include "dqntrader/core/error.hpp"
#include "dqntrader/data/bar_cache.hpp"
#include "dqntrader/data/synthetic.hpp"
#include "dqntrader/data/timestamp.hpp"
#include "dqntrader/eval/policy_file.hpp"
#include "dqntrader/nn/network_spec.hpp"
#include "dqntrader/train/learning_path.hpp"

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

std::string data_key(const TrainConfig& config) {
  nlohmann::json key = {{"data", config.data},
                        {"val_data", config.val_data},
                        {"test_data", config.test_data},
                        {"test_fraction", config.test_fraction},
                        {"feature_columns", config.feature_columns},
                        {"feature_prefixes", config.feature_prefixes},
                        {"symbol", config.symbol}};
  if (config.data.empty()) {  // the built-in market of the run's seed
    key["synth_bars"] = config.synth_bars;
    key["seed"] = config.seed;
  }
  return key.dump();
}

// What it reads is what data_key() names.
RunData load_run_data(const TrainConfig& config) {
  data::BarSelection columns;
  columns.names = config.feature_columns;
  columns.prefixes = config.feature_prefixes;
  columns.symbol = config.symbol;
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
  // A column named that the data lacks, or a prefix that selects none, is a mistake (a
  // misspelt name), not a wish for none.
  const std::string source =
      config.data.empty() ? std::string("the built-in synthetic market") : config.data;
  auto none_matches = [&](const std::string& text, bool prefix) {
    return std::none_of(run.bars.extra.begin(), run.bars.extra.end(),
                        [&](const data::NamedColumn& c) {
                          return prefix ? c.name.rfind(text, 0) == 0 : c.name == text;
                        });
  };
  for (const std::string& name : config.feature_columns) {
    if (none_matches(name, false))
      throw InputError(field("feature-columns") + " " + name + ": " + source +
                       " has no such column");
  }
  for (const std::string& prefix : config.feature_prefixes) {
    if (none_matches(prefix, true)) {
      throw InputError(field("feature-prefix") + " " + prefix + ": no column of " + source +
                       " begins with it");
    }
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

std::size_t member_bytes(const TrainConfig& c, std::size_t features,
                         std::size_t validation_returns) {
  nn::NetworkSpec spec;
  spec.features = features;
  spec.hidden = c.hidden;
  spec.dueling = c.dueling;
  const std::size_t p = nn::ParameterLayout(spec).size();
  const std::size_t value = c.precision == Precision::bf16 ? 2 : 4;
  std::size_t widths = 0;
  for (std::size_t w : c.hidden)
    widths += (w + 8) / 8 * 8;
  const std::size_t rows = 2 * c.batch_size + c.environments;
  // The probe's states and one variant a feature group: at most four groups (returns,
  // volatility, ofi, extra columns: data::FeatureSpec::groups).
  const std::size_t probe_rows = 5 * c.probe_batch;
  const std::size_t max_rows = std::max(rows, probe_rows);
  const std::size_t common = 9 * p * 4                 // parameters, optimizer, guard
                             + 2 * p * value           // working copies
                             + c.replay_capacity * 11  // the replay ring
                             + 2 * max_rows * (spec.state_size() + 8) * value  // states
                             + max_rows * widths * value  // the online network's activations
                             + max_rows * widths * value  // layer gradients
                             + probe_rows * spec.state_size() * value  // the probe's states
                             + std::min(c.chunk_bars, validation_returns) * spec.positions *
                                   widths * 4;  // validation's chunk of the window
  // What each learning path takes beside (auto: either).
  const std::size_t products = common + learning_step_bytes(LearningPath::products, spec,
                                                            c.precision, c.batch_size, max_rows);
  if (c.learning_path == "products" || !fused_takes(spec, c.precision))
    return products;
  const std::size_t fused =
      common + learning_step_bytes(LearningPath::fused, spec, c.precision, c.batch_size, max_rows);
  return c.learning_path == "fused" ? fused : std::max(products, fused);
}

RunWindows split_windows(const TrainConfig& c, std::size_t bars, std::size_t validation_bars,
                         std::size_t warmup) {
  RunWindows w;
  w.train_begin = warmup;
  if (validation_bars == 0) {
    w.train_end = warmup + static_cast<std::size_t>((bars - warmup) * (1.0 - c.val_fraction));
    w.val_begin = w.train_end;
    w.val_end = bars;
  } else {
    w.train_end = bars;
    w.val_begin = warmup;
    w.val_end = validation_bars;
  }
  if (w.train_end < w.train_begin + 3 * c.n_step + 3)
    throw InputError("too few training bars after the feature warm-up");
  if (w.val_end < w.val_begin + 2 * c.val_windows + 1)
    throw InputError("too few validation bars for the validation windows");
  return w;
}

eval::BarRange test_window(const RunData& data, std::size_t warmup) {
  const eval::BarRange window{std::max(data.test_begin, warmup), data.test.size()};
  if (window.end < window.begin + 3) {
    throw InputError(data.test.source, 0, 0,
                     "too few test bars after the feature warm-up of " + std::to_string(warmup) +
                         " bars (the test window needs 3)");
  }
  return window;
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

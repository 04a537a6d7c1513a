#include "dqntrader/train/training_run.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/hash.hpp"
#include "dqntrader/core/status_line.hpp"
#include "dqntrader/core/transfer.hpp"
#include "dqntrader/data/bar_cache.hpp"
#include "dqntrader/data/synthetic.hpp"
#include "dqntrader/data/timestamp.hpp"
#include "dqntrader/eval/backtest_evaluator.hpp"
#include "dqntrader/eval/metrics_json.hpp"
#include "dqntrader/eval/path_evaluator.hpp"
#include "dqntrader/eval/policy_file.hpp"
#include "dqntrader/io/atomic_file.hpp"
#include "dqntrader/io/checkpoint_file.hpp"
#include "dqntrader/io/json_values.hpp"
#include "dqntrader/train/dqn_trainer.hpp"

namespace dqntrader::train {

namespace {

// Appends one line and flushes it to disk: a record is in metrics.jsonl whole or not at all
// (an interrupted write leaves at most a partial last line, which readers skip).
void append_line(const std::string& path, const std::string& line) {
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr)
    throw Error("cannot open '" + path + "' for appending: " + std::strerror(errno));
  const bool ok =
      std::fputs((line + "\n").c_str(), f) >= 0 && std::fflush(f) == 0 && ::fsync(fileno(f)) == 0;
  const int error = errno;
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed)
    throw Error("cannot write '" + path + "': " + std::strerror(error));
}

}  // namespace

std::vector<std::string> checkpoint_paths(const std::string& run_directory) {
  std::vector<std::pair<long, std::string>> found;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(run_directory, error)) {
    const std::string name = entry.path().filename().string();
    const std::string prefix = "checkpoint-", suffix = ".dqnckpt";
    if (name.size() > prefix.size() + suffix.size() &&
        name.compare(0, prefix.size(), prefix) == 0 &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      const std::string digits =
          name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
      if (digits.find_first_not_of("0123456789") == std::string::npos)
        found.push_back({std::stol(digits), entry.path().string()});
    }
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> paths;
  for (const auto& f : found)
    paths.push_back(f.second);
  return paths;
}

namespace {

// The settings that decide what a run computes: all but where it writes, how long it runs,
// when it stops early, how it launches its kernels and the testing fault.
nlohmann::json identity(TrainConfig config) {
  nlohmann::json j = nlohmann::json::parse(settings_json(config));
  for (const char* key : {"out", "epochs", "patience", "checkpoints", "fault-budget",
                          "inject-fault", "graph-steps"}) {
    j.erase(key);
  }
  return j;
}

std::uint64_t fingerprint(const data::Bars& bars) {
  Hasher64 h;
  auto add = [&](const auto& v) { h.update(v.data(), v.size() * sizeof(v[0])); };
  add(bars.timestamp_ms);
  add(bars.open);
  add(bars.high);
  add(bars.low);
  add(bars.close);
  add(bars.volume);
  add(bars.ofi);
  for (const auto& c : bars.extra) {
    h.update(c.name.data(), c.name.size());
    add(c.values);
  }
  return h.digest();
}

template <class T>
io::Section pod(const std::string& name, const T& value) {
  return {name, std::string(reinterpret_cast<const char*>(&value), sizeof(T))};
}

template <class T>
T read_pod(const std::vector<io::Section>& sections, const std::string& name,
           const std::string& source) {
  const io::Section& s = io::find_section(sections, name, source);
  if (s.bytes.size() != sizeof(T))
    throw InputError(source, 0, 0, "bad section '" + name + "'");
  T value;
  std::memcpy(&value, s.bytes.data(), sizeof(T));
  return value;
}

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
  throw InputError(
      "--test-data " + config.test_data + ": its bars 0 .. " + std::to_string(overlapping - 1) +
      " (" + data::format_iso8601_ms(t.front()) + " .. " +
      data::format_iso8601_ms(t[overlapping - 1]) +
      ") are not after the bars training and validation see, which end at " +
      data::format_iso8601_ms(last) + " in " + seen +
      "; a test window must come after them (give a later file, or --test-fraction instead)");
}

void remove_stale_temporaries(const std::string& dir) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.path().filename().string().find(".tmp-") != std::string::npos)
      std::filesystem::remove(entry.path(), error);
  }
}

}  // namespace

RunData load_run_data(const TrainConfig& config) {
  data::ColumnSelection columns;
  columns.names = config.feature_columns;
  columns.prefixes = config.feature_prefixes;
  // A bar file of the setting `option`: a directory given for one is named as such.
  auto load = [&columns](const char* option, const std::string& path) {
    if (std::filesystem::is_directory(path)) {
      throw InputError(std::string("--") + option + " " + path +
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
                           "(or --test-fraction 0 for none)");
    }
    run.test = std::move(last);
    run.test_begin = run.test.size() - held;
    last = data::first_bars(run.test, run.test_begin);
    run.cut = "test-fraction " + number_text(config.test_fraction) + " holds out the last " +
              bars_text(held) + " of the " + bars_text(run.test.size()) + " in " + run.test.source +
              " for the test window, leaving " + bars_text(run.test_begin);
  }
  if (run.has_test())
    run.test_fingerprint = fingerprint(run.test);
  run.fingerprint =
      fingerprint(run.bars) ^
      (config.val_data.empty() ? 0 : fingerprint(run.validation) * 0x9E3779B97F4A7C15ull);
  return run;
}

std::string fingerprint_text(std::uint64_t fingerprint) {
  char text[32];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(fingerprint));
  return text;
}

void check_same_data(const RunData& data, const std::string& policy_path) {
  const eval::PolicyFile policy = eval::read_policy(policy_path);
  if (!policy.info.contains("data_fingerprint") ||
      policy.info["data_fingerprint"] != fingerprint_text(data.fingerprint)) {
    throw InputError(
        policy_path, 0, 0,
        "the data differ from the data this run was trained on (fingerprints do not match)");
  }
}

std::vector<Baseline> evaluate_baselines(const ExecSpace& space, const data::Bars& validation_bars,
                                         const std::vector<eval::BarRange>& windows,
                                         const eval::BacktestConfig& config) {
  std::size_t longest = 0;
  for (const eval::BarRange& w : windows)
    longest = std::max(longest, w.returns());
  eval::BuiltinEvaluator builtins(space, validation_bars, config, longest);
  std::vector<Baseline> baselines;
  for (const eval::BuiltinPolicy policy : builtins.policies()) {
    Baseline b;
    b.policy = eval::to_string(policy);
    double sharpe = 0.0;
    for (const eval::BarRange& w : windows) {
      b.windows.push_back(builtins.evaluate(policy, w));
      sharpe += b.windows.back().sharpe;
    }
    b.validation_sharpe = sharpe / static_cast<double>(windows.size());
    baselines.push_back(b);
  }
  return baselines;
}

nlohmann::json baselines_json(const std::vector<Baseline>& baselines) {
  nlohmann::json j = nlohmann::json::object();
  for (const Baseline& b : baselines) {
    nlohmann::json record;
    record["validation"] = eval::to_json(b.windows.front());
    record["validation_sharpe"] = io::json_number(b.validation_sharpe);
    if (b.windows.size() > 1) {
      nlohmann::json windows = nlohmann::json::array();
      for (const auto& m : b.windows)
        windows.push_back(eval::to_json(m));
      record["validation_windows"] = windows;
    }
    j[b.policy] = record;
  }
  return j;
}

nlohmann::json to_json(const TestResult& test) {
  nlohmann::json baselines = nlohmann::json::object();
  for (const auto& [policy, metrics] : test.baselines)
    baselines[policy] = eval::to_json(metrics);
  return {{"window",
           {{"data", test.source},
            {"first_bar", test.first_bar},
            {"last_bar", test.last_bar},
            {"fingerprint", fingerprint_text(test.fingerprint)}}},
          {"best", eval::to_json(test.best)},
          {"last", eval::to_json(test.last)},
          {"baselines", baselines}};
}

namespace {

// "0.98x sign-of-ofi (2.640), +1.899 over buy-and-hold (0.412)": a validation Sharpe against
// the rule that knows the market's signal and against holding.
std::string compared_with_baselines(double sharpe,
                                    const std::vector<std::pair<std::string, double>>& baselines) {
  std::string text;
  for (const auto& [policy, baseline] : baselines) {
    if (policy == "sign-of-ofi" && std::isfinite(baseline) && baseline > 0) {
      if (!text.empty())
        text += ", ";
      text += io::format_fixed(sharpe / baseline, 2) + "x " + policy + " (" +
              io::format_fixed(baseline, 3) + ")";
    }
  }
  for (const auto& [policy, baseline] : baselines) {
    if (policy == "buy-and-hold" && std::isfinite(baseline)) {
      const double difference = sharpe - baseline;
      if (!text.empty())
        text += ", ";
      text += std::string(difference >= 0 ? "+" : "") + io::format_fixed(difference, 3) + " over " +
              policy + " (" + io::format_fixed(baseline, 3) + ")";
    }
  }
  return text;
}

// The test window of the run's data (InputError when it is too short for the features).
eval::BarRange test_window(const RunData& data, const data::FeatureSpec& features) {
  const eval::BarRange window{std::max(data.test_begin, features.warmup()), data.test.size()};
  if (window.end < window.begin + 3) {
    throw InputError(data.test.source, 0, 0,
                     "too few test bars after the feature warm-up of " +
                         std::to_string(features.warmup()) + " bars (the test window needs 3)");
  }
  return window;
}

// The test window's one look: the metrics there of each parameter vector of rows (policies of
// the trainer's network, with its features and training statistics) in one pass on the
// device, and the built-in policies'.
TestResult look_at_test_window(const ExecSpace& space, const DqnTrainer& trainer,
                               const RunData& data, const data::FeatureSet& features,
                               const TrainConfig& population, const std::vector<float>& rows,
                               std::size_t policies, std::vector<eval::WindowMetrics>& metrics) {
  const eval::PolicyFile shape = trainer.policy({});
  const eval::BarRange window = test_window(data, shape.features);
  const eval::BacktestConfig config = backtest_config(population, trainer.positions());
  eval::BacktestEvaluator evaluator(space, features, shape.stats, shape.network, window, config,
                                    policies);
  const auto device = upload(space, rows, "dqntrader::train::test_policies");
  metrics = evaluator.evaluate_many(
      eval::parameter_rows(device.data(), policies, rows.size() / policies));
  TestResult test;
  test.source = data.test.source;
  test.first_bar = window.begin;
  test.last_bar = window.end - 1;
  test.fingerprint = data.test_fingerprint;
  for (const Baseline& b : evaluate_baselines(space, data.test, {window}, config))
    test.baselines.push_back({b.policy, b.windows.front()});
  return test;
}

std::vector<std::pair<std::string, double>> sharpes(const std::vector<Baseline>& baselines) {
  std::vector<std::pair<std::string, double>> list;
  for (const Baseline& b : baselines)
    list.push_back({b.policy, b.validation_sharpe});
  return list;
}

std::vector<std::pair<std::string, double>> sharpes(
    const std::vector<std::pair<std::string, eval::WindowMetrics>>& baselines) {
  std::vector<std::pair<std::string, double>> list;
  for (const auto& [policy, metrics] : baselines)
    list.push_back({policy, metrics.sharpe});
  return list;
}

}  // namespace

namespace {

// One member's run: its directory, its records so far and where it stands.
struct MemberRun {
  TrainConfig config;
  std::string dir;  // with a trailing '/'
  RunResult result;
  std::vector<float> best_parameters;
  std::vector<float> last_parameters;  // once it is closed (finished)
  std::size_t since_best = 0;
  std::string metrics_text, timings_text;
  bool done = false;       // stopped (early, or by its fault budget) or finished
  bool finished = false;   // its last.dqnpolicy and final_metrics.json are written
  std::string fault_kind;  // its test fault, at fault_epoch
  std::size_t fault_epoch = 0;
};

struct MemberState {
  double best_sharpe, last_sharpe;
  std::int64_t best_epoch, since_best, epoch, done, failed, stopped_early;
};

std::string member_section(const char* name, std::size_t m) {
  return std::string(name) + "/" + std::to_string(m);
}

// The member's best.dqnpolicy: its best parameters so far, with the epoch and its Sharpe.
void write_best(const MemberRun& run, const DqnTrainer& trainer, std::uint64_t fingerprint) {
  eval::PolicyFile best = trainer.policy(run.best_parameters);
  best.info = {{"epoch", run.result.best_epoch},
               {"validation_sharpe", io::json_number(run.result.best_sharpe)},
               {"data_fingerprint", fingerprint_text(fingerprint)}};
  eval::write_policy(run.dir + "best.dqnpolicy", best);
}

// The member's last.dqnpolicy: its last parameters.
void write_last(const MemberRun& run, const DqnTrainer& trainer, std::uint64_t fingerprint) {
  eval::PolicyFile last = trainer.policy(run.last_parameters);
  last.info = {{"epoch", run.result.epochs}, {"data_fingerprint", fingerprint_text(fingerprint)}};
  eval::write_policy(run.dir + "last.dqnpolicy", last);
}

// A member that takes no more steps: its parameters now are its last (kept, and written).
void close_member(MemberRun& run, const DqnTrainer& trainer, std::size_t m,
                  std::uint64_t fingerprint) {
  run.last_parameters = trainer.parameters(m);
  write_last(run, trainer, fingerprint);
  run.finished = true;
}

// The member's results when the run ends: final_metrics.json.
void write_final_metrics(const MemberRun& run, const std::vector<Baseline>& baselines,
                         std::size_t val_begin, std::size_t val_end) {
  nlohmann::json final_metrics = eval::to_json(run.result.best);
  nlohmann::json kept = nlohmann::json::object();
  for (const Baseline& b : baselines)
    kept[b.policy] = eval::to_json(b.windows.front());
  final_metrics["baselines"] = kept;
  final_metrics["validation_window"] = {{"first_bar", val_begin}, {"last_bar", val_end - 1}};
  if (run.result.test)
    final_metrics["test"] = to_json(*run.result.test);
  io::write_file_atomically(run.dir + "final_metrics.json", final_metrics.dump(2) + "\n");
}

// Member m's epoch, from its report: its record (metrics.jsonl's, written later), its line
// in the log, its best policy when the epoch improved it, and whether it stops (its fault
// budget spent, or no better Sharpe for `patience` epochs).
nlohmann::json end_epoch(MemberRun& run, const EpochReport& r, DqnTrainer& trainer, std::size_t m,
                         const std::string& checkpoints, std::size_t epochs,
                         std::uint64_t fingerprint, std::ostream& log) {
  const bool improved = r.validation_sharpe > run.result.best_sharpe || run.best_parameters.empty();
  nlohmann::json record;
  record["epoch"] = r.epoch;
  record["steps"] = r.steps;
  record["learning_steps"] = r.learning_steps;
  record["loss"] = io::json_number(r.loss);
  record["mean_q"] = io::json_number(r.mean_q);
  record["epsilon"] = r.epsilon;
  record["learning_rate"] = r.learning_rate;
  record["skipped_steps"] = r.skipped;
  record["guard_restores"] = r.restores;
  record["consecutive_faults"] = r.consecutive_faults;
  record["validation"] = eval::to_json(r.validation.front());
  record["validation_sharpe"] = io::json_number(r.validation_sharpe);
  if (r.validation.size() > 1) {
    nlohmann::json windows = nlohmann::json::array();
    for (const auto& v : r.validation)
      windows.push_back(eval::to_json(v));
    record["validation_windows"] = windows;
  }
  nlohmann::json probe = nlohmann::json::object();
  for (const auto& [group, value] : r.probe)
    probe[group] = io::json_number(value);
  record["probe"] = probe;
  record["best"] = improved;

  const eval::WindowMetrics& v = r.validation.front();
  log << "epoch " << r.epoch << "/" << epochs << "  loss " << io::format_fixed(r.loss, 5)
      << "  mean Q " << io::format_fixed(r.mean_q, 4) << "  eps " << io::format_fixed(r.epsilon, 3)
      << "  skipped " << r.skipped << "  restores " << r.restores << "  val sharpe "
      << io::format_fixed(r.validation_sharpe, 3) << "  annual return "
      << io::format_percent(v.cagr) << "  drawdown " << io::format_percent(v.max_drawdown)
      << "  time " << io::format_fixed(r.train_seconds, 2) << "s train + "
      << io::format_fixed(r.validation_seconds, 2) << "s val" << (improved ? "  *best" : "")
      << "\n";

  if (r.consecutive_faults >= static_cast<std::int64_t>(run.config.fault_budget)) {
    const std::vector<std::string> kept = checkpoint_paths(checkpoints);
    nlohmann::json report = {{"epoch", r.epoch},
                             {"steps", r.steps},
                             {"consecutive_faults", r.consecutive_faults},
                             {"fault_budget", run.config.fault_budget},
                             {"skipped_steps_this_epoch", r.skipped},
                             {"guard_restores_this_epoch", r.restores},
                             {"loss", io::json_number(r.loss)},
                             {"last_good_checkpoint", kept.empty() ? "" : kept.front()}};
    io::write_file_atomically(run.dir + "fault_report.json", report.dump(2) + "\n");
    run.result.failed = true;
    run.result.failure = "training stopped: " + std::to_string(r.consecutive_faults) +
                         " consecutive faulty steps (non-finite gradients skipped or guard "
                         "restores) reached the budget of " +
                         std::to_string(run.config.fault_budget) + "; see " + run.dir +
                         "fault_report.json";
    run.done = true;
    trainer.stop(m);
    return record;
  }

  run.result.epochs = r.epoch;
  run.result.last_sharpe = r.validation_sharpe;
  if (improved) {
    run.result.best_sharpe = r.validation_sharpe;
    run.result.best_epoch = r.epoch;
    run.result.best = v;
    run.best_parameters = trainer.parameters(m);
    write_best(run, trainer, fingerprint);
    run.since_best = 0;
  } else {
    ++run.since_best;
  }
  if (!improved && run.config.patience > 0 && run.since_best >= run.config.patience) {
    log << "stopping early: no better validation Sharpe for " << run.config.patience << " epochs\n";
    run.result.stopped_early = true;
    run.done = true;
    trainer.stop(m);
  }
  return record;
}

// The population's schedule after the epoch: what it did goes into the members' records; a
// member it stops stops early.
void apply_schedule(const PopulationOptions& options, std::size_t epoch,
                    const std::vector<EpochReport>& reports, DqnTrainer& trainer,
                    std::vector<MemberRun>& runs, std::vector<nlohmann::json>& records) {
  const std::size_t k = runs.size();
  std::vector<double> sharpes(k);
  std::vector<bool> running(k);
  for (std::size_t m = 0; m < k; ++m) {
    sharpes[m] = reports[m].validation_sharpe;
    running[m] = !runs[m].done;
  }
  const std::vector<ScheduleStep> steps = options.schedule(epoch, sharpes, running, trainer);
  for (std::size_t m = 0; m < k && m < steps.size(); ++m) {
    if (!steps[m].record.is_null() && !records[m].is_null())
      records[m]["schedule"] = steps[m].record;
    if (steps[m].stop && !runs[m].done) {
      runs[m].result.stopped_early = true;
      runs[m].done = true;
      trainer.stop(m);
    }
  }
}

// The epoch's lines of metrics.jsonl and timings.jsonl (with the population's schedule, the
// seconds its decision took).
void write_records(MemberRun& run, const nlohmann::json& record, const EpochReport& r,
                   const std::optional<double>& schedule_seconds) {
  const std::string line = record.dump();
  append_line(run.dir + "metrics.jsonl", line);
  run.metrics_text += line + "\n";
  nlohmann::json times = {{"epoch", r.epoch},
                          {"train_seconds", r.train_seconds},
                          {"validation_seconds", r.validation_seconds}};
  if (schedule_seconds)
    times["schedule_seconds"] = *schedule_seconds;
  const std::string timing = times.dump();
  append_line(run.dir + "timings.jsonl", timing);
  run.timings_text += timing + "\n";
}

// checkpoint-<epoch>.dqnckpt: the population's state, each member's and its records so far;
// the newest `keep` are kept.
void write_checkpoint(const std::string& directory, std::size_t epoch, std::size_t keep,
                      const DqnTrainer& trainer, const std::vector<MemberRun>& runs,
                      const RunData& data) {
  const std::size_t k = runs.size();
  std::vector<io::Section> sections = trainer.state();
  sections.push_back(pod("members", static_cast<std::uint64_t>(k)));
  sections.push_back(pod("epoch", static_cast<std::int64_t>(epoch)));
  sections.push_back(pod("data_fingerprint", data.fingerprint));
  sections.push_back(pod("test_fingerprint", data.test_fingerprint));  // 0: no test window
  for (std::size_t m = 0; m < k; ++m) {
    const MemberRun& run = runs[m];
    sections.push_back({member_section("settings", m), identity(run.config).dump()});
    sections.push_back(
        pod(member_section("run", m),
            MemberState{run.result.best_sharpe, run.result.last_sharpe,
                        static_cast<std::int64_t>(run.result.best_epoch),
                        static_cast<std::int64_t>(run.since_best),
                        static_cast<std::int64_t>(run.result.epochs), run.done ? 1 : 0,
                        run.result.failed ? 1 : 0, run.result.stopped_early ? 1 : 0}));
    sections.push_back({member_section("best_parameters", m),
                        std::string(reinterpret_cast<const char*>(run.best_parameters.data()),
                                    run.best_parameters.size() * sizeof(float))});
    sections.push_back(pod(member_section("best_metrics", m), run.result.best));
    if (run.finished) {
      sections.push_back({member_section("last_parameters", m),
                          std::string(reinterpret_cast<const char*>(run.last_parameters.data()),
                                      run.last_parameters.size() * sizeof(float))});
    }
    sections.push_back({member_section("metrics.jsonl", m), run.metrics_text});
    sections.push_back({member_section("timings.jsonl", m), run.timings_text});
  }
  io::write_sections(directory + "/checkpoint-" + std::to_string(epoch) + ".dqnckpt", sections);
  const std::vector<std::string> kept = checkpoint_paths(directory);
  std::error_code error;
  for (std::size_t i = keep; i < kept.size(); ++i)
    std::filesystem::remove(kept[i], error);
}

}  // namespace

namespace {

// The files a run writes in its directory (config.out): a run that starts again with --force
// removes these and nothing else.
bool run_file(const std::string& name) {
  for (const char* file :
       {"config.json", "metrics.jsonl", "timings.jsonl", "best.dqnpolicy", "last.dqnpolicy",
        "baselines.json", "final_metrics.json", "fault_report.json", "report.html"}) {
    if (name == file)
      return true;
  }
  return name.rfind("checkpoint-", 0) == 0 && name.size() > 8 &&
         name.compare(name.size() - 8, 8, ".dqnckpt") == 0;
}

void clear_run_files(const std::string& directory) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
    if (run_file(entry.path().filename().string()))
      std::filesystem::remove(entry.path());
  }
}

}  // namespace

std::string held_run(const std::string& directory) {
  std::error_code error;
  if (std::filesystem::exists(directory + "/sweep.json", error))
    return "a sweep";
  for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
    if (run_file(entry.path().filename().string()))
      return "a training run";
  }
  return "";
}

RunResult run_training(const ExecSpace& space, const TrainConfig& config, std::ostream& log,
                       const ResumeOptions& resume) {
  const std::string held = held_run(config.out);
  if (held == "a sweep") {
    throw InputError("--out " + config.out +
                     " holds a sweep; a training run needs a directory of its own");
  }
  if (!held.empty() && !resume.resume && !resume.force) {
    throw InputError("--out " + config.out + " holds a training run already: continue it with " +
                     "--resume " + config.out +
                     ", start it again with --force (which removes its files first), or choose " +
                     "another --out");
  }
  PopulationOptions options;
  options.checkpoints = config.out;
  RunResult result = run_population(space, {config}, options, log, resume).front();
  if (result.failed)
    throw Error(result.failure);
  return result;
}

std::vector<RunResult> run_population(const ExecSpace& space, const std::vector<TrainConfig>& given,
                                      const PopulationOptions& options, std::ostream& log,
                                      const ResumeOptions& resume) {
  std::vector<TrainConfig> configs = given;
  for (const TrainConfig& c : configs)
    validate(c);
  check_population(configs);
  const TrainConfig population = population_config(configs);
  const std::size_t k = configs.size();
  const RunData run_data = load_run_data(population);
  const data::Bars& bars = run_data.bars;
  const std::uint64_t data_fingerprint = run_data.fingerprint;

  std::vector<MemberRun> runs(k);
  for (std::size_t m = 0; m < k; ++m) {
    MemberRun& run = runs[m];
    run.config = configs[m];
    run.dir = configs[m].out + "/";
    run.result.best_sharpe = -std::numeric_limits<double>::infinity();
    if (!run.config.inject_fault.empty()) {
      const std::size_t at = run.config.inject_fault.find('@');
      run.fault_kind = run.config.inject_fault.substr(0, at);
      run.fault_epoch = std::stoul(run.config.inject_fault.substr(at + 1));
    }
  }

  // Bars too few for training and validation say so; where the test window took most of them,
  // the message says that too.
  std::optional<DqnTrainer> made;
  try {
    made.emplace(space, configs, bars, run_data.separate_validation());
  } catch (const InputError& e) {
    if (run_data.cut.empty())
      throw;
    throw InputError(std::string(e.what()) + " (" + run_data.cut + ")");
  }
  DqnTrainer& trainer = *made;
  // The test bars' features, checked now (columns, length) and used once, when the run ends.
  std::optional<data::FeatureSet> test_features;
  if (run_data.has_test()) {
    test_window(run_data, trainer.features());
    test_features.emplace(space, run_data.test, trainer.features());
  }
  // Everything is checked: the directories (none is made for a run refused).
  std::error_code error;
  if (std::filesystem::exists(options.checkpoints) &&
      !std::filesystem::is_directory(options.checkpoints))
    throw InputError("--out " + options.checkpoints + " is a file, not a directory");
  std::filesystem::create_directories(options.checkpoints, error);
  if (error)
    throw Error("cannot create the directory '" + options.checkpoints + "': " + error.message());
  remove_stale_temporaries(options.checkpoints);
  if (!resume.resume && resume.force)
    clear_run_files(options.checkpoints);
  for (const MemberRun& run : runs) {
    std::filesystem::create_directories(run.config.out, error);
    if (error)
      throw Error("cannot create the run directory '" + run.config.out + "': " + error.message());
    remove_stale_temporaries(run.config.out);
  }
  std::size_t first_epoch = 1;
  if (resume.resume) {
    std::vector<io::Section> sections;
    std::string source;
    for (const std::string& path : checkpoint_paths(options.checkpoints)) {
      try {
        sections = io::read_sections(path);
        source = path;
        break;
      } catch (const InputError& e) {
        log << "dqntrader train: skipping " << e.what() << "\n";
      }
    }
    if (source.empty())
      throw InputError(options.checkpoints, 0, 0, "no valid checkpoint to resume from");
    if (read_pod<std::uint64_t>(sections, "members", source) != k) {
      throw InputError(source, 0, 0,
                       "the checkpoint holds " +
                           std::to_string(read_pod<std::uint64_t>(sections, "members", source)) +
                           " members, the run " + std::to_string(k));
    }
    std::string differences;
    for (std::size_t m = 0; m < k; ++m) {
      const nlohmann::json saved = nlohmann::json::parse(
          io::find_section(sections, member_section("settings", m), source).bytes);
      const nlohmann::json now = identity(configs[m]);
      for (const auto& item : now.items()) {
        if (!saved.contains(item.key()) || saved[item.key()] != item.value()) {
          differences += "\n  " + (k > 1 ? "member " + std::to_string(m) + " " : std::string()) +
                         item.key() + ": checkpoint " +
                         (saved.contains(item.key()) ? saved[item.key()].dump() : "(none)") +
                         ", now " + item.value().dump();
        }
      }
    }
    if (read_pod<std::uint64_t>(sections, "data_fingerprint", source) != data_fingerprint) {
      differences += "\n  the data differ from the checkpoint's (fingerprints do not match)";
    }
    // The test window's bars too (checkpoints written before they were recorded have none).
    if (std::any_of(sections.begin(), sections.end(),
                    [](const io::Section& s) { return s.name == "test_fingerprint"; }) &&
        read_pod<std::uint64_t>(sections, "test_fingerprint", source) !=
            run_data.test_fingerprint) {
      differences +=
          "\n  the test window's data differ from the checkpoint's (fingerprints do "
          "not match): its numbers would not be the run's";
    }
    if (!differences.empty()) {
      if (!resume.force) {
        throw InputError(
            source, 0, 0,
            "the run's settings or data differ from the checkpoint's (--force continues anyway):" +
                differences);
      }
      log << "dqntrader train: --force: continuing although" << differences << "\n";
    }
    trainer.restore(sections, source);
    for (std::size_t m = 0; m < k; ++m) {
      MemberRun& run = runs[m];
      const MemberState state = read_pod<MemberState>(sections, member_section("run", m), source);
      run.result.best_sharpe = state.best_sharpe;
      run.result.last_sharpe = state.last_sharpe;
      run.result.best_epoch = static_cast<std::size_t>(state.best_epoch);
      run.result.epochs = static_cast<std::size_t>(state.epoch);
      run.result.stopped_early = state.stopped_early != 0;
      run.result.failed = state.failed != 0;
      run.since_best = static_cast<std::size_t>(state.since_best);
      run.done = state.done != 0;
      const io::Section& best =
          io::find_section(sections, member_section("best_parameters", m), source);
      run.best_parameters.resize(best.bytes.size() / sizeof(float));
      std::memcpy(run.best_parameters.data(), best.bytes.data(), best.bytes.size());
      run.result.best =
          read_pod<eval::WindowMetrics>(sections, member_section("best_metrics", m), source);
      run.metrics_text =
          io::find_section(sections, member_section("metrics.jsonl", m), source).bytes;
      run.timings_text =
          io::find_section(sections, member_section("timings.jsonl", m), source).bytes;
      for (const io::Section& last : sections) {
        if (last.name != member_section("last_parameters", m))
          continue;
        run.last_parameters.resize(last.bytes.size() / sizeof(float));
        std::memcpy(run.last_parameters.data(), last.bytes.data(), last.bytes.size());
        run.finished = true;
      }
    }
    first_epoch = static_cast<std::size_t>(read_pod<std::int64_t>(sections, "epoch", source)) + 1;
    log << "dqntrader train: resuming after epoch " << first_epoch - 1 << " from " << source
        << "\n";
  }
  // The members' directories as the checkpoint left them (a resumed member whose directory
  // was lost gets its records and best policy back).
  for (MemberRun& run : runs) {
    io::write_file_atomically(run.dir + "config.json", settings_json(run.config));
    io::write_file_atomically(run.dir + "metrics.jsonl", run.metrics_text);
    io::write_file_atomically(run.dir + "timings.jsonl", run.timings_text);
    if (!run.best_parameters.empty())
      write_best(run, trainer, data_fingerprint);
    if (run.finished)
      write_last(run, trainer, data_fingerprint);
  }
  // The members that stopped at the checkpoint's epoch close now, and the slots of every
  // stopped member are freed, as after that epoch in a run that did not stop.
  for (std::size_t m = 0; m < k; ++m) {
    if (runs[m].done && !runs[m].result.failed && !runs[m].finished)
      close_member(runs[m], trainer, m, data_fingerprint);
  }
  trainer.compact();

  const auto [train_begin, train_end] = trainer.training_window();
  const auto [val_begin, val_end] = trainer.validation_window();
  log << "dqntrader train: " << bars.source << ": training bars " << train_begin << ".."
      << train_end - 1 << ", validation bars " << val_begin << ".." << val_end - 1
      << (population.val_data.empty() ? "" : " of " + population.val_data)
      << (run_data.has_test()
              ? ", test bars " + std::to_string(test_window(run_data, trainer.features()).begin) +
                    ".." + std::to_string(run_data.test.size() - 1) + " of " +
                    run_data.test.source + " (held out until the end)"
              : std::string())
      << "; network " << nn::describe(trainer.network()) << ", " << to_string(population.precision)
      << ", " << describe(trainer.learning_path()) << "; " << trainer.vaccine_bars()
      << " stress bars"
      << (recorded_steps(population) > 0
              ? "; steps recorded in cycles of " + std::to_string(recorded_steps(population))
              : std::string())
      << (k > 1 ? "; " + std::to_string(k) + " members trained together" : std::string()) << "\n";
  // The built-in policies on the same windows, once: what the epochs are measured against.
  const std::vector<Baseline> baselines = evaluate_baselines(
      space, run_data.separate_validation() ? run_data.validation : bars,
      trainer.validation_windows(), backtest_config(population, trainer.positions()));
  for (MemberRun& run : runs) {
    run.result.baselines = baselines;
    io::write_file_atomically(run.dir + "baselines.json", baselines_json(baselines).dump(2) + "\n");
  }
  log << "baselines on the validation window:";
  for (const Baseline& b : baselines) {
    log << (&b == &baselines.front() ? " " : "; ") << b.policy << " sharpe "
        << io::format_fixed(b.validation_sharpe, 3) << " annual return "
        << io::format_percent(b.windows.front().cagr);
  }
  log << "\n";

  StatusLine progress(log);
  for (std::size_t epoch = first_epoch; epoch <= population.epochs; ++epoch) {
    if (std::all_of(runs.begin(), runs.end(), [](const MemberRun& r) { return r.done; }))
      break;
    for (std::size_t m = 0; m < k; ++m) {
      if (!runs[m].done && epoch == runs[m].fault_epoch)
        trainer.inject_fault(m, runs[m].fault_kind);
    }
    progress.show("[epoch " + std::to_string(epoch) + "/" + std::to_string(population.epochs) +
                  "] training and validating...");
    const std::vector<EpochReport> reports = trainer.run_epoch();
    progress.clear();
    // Each running member's record of the epoch (null for the members that had stopped).
    std::vector<nlohmann::json> records(k);
    for (std::size_t m = 0; m < k; ++m) {
      if (!runs[m].done) {
        records[m] = end_epoch(runs[m], reports[m], trainer, m, options.checkpoints,
                               population.epochs, data_fingerprint, log);
      }
    }
    // A schedule's decision, timed (it waits for its copies and uploads to finish).
    std::optional<double> schedule_seconds;
    if (options.schedule) {
      const auto start = std::chrono::steady_clock::now();
      apply_schedule(options, epoch, reports, trainer, runs, records);
      schedule_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    for (std::size_t m = 0; m < k; ++m) {
      if (!records[m].is_null())
        write_records(runs[m], records[m], reports[m], schedule_seconds);
    }
    if (options.on_epoch)
      options.on_epoch(epoch, population.epochs);
    // The checkpoint: the population's state, each member's, and the records so far; none
    // when every member failed.
    if (std::all_of(runs.begin(), runs.end(), [](const MemberRun& r) { return r.result.failed; }))
      break;
    write_checkpoint(options.checkpoints, epoch, population.checkpoints, trainer, runs, run_data);
    // Members that stopped early close their run now (they take no more steps), and their
    // slots are freed: from the next epoch on they cost nothing.
    for (std::size_t m = 0; m < k; ++m) {
      if (runs[m].done && !runs[m].result.failed && !runs[m].finished)
        close_member(runs[m], trainer, m, data_fingerprint);
    }
    trainer.compact();
  }
  // A member that took gradient steps and never a finite one (every step skipped: its
  // learning rate or rewards overflow) learned nothing: it failed, it did not finish.
  for (MemberRun& run : runs) {
    if (run.result.failed)
      continue;
    bool learned = false;
    std::int64_t learning_steps = 0;
    std::istringstream records(run.metrics_text);
    for (std::string line; std::getline(records, line);) {
      const nlohmann::json record = nlohmann::json::parse(line);
      learned = learned || !record["loss"].is_null();
      learning_steps = record["learning_steps"].get<std::int64_t>();
      if (record.contains("schedule")) {
        nlohmann::json step = record["schedule"];
        step["epoch"] = record["epoch"];
        run.result.schedule.push_back(step);
      }
    }
    if (!learned && learning_steps > 0) {
      run.result.failed = true;
      run.result.failure = "training failed: every one of " + std::to_string(learning_steps) +
                           " gradient steps was skipped (non-finite: the learning rate or the "
                           "rewards overflow), so nothing was learned; see " +
                           run.dir + "metrics.jsonl";
    }
  }
  std::vector<std::size_t> survivors;  // the members that did not fail
  for (std::size_t m = 0; m < k; ++m) {
    if (!runs[m].result.failed) {
      survivors.push_back(m);
      if (!runs[m].finished)
        close_member(runs[m], trainer, m, data_fingerprint);
    }
  }
  // The test window, looked at once, now that every choice is made: each member's selected
  // and last policy in one pass, and the built-in policies.
  if (test_features && !survivors.empty()) {
    std::vector<float> rows;
    for (const std::size_t m : survivors) {
      const std::vector<float>& last = runs[m].last_parameters;
      rows.insert(rows.end(), runs[m].best_parameters.begin(), runs[m].best_parameters.end());
      rows.insert(rows.end(), last.begin(), last.end());
    }
    std::vector<eval::WindowMetrics> metrics;
    const TestResult look = look_at_test_window(space, trainer, run_data, *test_features,
                                                population, rows, 2 * survivors.size(), metrics);
    for (std::size_t i = 0; i < survivors.size(); ++i) {
      TestResult& test = runs[survivors[i]].result.test.emplace(look);
      test.best = metrics[2 * i];
      test.last = metrics[2 * i + 1];
    }
  }
  std::vector<RunResult> results;
  for (std::size_t m = 0; m < k; ++m) {
    MemberRun& run = runs[m];
    if (!run.result.failed) {
      write_final_metrics(run, baselines, val_begin, val_end);
      const std::string compared =
          compared_with_baselines(run.result.best_sharpe, sharpes(baselines));
      log << "best validation Sharpe " << io::format_fixed(run.result.best_sharpe, 3)
          << " at epoch " << run.result.best_epoch << (compared.empty() ? "" : ": " + compared);
      if (run.result.test) {
        const TestResult& test = *run.result.test;
        const std::string against =
            compared_with_baselines(test.best.sharpe, sharpes(test.baselines));
        log << "; on the unseen test window " << io::format_fixed(test.best.sharpe, 3)
            << (against.empty() ? "" : ": " + against);
      }
      log << "; run in " << run.config.out << "\n";
    }
    results.push_back(run.result);
  }
  return results;
}

}  // namespace dqntrader::train

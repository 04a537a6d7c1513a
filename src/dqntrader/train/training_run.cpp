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
#include <utility>

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
#include "dqntrader/io/background_writer.hpp"
#include "dqntrader/io/checkpoint_file.hpp"
#include "dqntrader/io/json_values.hpp"
#include "dqntrader/io/snapshot.hpp"
#include "dqntrader/train/dqn_trainer.hpp"
#include "dqntrader/train/learning_path.hpp"
#include "dqntrader/train/member_run.hpp"
#include "dqntrader/train/run_checkpoint.hpp"

namespace dqntrader::train {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Runs work, adding the seconds it took to phase (also when it throws).
template <class Work>
void timed(double& phase, Work&& work) {
  struct Add {
    double& phase;
    std::chrono::steady_clock::time_point start;
    ~Add() { phase += seconds_since(start); }
  } add{phase, std::chrono::steady_clock::now()};
  work();
}

// The seconds work took.
template <class Work>
double timed_seconds(Work&& work) {
  double seconds = 0.0;
  timed(seconds, std::forward<Work>(work));
  return seconds;
}

}  // namespace

namespace {

void remove_stale_temporaries(const std::string& dir) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.path().filename().string().find(".tmp-") != std::string::npos)
      std::filesystem::remove(entry.path(), error);
  }
}

}  // namespace

std::vector<Baseline> evaluate_baselines(const ExecSpace& space, const data::Bars& validation_bars,
                                         const std::vector<eval::BarRange>& windows,
                                         const eval::BacktestConfig& config) {
  std::vector<Baseline> baselines;
  for (eval::BuiltinRun& run :
       eval::evaluate_builtins(space, validation_bars, eval::builtin_policies(validation_bars),
                               windows, config, false)) {
    Baseline b;
    b.policy = eval::to_string(run.policy);
    double sharpe = 0.0;
    for (const eval::WindowMetrics& m : run.metrics)
      sharpe += m.sharpe;
    b.validation_sharpe = sharpe / static_cast<double>(windows.size());
    b.windows = std::move(run.metrics);
    baselines.push_back(std::move(b));
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

// The test window's one look: the metrics there of each parameter vector of rows (policies of
// the trainer's network, with its features and training statistics) in one pass on the
// device (the built-in policies' are the caller's).
TestResult look_at_test_window(const ExecSpace& space, const DqnTrainer& trainer,
                               const RunData& data, const data::FeatureSet& features,
                               const TrainConfig& population, const std::vector<float>& rows,
                               std::size_t policies, std::vector<eval::WindowMetrics>& metrics) {
  const eval::PolicyFile shape = trainer.policy({});
  const eval::BarRange window = test_window(data, shape.features.warmup());
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

std::shared_ptr<const RunData> SharedInputs::data(const TrainConfig& population) {
  std::shared_ptr<const RunData>& data = m_data[data_key(population)];
  if (!data)
    data = std::make_shared<const RunData>(load_run_data(population));
  return data;
}

const std::vector<Baseline>& SharedInputs::baselines(
    const std::string& key, const std::function<std::vector<Baseline>()>& make) {
  const auto found = m_baselines.find(key);
  if (found != m_baselines.end())
    return found->second;
  return m_baselines.emplace(key, make()).first->second;
}

nlohmann::json to_json(const RunPhases& p) {
  return {{"data_seconds", p.data},
          {"setup_seconds", p.setup},
          {"baselines_seconds", p.baselines},
          {"learning_seconds", p.learning},
          {"validation_seconds", p.validation},
          {"records_seconds", p.records},
          {"checkpoint_seconds", p.checkpoint},
          {"checkpoint_wait_seconds", p.checkpoint_wait},
          {"schedule_seconds", p.schedule},
          {"test_seconds", p.test},
          {"files_seconds", p.files},
          {"wall_seconds", p.wall}};
}

std::string phases_line(const RunPhases& p) {
  const double inside = p.learning + p.validation;
  std::ostringstream line;
  line << "learning and validation " << io::format_fixed(p.learning, 2) << " + "
       << io::format_fixed(p.validation, 2) << " s of " << io::format_fixed(p.wall, 2) << " s ("
       << static_cast<int>(std::lround(p.wall > 0 ? 100.0 * inside / p.wall : 0.0)) << "%); data "
       << io::format_fixed(p.data, 2) << ", set-up " << io::format_fixed(p.setup, 2)
       << ", baselines " << io::format_fixed(p.baselines, 2) << ", records "
       << io::format_fixed(p.records, 2) << ", checkpoints " << io::format_fixed(p.checkpoint, 2)
       << " (waiting for the writer " << io::format_fixed(p.checkpoint_wait, 2) << ")";
  if (p.schedule > 0)
    line << ", schedule " << io::format_fixed(p.schedule, 2);
  line << ", test window " << io::format_fixed(p.test, 2) << ", files "
       << io::format_fixed(p.files, 2) << " s";
  return line.str();
}

RunResult run_training(const ExecSpace& space, const TrainConfig& config, std::ostream& log,
                       const ResumeOptions& resume, const RunHooks& hooks) {
  const std::string held = held_run(config.out);
  if (held == "a sweep") {
    throw InputError(field("out") + " " + config.out +
                     " holds a sweep; a training run needs a directory of its own");
  }
  if (!held.empty() && !resume.resume && !resume.force) {
    throw InputError(field("out") + " " + config.out +
                     " holds a training run already: continue it with " + field("resume") + " " +
                     config.out + ", start it again with " + field("force") +
                     " (which removes its files first), or choose " + "another " + field("out"));
  }
  refuse_inputs_among_outputs(config, config.out, [](const std::filesystem::path& inside) {
    return std::distance(inside.begin(), inside.end()) == 1 && run_file(inside.string());
  });
  PopulationOptions options;
  options.checkpoints = config.out;
  options.on_epoch = hooks.on_epoch;
  options.interrupted = hooks.interrupted;
  RunResult result = run_population(space, {config}, options, log, resume).front();
  if (result.failed)
    throw Error(result.failure);
  return result;
}

namespace {

// A population's run, in the steps a reader follows top to bottom (run()).
class PopulationRun {
 public:
  PopulationRun(const ExecSpace& space, const std::vector<TrainConfig>& members,
                const PopulationOptions& options, std::ostream& log, const ResumeOptions& resume)
      : m_space(space), m_configs(members), m_options(options), m_log(log), m_resume(resume) {
    if (options.writer == nullptr)
      m_own_writer.emplace();
    m_writer = options.writer != nullptr ? options.writer : &*m_own_writer;
    if (options.snapshots == nullptr)
      m_own_snapshots.emplace();
    m_snapshots = options.snapshots != nullptr ? options.snapshots : &*m_own_snapshots;
  }

  std::vector<RunResult> run() {
    const auto start = std::chrono::steady_clock::now();
    timed(m_phases.data, [&] { prepare(); });
    timed(m_phases.setup, [&] {
      make_trainer();
      make_directories();
      if (m_resume.resume)
        resume_from_newest_readable_checkpoint();
      rewrite_member_directories();
      close_stopped_members();
      print_first_line();
    });
    timed(m_phases.baselines, [&] { evaluate_baselines_once(); });
    run_epochs();
    timed(m_phases.test, [&] {
      fail_members_that_never_learned();
      look_at_test_window_once();
    });
    return finish(start);
  }

 private:
  // Every setting checked, the data loaded (and the test window cut off), a run per member.
  void prepare() {
    for (const TrainConfig& c : m_configs)
      validate(c);
    check_population(m_configs);
    m_population = population_config(m_configs);
    m_data = m_options.shared != nullptr
                 ? m_options.shared->data(m_population)
                 : std::make_shared<const RunData>(load_run_data(m_population));
    for (const TrainConfig& c : m_configs)
      m_runs.emplace_back(c);
  }

  // The trainer, and the test bars' features, checked now (columns, length) and used once,
  // when the run ends. Bars too few for training and validation say so; where the test window
  // took most of them, the message says that too.
  void make_trainer() {
    try {
      m_trainer.emplace(m_space, m_configs, m_data->bars, m_data->separate_validation());
    } catch (const InputError& e) {
      if (m_data->cut.empty())
        throw;
      throw InputError(e.message() + " (" + m_data->cut + ")");
    }
    if (m_data->has_test()) {
      test_window(*m_data, m_trainer->features().warmup());
      m_test_features.emplace(m_space, m_data->test, m_trainer->features());
    }
  }

  // Everything is checked: the directories (none is made for a run refused), without the
  // temporary files of an interrupted write; a run started again with --force without the
  // files of the one before.
  void make_directories() {
    const std::string& checkpoints = m_options.checkpoints;
    std::error_code error;
    if (std::filesystem::exists(checkpoints) && !std::filesystem::is_directory(checkpoints))
      throw InputError(field("out") + " " + checkpoints + " is a file, not a directory");
    std::filesystem::create_directories(checkpoints, error);
    if (error)
      throw Error("cannot create the directory '" + checkpoints + "': " + error.message());
    remove_stale_temporaries(checkpoints);
    if (!m_resume.resume && m_resume.force)
      clear_run_files(checkpoints);
    for (const MemberRun& run : m_runs) {
      std::filesystem::create_directories(run.config.out, error);
      if (error)
        throw Error("cannot create the run directory '" + run.config.out + "': " + error.message());
      remove_stale_temporaries(run.config.out);
    }
  }

  // The newest checkpoint that verifies, checked against the run's settings and data (--force
  // continues past differences, saying them), restored into the trainer and the members' runs.
  void resume_from_newest_readable_checkpoint() {
    std::vector<io::Section> sections;
    std::string source;
    for (const std::string& path : checkpoint_paths(m_options.checkpoints)) {
      try {
        std::uint32_t format = 0;
        sections = io::read_sections(path, &format);
        upgrade(sections, format, path);
        source = path;
        break;
      } catch (const InputError& e) {
        m_log << "dqntrader train: skipping " << e.what() << "\n";
      }
    }
    if (source.empty())
      throw InputError(m_options.checkpoints, 0, 0, "no valid checkpoint to resume from");
    const RunCheckpoint saved = RunCheckpoint::read(sections, source);
    const std::size_t k = m_runs.size();
    if (saved.members.size() != k) {
      throw InputError(source, 0, 0,
                       "the checkpoint holds " + std::to_string(saved.members.size()) +
                           " members, the run " + std::to_string(k));
    }
    const std::string differences = differences_from(saved);
    if (!differences.empty()) {
      if (!m_resume.force) {
        throw InputError(source, 0, 0,
                         "the run's settings or data differ from the checkpoint's (" +
                             field("force") + " continues anyway):" + differences);
      }
      m_log << "dqntrader train: --force: continuing although" << differences << "\n";
    }
    m_trainer->restore(sections, source);
    for (std::size_t m = 0; m < k; ++m)
      m_runs[m].restore(saved.members[m]);
    m_first_epoch = static_cast<std::size_t>(saved.epoch) + 1;
    m_log << "dqntrader train: resuming after epoch " << m_first_epoch - 1 << " from " << source
          << "\n";
  }

  // What differs between the checkpoint and this run: each member's settings (one the
  // checkpoint lacks, added since it was written, was its default then), the data, the test
  // window's bars (older checkpoints did not record them); one line each.
  std::string differences_from(const RunCheckpoint& saved) const {
    const std::size_t k = m_runs.size();
    const nlohmann::json defaults = identity(TrainConfig{});
    std::string differences;
    for (std::size_t m = 0; m < k; ++m) {
      const nlohmann::json& was = saved.members[m].settings;
      const nlohmann::json now = identity(m_configs[m]);
      for (const auto& item : now.items()) {
        const bool same = was.contains(item.key()) ? was[item.key()] == item.value()
                                                   : defaults.contains(item.key()) &&
                                                         defaults[item.key()] == item.value();
        if (!same) {
          differences += "\n  " + (k > 1 ? "member " + std::to_string(m) + " " : std::string()) +
                         item.key() + ": checkpoint " +
                         (was.contains(item.key()) ? was[item.key()].dump() : "(none)") + ", now " +
                         item.value().dump();
        }
      }
    }
    if (saved.data_fingerprint != m_data->fingerprint)
      differences += "\n  the data differ from the checkpoint's (fingerprints do not match)";
    if (saved.test_fingerprint && *saved.test_fingerprint != m_data->test_fingerprint) {
      differences +=
          "\n  the test window's data differ from the checkpoint's (fingerprints do "
          "not match): its numbers would not be the run's";
    }
    return differences;
  }

  // The members' directories as the checkpoint left them (a resumed member whose directory
  // was lost gets its records and best policy back).
  void rewrite_member_directories() {
    for (MemberRun& run : m_runs) {
      run.replace("config.json", settings_json(run.config));
      run.replace("metrics.jsonl", run.metrics_text);
      run.replace("timings.jsonl", run.timings_text);
      if (!run.best_parameters.empty())
        run.write_best(*m_trainer, m_data->fingerprint);
      if (run.finished)
        run.write_last(*m_trainer, m_data->fingerprint);
    }
  }

  // Members that stopped (early, or at the checkpoint's epoch) close their run: they take no
  // more steps; and the slots of every stopped member are freed, so that from the next epoch
  // on they cost nothing.
  void close_stopped_members() {
    for (std::size_t m = 0; m < m_runs.size(); ++m) {
      MemberRun& run = m_runs[m];
      if (run.done && !run.result.failed && !run.finished)
        run.close(*m_trainer, m, m_data->fingerprint);
    }
    m_trainer->compact();
  }

  // The run's first line: its data, windows, network and how it runs.
  void print_first_line() {
    const auto [train_begin, train_end] = m_trainer->training_window();
    const auto [val_begin, val_end] = m_trainer->validation_window();
    const std::size_t k = m_runs.size();
    m_log << "dqntrader train: " << m_data->bars.source << ": training bars " << train_begin << ".."
          << train_end - 1 << ", validation bars " << val_begin << ".." << val_end - 1
          << (m_population.val_data.empty() ? "" : " of " + m_population.val_data)
          << (m_data->has_test()
                  ? ", test bars " +
                        std::to_string(test_window(*m_data, m_trainer->features().warmup()).begin) +
                        ".." + std::to_string(m_data->test.size() - 1) + " of " +
                        m_data->test.source + " (held out until the end)"
                  : std::string())
          << "; network " << nn::describe(m_trainer->network()) << ", "
          << to_string(m_population.precision) << ", "
          << train::describe(m_trainer->learning_path()) << "; " << m_trainer->vaccine_bars()
          << " stress bars"
          << (recorded_steps(m_population) > 0
                  ? "; steps recorded in cycles of " + std::to_string(recorded_steps(m_population))
                  : std::string())
          << (k > 1 ? "; " + std::to_string(k) + " members trained together" : std::string())
          << "\n";
  }

  // The built-in policies on the same windows, once: what the epochs are measured against.
  void evaluate_baselines_once() {
    const data::Bars& bars = m_data->separate_validation() ? m_data->validation : m_data->bars;
    m_baselines = baselines(bars, "validation", m_trainer->validation_windows());
    const std::string baselines = baselines_json(m_baselines).dump(2) + "\n";
    for (MemberRun& run : m_runs) {
      run.result.baselines = m_baselines;
      run.replace("baselines.json", baselines);
    }
    // The members' directories as they start are written with the first epoch's records.
    m_log << "baselines on the validation window:";
    for (const Baseline& b : m_baselines) {
      m_log << (&b == &m_baselines.front() ? " " : "; ") << b.policy << " sharpe "
            << io::format_fixed(b.validation_sharpe, 3) << " annual return "
            << io::format_percent(b.windows.front().cagr);
    }
    m_log << "\n";
  }

  void run_epochs() {
    StatusLine progress(m_log);
    for (std::size_t epoch = m_first_epoch; epoch <= m_population.epochs; ++epoch) {
      if (std::all_of(m_runs.begin(), m_runs.end(), [](const MemberRun& r) { return r.done; }))
        break;
      progress.show("[epoch " + std::to_string(epoch) + "/" + std::to_string(m_population.epochs) +
                    "] training and validating...");
      if (!run_epoch(epoch, progress))
        break;
    }
  }

  // One epoch of every running member: its faults injected, the trainer's epoch, each
  // member's end of it, the schedule's decision, the records, the checkpoint (none when every
  // member failed: false) and the members that stopped closed.
  bool run_epoch(std::size_t epoch, StatusLine& progress) {
    DqnTrainer& trainer = *m_trainer;
    const std::size_t k = m_runs.size();
    for (std::size_t m = 0; m < k; ++m) {
      if (!m_runs[m].done && epoch == m_runs[m].fault_epoch)
        trainer.inject_fault(m, m_runs[m].fault_kind);
    }
    const std::vector<EpochReport> reports = trainer.run_epoch(m_options.interrupted);
    progress.clear();
    for (const EpochReport& r : reports) {
      if (r.epoch == epoch) {  // a running member's: the epoch's (the same for every member)
        m_phases.learning += r.train_seconds;
        m_phases.validation += r.validation_seconds;
        break;
      }
    }
    const auto records_start = std::chrono::steady_clock::now();
    // A member whose fault budget ran out names the last checkpoint on disk: the ones handed
    // to the writer are written first.
    for (std::size_t m = 0; m < k; ++m) {
      if (!m_runs[m].done &&
          reports[m].consecutive_faults >= static_cast<std::int64_t>(m_configs[m].fault_budget))
        m_writer->wait();
    }
    // Each running member's record of the epoch (null for the members that had stopped).
    std::vector<nlohmann::json> records(k);
    for (std::size_t m = 0; m < k; ++m) {
      if (!m_runs[m].done) {
        records[m] = m_runs[m].end_epoch(reports[m], trainer, m, m_options.checkpoints,
                                         m_population.epochs, m_data->fingerprint, m_log);
      }
    }
    double records_seconds = seconds_since(records_start);
    // A schedule's decision, timed (it waits for its copies and uploads to finish).
    std::optional<double> schedule_seconds;
    if (m_options.schedule) {
      schedule_seconds = timed_seconds([&] { apply_schedule(epoch, reports, records); });
      m_phases.schedule += *schedule_seconds;
    }
    // The epoch's records, and the checkpoint's snapshot, handed to the writer: they reach the
    // disk while the next epoch runs. The records' timings say what the last epoch's took.
    const auto tail = std::chrono::steady_clock::now();
    const nlohmann::json timings = {{"records_seconds", m_last_records_seconds},
                                    {"checkpoint_seconds", m_last_checkpoint_seconds}};
    for (std::size_t m = 0; m < k; ++m) {
      if (!records[m].is_null())
        m_runs[m].write_records(records[m], reports[m], schedule_seconds, timings);
    }
    records_seconds += seconds_since(tail);
    m_phases.records += records_seconds;
    m_last_records_seconds = records_seconds;
    if (std::all_of(m_runs.begin(), m_runs.end(),
                    [](const MemberRun& r) { return r.result.failed; })) {
      submit_files({});
      if (m_options.on_epoch)
        m_options.on_epoch(epoch, m_population.epochs);
      return false;
    }
    m_last_checkpoint_seconds = timed_seconds([&] { write_checkpoint(epoch); });
    m_phases.checkpoint += m_last_checkpoint_seconds;
    close_stopped_members();
    // After the checkpoint: a caller that stops here (an exception) leaves the epoch's state.
    if (m_options.on_epoch)
      m_options.on_epoch(epoch, m_population.epochs);
    return true;
  }

  // The population's schedule after the epoch: what it did goes into the members' records; a
  // member it stops stops early.
  void apply_schedule(std::size_t epoch, const std::vector<EpochReport>& reports,
                      std::vector<nlohmann::json>& records) {
    const std::size_t k = m_runs.size();
    std::vector<double> sharpes(k);
    std::vector<bool> running(k);
    for (std::size_t m = 0; m < k; ++m) {
      sharpes[m] = reports[m].validation_sharpe;
      running[m] = !m_runs[m].done;
    }
    const std::vector<ScheduleStep> steps = m_options.schedule(epoch, sharpes, running, *m_trainer);
    for (std::size_t m = 0; m < k && m < steps.size(); ++m) {
      if (!steps[m].record.is_null() && !records[m].is_null())
        records[m]["schedule"] = steps[m].record;
      if (steps[m].stop && !m_runs[m].done) {
        m_runs[m].result.stopped_early = true;
        m_runs[m].done = true;
        m_trainer->stop(m);
      }
    }
  }

  // checkpoint-<epoch>.dqnckpt: the population's state, then the run's record, taken now (the
  // snapshot: the device's buffers copied to the host) and written after the epoch's records by
  // the writer, while the next epoch runs; the newest `checkpoints` are kept.
  void write_checkpoint(std::size_t epoch) {
    RunCheckpoint record;
    record.epoch = static_cast<std::int64_t>(epoch);
    record.data_fingerprint = m_data->fingerprint;
    record.test_fingerprint = m_data->test_fingerprint;
    for (const MemberRun& run : m_runs)
      record.members.push_back(run.checkpoint());
    auto snapshot = std::make_shared<io::Snapshot>(*m_snapshots);
    m_trainer->snapshot(*snapshot);
    m_phases.checkpoint_wait += snapshot->waited();
    std::vector<io::Section> sections;
    record.append_to(sections);
    for (io::Section& s : sections)
      snapshot->add(std::move(s));
    const std::string directory = m_options.checkpoints;
    const std::size_t keep = m_population.checkpoints;
    m_phases.checkpoint_wait += submit_files([directory, epoch, keep, snapshot] {
      io::write_sections(directory + "/checkpoint-" + std::to_string(epoch) + ".dqnckpt",
                         kCheckpointFormat, snapshot->sections());
      const std::vector<std::string> kept = checkpoint_paths(directory);
      std::error_code error;
      for (std::size_t i = keep; i < kept.size(); ++i)
        std::filesystem::remove(kept[i], error);
    });
  }

  // The members' files written since the last batch, then then, handed to the writer as one
  // batch; the seconds it waited for the writer to take it.
  double submit_files(std::function<void()> then) {
    std::vector<io::FileWrite> files;
    for (MemberRun& run : m_runs) {
      for (io::FileWrite& f : run.take_writes())
        files.push_back(std::move(f));
    }
    return m_writer->submit([files = std::move(files), then = std::move(then)] {
      io::write_files(files);
      if (then)
        then();
    });
  }

  // What the schedule did to each member that did not fail, and the members that never took a
  // finite gradient step failed (they learned nothing); the others close.
  void fail_members_that_never_learned() {
    for (std::size_t m = 0; m < m_runs.size(); ++m) {
      MemberRun& run = m_runs[m];
      if (run.result.failed)
        continue;
      run.result.schedule = run.schedule;
      run.fail_if_it_never_learned();
      if (!run.result.failed) {
        m_survivors.push_back(m);
        if (!run.finished)
          run.close(*m_trainer, m, m_data->fingerprint);
      }
    }
  }

  // The test window, looked at once, now that every choice is made: each surviving member's
  // selected and last policy in one pass, and the built-in policies.
  void look_at_test_window_once() {
    if (!m_test_features || m_survivors.empty())
      return;
    // Each member's best and last policy, the last only where it differs from the best (a
    // member whose last epoch was its best has one policy: the same numbers).
    std::vector<float> rows;
    std::vector<std::pair<std::size_t, std::size_t>> at;  // each survivor's rows: best, last
    std::size_t policies = 0;
    for (const std::size_t m : m_survivors) {
      const std::vector<float>& best = m_runs[m].best_parameters;
      const std::vector<float>& last = m_runs[m].last_parameters;
      rows.insert(rows.end(), best.begin(), best.end());
      const std::size_t best_row = policies++;
      if (last != best) {
        rows.insert(rows.end(), last.begin(), last.end());
        at.emplace_back(best_row, policies++);
      } else {
        at.emplace_back(best_row, best_row);
      }
    }
    std::vector<eval::WindowMetrics> metrics;
    TestResult look = look_at_test_window(m_space, *m_trainer, *m_data, *m_test_features,
                                          m_population, rows, policies, metrics);
    for (const Baseline& b :
         baselines(m_data->test, "test", {test_window(*m_data, m_trainer->features().warmup())}))
      look.baselines.push_back({b.policy, b.windows.front()});
    for (std::size_t i = 0; i < m_survivors.size(); ++i) {
      TestResult& test = m_runs[m_survivors[i]].result.test.emplace(look);
      test.best = metrics[at[i].first];
      test.last = metrics[at[i].second];
    }
  }

  // The built-in policies' metrics on windows of bars (the population's validation or test
  // bars: which), or the sweep's where an earlier population's settings made the same.
  std::vector<Baseline> baselines(const data::Bars& bars, const char* which,
                                  const std::vector<eval::BarRange>& windows) const {
    const eval::BacktestConfig config = backtest_config(m_population, m_trainer->positions());
    auto make = [&] { return evaluate_baselines(m_space, bars, windows, config); };
    if (m_options.shared == nullptr)
      return make();
    nlohmann::json key = {{"bars", which},
                          {"data", data_key(m_population)},
                          {"positions", config.positions},
                          {"cost", config.cost},
                          {"bars_per_year", config.bars_per_year},
                          {"risk_free", config.risk_free}};
    for (const eval::BarRange& w : windows)
      key["windows"].push_back({w.begin, w.end});
    return m_options.shared->baselines(key.dump(), make);
  }

  // final_metrics.json, the run's phases in timings.jsonl and the last line of each member
  // that did not fail; their files handed to the writer (and, when the run has the writer to
  // itself, written before it returns); the results.
  std::vector<RunResult> finish(std::chrono::steady_clock::time_point start) {
    const auto files_start = std::chrono::steady_clock::now();
    const auto [val_begin, val_end] = m_trainer->validation_window();
    std::vector<RunResult> results;
    for (MemberRun& run : m_runs) {
      if (!run.result.failed) {
        run.write_final_metrics(m_baselines, val_begin, val_end);
        const std::string compared =
            compared_with_baselines(run.result.best_sharpe, sharpes(m_baselines));
        m_log << "best validation Sharpe " << io::format_fixed(run.result.best_sharpe, 3)
              << " at epoch " << run.result.best_epoch << (compared.empty() ? "" : ": " + compared);
        if (run.result.test) {
          const TestResult& test = *run.result.test;
          const std::string against =
              compared_with_baselines(test.best.sharpe, sharpes(test.baselines));
          m_log << "; on the unseen test window " << io::format_fixed(test.best.sharpe, 3)
                << (against.empty() ? "" : ": " + against);
        }
        m_log << "; run in " << run.config.out << "\n";
      }
    }
    // The phases so far, in each member's timings.jsonl (the wait for the run's files below
    // is in its log line alone).
    m_phases.files += seconds_since(files_start);
    m_phases.wall = seconds_since(start);
    const std::string line = nlohmann::json{{"run", to_json(m_phases)}}.dump() + "\n";
    for (MemberRun& run : m_runs)
      run.append("timings.jsonl", line);
    submit_files({});
    if (m_own_writer) {
      const double waited = m_writer->wait();
      m_phases.files += waited;
      m_phases.wall += waited;
    }
    for (MemberRun& run : m_runs) {
      run.result.phases = m_phases;
      results.push_back(run.result);
    }
    if (!m_options.writer)
      m_log << phases_line(m_phases) << "\n";
    return results;
  }

  const ExecSpace& m_space;
  std::vector<TrainConfig> m_configs;
  const PopulationOptions& m_options;
  std::ostream& m_log;
  ResumeOptions m_resume;
  TrainConfig m_population;               // the population's loop
  std::shared_ptr<const RunData> m_data;  // the sweep's, or the run's own
  std::vector<MemberRun> m_runs;
  std::optional<DqnTrainer> m_trainer;
  std::optional<data::FeatureSet> m_test_features;
  std::size_t m_first_epoch = 1;
  std::vector<Baseline> m_baselines;
  std::vector<std::size_t> m_survivors;  // the members that did not fail
  // The writer's batches hold snapshots of the pool: the pool is destroyed after the writer.
  std::optional<io::SnapshotPool> m_own_snapshots;  // without the caller's
  io::SnapshotPool* m_snapshots = nullptr;
  std::optional<io::BackgroundWriter> m_own_writer;  // without the caller's
  io::BackgroundWriter* m_writer = nullptr;
  RunPhases m_phases;
  double m_last_records_seconds = 0, m_last_checkpoint_seconds = 0;  // the epoch before's
};

}  // namespace

std::vector<RunResult> run_population(const ExecSpace& space,
                                      const std::vector<TrainConfig>& members,
                                      const PopulationOptions& options, std::ostream& log,
                                      const ResumeOptions& resume) {
  return PopulationRun(space, members, options, log, resume).run();
}

}  // namespace dqntrader::train

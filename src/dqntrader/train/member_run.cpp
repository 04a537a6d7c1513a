#include "dqntrader/train/member_run.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <ostream>
#include <sstream>

#include "dqntrader/core/error.hpp"
#include "dqntrader/eval/metrics_json.hpp"
#include "dqntrader/eval/policy_file.hpp"
#include "dqntrader/io/atomic_file.hpp"
#include "dqntrader/io/json_values.hpp"
#include "dqntrader/train/run_data.hpp"

namespace dqntrader::train {

MemberRun::MemberRun(const TrainConfig& settings) : config(settings), dir(settings.out + "/") {
  result.best_sharpe = -std::numeric_limits<double>::infinity();
  if (!config.inject_fault.empty()) {
    const std::size_t at = config.inject_fault.find('@');
    fault_kind = config.inject_fault.substr(0, at);
    fault_epoch = std::stoul(config.inject_fault.substr(at + 1));
  }
}

void MemberRun::replace(const std::string& name, std::string bytes) {
  result.files[name] = bytes;
  m_writes.push_back({dir + name, std::move(bytes), false});
}

void MemberRun::append(const std::string& name, const std::string& bytes) {
  result.files[name] += bytes;
  m_writes.push_back({dir + name, bytes, true});
}

void MemberRun::write_best(const DqnTrainer& trainer, std::uint64_t fingerprint) {
  eval::PolicyFile best = trainer.policy(best_parameters);
  best.info = {{"epoch", result.best_epoch},
               {"validation_sharpe", io::json_number(result.best_sharpe)},
               {"data_fingerprint", fingerprint_text(fingerprint)}};
  replace("best.dqnpolicy", eval::policy_bytes(best));
}

void MemberRun::write_last(const DqnTrainer& trainer, std::uint64_t fingerprint) {
  eval::PolicyFile last = trainer.policy(last_parameters);
  last.info = {{"epoch", result.epochs}, {"data_fingerprint", fingerprint_text(fingerprint)}};
  replace("last.dqnpolicy", eval::policy_bytes(last));
}

void MemberRun::close(const DqnTrainer& trainer, std::size_t m, std::uint64_t fingerprint) {
  last_parameters = trainer.parameters(m);
  write_last(trainer, fingerprint);
  finished = true;
}

void MemberRun::write_final_metrics(const std::vector<Baseline>& baselines, std::size_t val_begin,
                                    std::size_t val_end) {
  nlohmann::json final_metrics = eval::to_json(result.best);
  nlohmann::json kept = nlohmann::json::object();
  for (const Baseline& b : baselines)
    kept[b.policy] = eval::to_json(b.windows.front());
  final_metrics["baselines"] = kept;
  final_metrics["validation_window"] = {{"first_bar", val_begin}, {"last_bar", val_end - 1}};
  if (result.test)
    final_metrics["test"] = to_json(*result.test);
  replace("final_metrics.json", final_metrics.dump(2) + "\n");
}

nlohmann::json MemberRun::end_epoch(const EpochReport& r, DqnTrainer& trainer, std::size_t m,
                                    const std::string& checkpoints, std::size_t epochs,
                                    std::uint64_t fingerprint, std::ostream& log) {
  const bool improved = r.validation_sharpe > result.best_sharpe || best_parameters.empty();
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

  if (r.consecutive_faults >= static_cast<std::int64_t>(config.fault_budget)) {
    const std::vector<std::string> kept = checkpoint_paths(checkpoints);
    nlohmann::json report = {{"epoch", r.epoch},
                             {"steps", r.steps},
                             {"consecutive_faults", r.consecutive_faults},
                             {"fault_budget", config.fault_budget},
                             {"skipped_steps_this_epoch", r.skipped},
                             {"guard_restores_this_epoch", r.restores},
                             {"loss", io::json_number(r.loss)},
                             {"last_good_checkpoint", kept.empty() ? "" : kept.front()}};
    replace("fault_report.json", report.dump(2) + "\n");
    result.failed = true;
    result.failure = "training stopped: " + std::to_string(r.consecutive_faults) +
                     " consecutive faulty steps (non-finite gradients skipped or guard "
                     "restores) reached the budget of " +
                     std::to_string(config.fault_budget) + "; see " + dir + "fault_report.json";
    done = true;
    trainer.stop(m);
    return record;
  }

  result.epochs = r.epoch;
  result.last_sharpe = r.validation_sharpe;
  if (improved) {
    result.best_sharpe = r.validation_sharpe;
    result.best_epoch = r.epoch;
    result.best = v;
    best_parameters = trainer.parameters(m);
    write_best(trainer, fingerprint);
    since_best = 0;
  } else {
    ++since_best;
  }
  if (!improved && config.patience > 0 && since_best >= config.patience) {
    log << "stopping early: no better validation Sharpe for " << config.patience << " epochs\n";
    result.stopped_early = true;
    done = true;
    trainer.stop(m);
  }
  return record;
}

void MemberRun::write_records(const nlohmann::json& record, const EpochReport& r,
                              const std::optional<double>& schedule_seconds,
                              const nlohmann::json& timings) {
  const std::string line = record.dump() + "\n";
  append("metrics.jsonl", line);
  metrics_text += line;
  count(record);
  nlohmann::json times = {{"epoch", r.epoch},
                          {"train_seconds", r.train_seconds},
                          {"validation_seconds", r.validation_seconds}};
  if (schedule_seconds)
    times["schedule_seconds"] = *schedule_seconds;
  times.update(timings);
  const std::string timing = times.dump() + "\n";
  append("timings.jsonl", timing);
  timings_text += timing;
}

void MemberRun::count(const nlohmann::json& record) {
  learned = learned || !record["loss"].is_null();
  learning_steps = record["learning_steps"].get<std::int64_t>();
  if (record.contains("schedule")) {
    nlohmann::json step = record["schedule"];
    step["epoch"] = record["epoch"];
    schedule.push_back(step);
  }
}

void MemberRun::fail_if_it_never_learned() {
  if (result.failed || learned || learning_steps == 0)
    return;
  result.failed = true;
  result.failure = "training failed: every one of " + std::to_string(learning_steps) +
                   " gradient steps was skipped (non-finite: the learning rate or the "
                   "rewards overflow), so nothing was learned; see " +
                   dir + "metrics.jsonl";
}

RunCheckpoint::Member MemberRun::checkpoint() const {
  RunCheckpoint::Member m;
  m.settings = identity(config);
  m.state = MemberState{result.best_sharpe,
                        result.last_sharpe,
                        static_cast<std::int64_t>(result.best_epoch),
                        static_cast<std::int64_t>(since_best),
                        static_cast<std::int64_t>(result.epochs),
                        done ? 1 : 0,
                        result.failed ? 1 : 0,
                        result.stopped_early ? 1 : 0};
  m.best_parameters = best_parameters;
  m.best_metrics = result.best;
  if (finished)
    m.last_parameters = last_parameters;
  m.metrics = metrics_text;
  m.timings = timings_text;
  return m;
}

void MemberRun::restore(const RunCheckpoint::Member& saved) {
  result.best_sharpe = saved.state.best_sharpe;
  result.last_sharpe = saved.state.last_sharpe;
  result.best_epoch = static_cast<std::size_t>(saved.state.best_epoch);
  result.epochs = static_cast<std::size_t>(saved.state.epoch);
  result.stopped_early = saved.state.stopped_early != 0;
  result.failed = saved.state.failed != 0;
  since_best = static_cast<std::size_t>(saved.state.since_best);
  done = saved.state.done != 0;
  best_parameters = saved.best_parameters;
  result.best = saved.best_metrics;
  metrics_text = saved.metrics;
  timings_text = saved.timings;
  finished = saved.last_parameters.has_value();
  if (finished)
    last_parameters = *saved.last_parameters;
  // The counters of the records so far, read once from them.
  std::istringstream records(metrics_text);
  for (std::string line; std::getline(records, line);)
    count(nlohmann::json::parse(line));
}

}  // namespace dqntrader::train

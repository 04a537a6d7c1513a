#include "dqntrader/train/training_run.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
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
#include "dqntrader/data/bar_cache.hpp"
#include "dqntrader/data/synthetic.hpp"
#include "dqntrader/io/atomic_file.hpp"
#include "dqntrader/io/metrics_json.hpp"
#include "dqntrader/io/policy_file.hpp"
#include "dqntrader/train/dqn_trainer.hpp"

namespace dqntrader::train {

namespace {

nlohmann::json setting_value(const Setting& s) {
  const std::string v = s.get();
  if (s.is_flag)
    return v == "true";
  if (s.is_list) {
    nlohmann::json list = nlohmann::json::array();
    std::stringstream in(v);
    std::string item;
    while (std::getline(in, item, ',')) {
      if (item.empty())
        continue;
      if (s.is_number) {
        list.push_back(std::stoull(item));
      } else {
        list.push_back(item);
      }
    }
    return list;
  }
  if (s.is_number)
    return nlohmann::json::parse(v);
  return v;
}

std::string as_text(const nlohmann::json& value) {
  if (value.is_string())
    return value.get<std::string>();
  if (value.is_boolean())
    return value.get<bool>() ? "true" : "false";
  if (value.is_array()) {
    std::string joined;
    for (const auto& item : value)
      joined += (joined.empty() ? "" : ",") + as_text(item);
    return joined;
  }
  return value.dump();
}

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

std::string fixed(double v, int digits) {
  if (std::isnan(v))
    return "nan";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, v);
  return buffer;
}

class Progress {
 public:
  Progress(std::ostream& log)
      : m_log(log), m_terminal(::isatty(STDERR_FILENO) != 0 && &log == &std::cerr) {}
  void update(std::size_t epoch, std::size_t epochs, const std::string& what) {
    if (m_terminal)
      m_log << "\r\033[K[epoch " << epoch << "/" << epochs << "] " << what << std::flush;
  }
  void clear() {
    if (m_terminal)
      m_log << "\r\033[K" << std::flush;
  }

 private:
  std::ostream& m_log;
  bool m_terminal;
};

}  // namespace

std::string settings_json(TrainConfig& config) {
  nlohmann::json j = nlohmann::json::object();
  for (const Setting& s : settings(config))
    j[s.name] = setting_value(s);
  return j.dump(2) + "\n";
}

void apply_settings_json(TrainConfig& config, const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw InputError(path, 0, 0, std::string("cannot open: ") + std::strerror(errno));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(path, 0, 0, std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object())
    throw InputError(path, 0, 0, "expected a JSON object of settings");
  std::vector<Setting> all = settings(config);
  for (const auto& item : j.items()) {
    auto found = std::find_if(all.begin(), all.end(),
                              [&](const Setting& s) { return s.name == item.key(); });
    if (found == all.end())
      throw InputError(path, 0, 0, "unknown setting '" + item.key() + "'");
    try {
      found->set(as_text(item.value()));
    } catch (const InputError& e) {
      throw InputError(path, 0, 0, e.what());
    }
  }
}

RunResult run_training(const ExecSpace& space, const TrainConfig& given, std::ostream& log) {
  TrainConfig config = given;
  validate(config);
  data::ColumnSelection columns;
  columns.names = config.feature_columns;
  columns.prefixes = config.feature_prefixes;
  data::Bars bars;
  if (config.data.empty()) {
    data::SynthConfig synth;
    synth.bars = config.synth_bars;
    synth.seed = config.seed;
    bars = data::generate_bars(synth);
  } else {
    bars = data::load_bars(config.data, columns);
  }
  data::Bars validation;
  if (!config.val_data.empty())
    validation = data::load_bars(config.val_data, columns);

  std::error_code error;
  std::filesystem::create_directories(config.out, error);
  if (error)
    throw Error("cannot create the run directory '" + config.out + "': " + error.message());
  const std::string dir = config.out + "/";
  io::write_file_atomically(dir + "config.json", settings_json(config));
  io::write_file_atomically(dir + "metrics.jsonl", "");

  DqnTrainer trainer(space, config, bars, config.val_data.empty() ? nullptr : &validation);
  const auto [train_begin, train_end] = trainer.training_window();
  const auto [val_begin, val_end] = trainer.validation_window();
  log << "dqntrader train: " << bars.source << ": training bars " << train_begin << ".."
      << train_end - 1 << ", validation bars " << val_begin << ".." << val_end - 1
      << (config.val_data.empty() ? "" : " of " + config.val_data) << "; network "
      << trainer.network().state_size();
  for (std::size_t w : trainer.network().hidden)
    log << "-" << w;
  log << "-" << trainer.network().actions << (config.dueling ? " dueling" : "") << ", "
      << to_string(config.precision) << "; " << trainer.vaccine_bars() << " stress bars\n";

  RunResult result;
  result.best_sharpe = -std::numeric_limits<double>::infinity();
  std::vector<float> best_parameters;
  std::size_t since_best = 0;
  Progress progress(log);
  for (std::size_t epoch = 1; epoch <= config.epochs; ++epoch) {
    progress.update(epoch, config.epochs, "training and validating...");
    const EpochReport r = trainer.run_epoch();
    progress.clear();
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
    record["train_seconds"] = r.train_seconds;
    record["validation_seconds"] = r.validation_seconds;
    record["validation"] = io::to_json(r.validation.front());
    record["validation_sharpe"] = io::json_number(r.validation_sharpe);
    if (r.validation.size() > 1) {
      nlohmann::json windows = nlohmann::json::array();
      for (const auto& m : r.validation)
        windows.push_back(io::to_json(m));
      record["validation_windows"] = windows;
    }
    nlohmann::json probe = nlohmann::json::object();
    for (const auto& [group, value] : r.probe)
      probe[group] = io::json_number(value);
    record["probe"] = probe;
    record["best"] = improved;
    append_line(dir + "metrics.jsonl", record.dump());

    const eval::WindowMetrics& v = r.validation.front();
    log << "epoch " << r.epoch << "/" << config.epochs << "  loss " << fixed(r.loss, 5)
        << "  mean Q " << fixed(r.mean_q, 4) << "  eps " << fixed(r.epsilon, 3) << "  skipped "
        << r.skipped << "  val sharpe " << fixed(r.validation_sharpe, 3) << "  return "
        << fixed(v.total_return, 4) << "  drawdown " << fixed(v.max_drawdown, 4) << "  time "
        << fixed(r.train_seconds, 2) << "s train + " << fixed(r.validation_seconds, 2) << "s val"
        << (improved ? "  *best" : "") << "\n";

    result.epochs = epoch;
    if (improved) {
      result.best_sharpe = r.validation_sharpe;
      result.best_epoch = epoch;
      result.best = v;
      best_parameters = trainer.parameters();
      io::PolicyFile best = trainer.policy(best_parameters);
      best.info = {{"epoch", epoch}, {"validation_sharpe", io::json_number(r.validation_sharpe)}};
      io::write_policy(dir + "best.dqnpolicy", best);
      since_best = 0;
    } else if (config.patience > 0 && ++since_best >= config.patience) {
      log << "stopping early: no better validation Sharpe for " << config.patience << " epochs\n";
      result.stopped_early = true;
      break;
    }
  }
  io::PolicyFile last = trainer.policy(trainer.parameters());
  last.info = {{"epoch", result.epochs}};
  io::write_policy(dir + "last.dqnpolicy", last);
  io::write_file_atomically(dir + "final_metrics.json", io::to_json(result.best).dump(2) + "\n");
  log << "best validation Sharpe " << fixed(result.best_sharpe, 3) << " at epoch "
      << result.best_epoch << "; run in " << config.out << "\n";
  return result;
}

}  // namespace dqntrader::train

// Every setting of a training run, with its default, in one table: the command's flags,
// config.json, --config files and the documentation are all generated from settings().
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dqntrader/core/member_settings.hpp"
#include "dqntrader/core/precision.hpp"
#include "dqntrader/data/feature_spec.hpp"
#include "dqntrader/eval/backtest_config.hpp"
#include "dqntrader/nn/adam.hpp"

namespace dqntrader::train {

struct TrainConfig {
  // data
  std::string data;                 // bar file; empty: the built-in synthetic market
  std::string symbol;               // the instrument of a bar file of several (data::BarSelection)
  std::string val_data;             // separate validation file; empty: the tail of data
  double val_fraction = 0.25;       // share of the bars before the test window for validation
  std::string test_data;            // separate test file; empty: the tail of the last file
  double test_fraction = 0.2;       // share of the bars held out at the end for the test
  std::size_t synth_bars = 500000;  // size of the built-in market
  std::vector<std::string> feature_columns, feature_prefixes;
  int return_window = 16, volatility_window = 16, ofi_window = 4;
  // network
  std::vector<std::size_t> hidden = {128, 128};
  bool dueling = false;
  Precision precision = default_precision();
  std::string learning_path = "auto";  // auto, products or fused (learning_path.hpp)
  // the learning algorithm
  std::size_t epochs = 8;
  std::size_t steps_per_epoch = 1000;
  std::size_t batch_size = 256;
  std::size_t environments = 64;
  std::size_t episode_length = 256;
  std::size_t replay_capacity = 1000000;
  std::size_t learning_starts = 4096;  // transitions in the replay before learning starts
  int n_step = 1;
  double gamma = 0.9;
  double huber_delta = 1.0;
  double epsilon_start = 1.0, epsilon_end = 0.05;
  std::size_t epsilon_steps = 1500;
  std::size_t target_update = 200;  // hard update every this many steps (when tau = 0)
  double tau = 0.0;                 // soft update rate per step; 0: hard updates
  double reward_scale = 100.0;
  // optimizer
  double learning_rate = 5e-4;
  std::string lr_schedule = "cosine";  // constant, linear or cosine (to lr_final_fraction)
  double lr_final_fraction = 0.1;
  double weight_decay = 0.0;
  double clip_norm = 10.0;
  double adam_beta1 = 0.9, adam_beta2 = 0.999, adam_epsilon = 1e-8;
  // the loop's refinements
  std::size_t vaccine_interval =
      10;  // every this many steps the batch comes from stress transitions; 0: never
  double vaccine_quantile = 0.02;   // share of training bars chosen as stress bars
  std::size_t guard_interval = 5;   // every this many steps the guard checks the state; 0: never
  double guard_limit = 1e6;         // largest magnitude the guard accepts in weights and Q
  std::size_t probe_interval = 50;  // every this many steps the causal probe runs; 0: never
  std::size_t probe_batch = 256;
  // execution
  // Steps recorded into one CUDA graph and replayed (0: none); unset means the default of
  // recorded_steps().
  std::optional<std::size_t> graph_steps;
  // validation and early stopping
  std::size_t val_windows = 1;  // walk-forward: consecutive validation windows
  std::size_t patience = 0;     // stop after this many epochs without a better Sharpe; 0: never
  // the backtest
  double cost = 0.0005, bars_per_year = 252.0, risk_free = 0.0;
  std::size_t chunk_bars = 32768;
  // the run
  std::uint64_t seed = 1;
  std::string out = "runs/latest";
  std::size_t checkpoints = 3;    // newest checkpoints kept
  std::size_t fault_budget = 20;  // consecutive skipped steps or guard restores that stop the run
  std::string inject_fault;  // "kind@epoch": NaN into batch, gradient, weight or price (testing)

  static Precision default_precision();
};

/// What may vary between runs trained together: a member's own setting of learning (a
/// schedule may change it), a member's own setting of another kind (its seed, run directory,
/// test fault, early stopping and fault budget), one the members of a population share (it
/// fixes shapes or the loop; a sweep forms a population of each value), or one every member of
/// a sweep shares (the data, the metrics' definitions, the run's mechanics).
enum class Scope { learning, member, population, sweep };

/// One setting: its name (the flag is --name, the JSON key name), a help line, how to read
/// and write it as text, its scope, and, for a member's setting that the training kernels or
/// Adam read, how it enters their record of the member (member_records()).
struct Setting {
  std::string name, help;
  std::function<std::string()> get;
  std::function<void(const std::string&)> set;  // throws InputError on a bad value
  bool is_list = false, is_flag = false, is_number = false;
  std::string documented_default;  // for defaults that depend on the build; else get()
  // A value a run refuses (its reader's, or its data's), for the test that the command and
  // the Python module refuse it alike ("{dir}": a directory; "{file}": a file of no bars).
  std::string refused;
  Scope scope = Scope::population;
  std::function<void(MemberSettings&)> to_kernels;  // empty: the kernels do not read it
  std::function<void(nn::AdamSettings&)> to_adam;   // empty: Adam does not read it
};

/// The shortest text that reads back to the same double (how a setting's number is written).
std::string number_text(double v);

/// The settings of config, bound to it.
std::vector<Setting> settings(TrainConfig& config);

/// Checks every value and their combinations; throws InputError naming the setting.
void validate(const TrainConfig& config);

/// The steps a recorded cycle holds: graph_steps when given; by default, on CUDA, the
/// smallest multiple of the vaccine, guard and probe intervals that is at least 50 and divides
/// target-update (or any such multiple with tau > 0), or 0 when none divides it; 0 on OpenMP,
/// where nothing is recorded.
std::size_t recorded_steps(const TrainConfig& config);

/// What a setting is, by its name, without a configuration to bind: the table settings() makes,
/// made once. index is the setting's place in settings(), whose order is fixed.
struct SettingInfo {
  std::string name;
  Scope scope = Scope::population;
  bool is_list = false, is_flag = false, is_number = false;
  std::size_t index = 0;
};
const std::vector<SettingInfo>& setting_infos();
/// The setting called name, or nullptr (a lookup in a table made once).
const SettingInfo* find_setting_info(const std::string& name);

/// The scope settings() declares for a setting (Scope::population for an unknown name).
/// A population's members may differ in their own settings (Scope::learning and
/// Scope::member): the seed (with --data; on the built-in market it chooses the market too),
/// the learning rate and its schedule, gamma, n-step, reward scale, Huber delta, the epsilon
/// schedule, the target update, clipping, weight decay, Adam's constants, the vaccine and the
/// probe on or off (an interval of 0, or the population's), early stopping (patience), the
/// fault budget, the run directory and a test fault.
Scope setting_scope(const std::string& name);
/// Whether a setting of this scope is a member's own (it may differ within a population).
inline bool own_setting(Scope scope) {
  return scope == Scope::learning || scope == Scope::member;
}

/// A member's own settings of learning (Scope::learning) as a JSON object of name -> text, as
/// a population's state records a schedule's changes (apply_settings reads it back).
nlohmann::json member_settings_json(TrainConfig config);
/// source's settings with own's settings of Scope::member: what a member of source's
/// population becomes when it takes source's settings of learning.
TrainConfig with_learning_settings(const TrainConfig& own, TrainConfig source);

/// The settings of config that the members of one population share (every setting but a
/// member's own), each as its name and its value's text, in the order of settings(): members
/// alike in these may train as one population.
std::vector<std::pair<std::string, std::string>> population_settings(TrainConfig config);

/// InputError naming the setting and the members when members cannot train as one
/// population: a shared setting that differs, a vaccine or probe interval other than 0 and the
/// population's, members on the built-in market with different seeds, or n-steps so different
/// that learning-starts would not cover the longest (learning starts together).
void check_population(const std::vector<TrainConfig>& members);

/// The longest n-step of the members (at least 1): what the replay's windows and the bars
/// before the first sampleable one are sized by.
int largest_n_step(const std::vector<TrainConfig>& members);

/// The population's loop: members[0]'s settings with the vaccine and probe intervals the
/// members use (the nonzero one, or 0 when every member has it off).
TrainConfig population_config(const std::vector<TrainConfig>& members);

/// What the training kernels and Adam read of a member's settings, from the settings that
/// declare it (Setting::to_kernels, to_adam) and the population's loop.
struct MemberRecords {
  MemberSettings kernels;
  nn::AdamSettings adam;
};
MemberRecords member_records(const TrainConfig& config, const TrainConfig& population);

/// The settings as a JSON object (name -> value), as config.json holds them.
std::string settings_json(TrainConfig& config);

/// Applies a JSON object of settings (a --config file); unknown keys are InputErrors naming
/// the file.
void apply_settings_json(TrainConfig& config, const std::string& path);
/// The same for an object in memory (source names where it came from in messages).
void apply_settings(TrainConfig& config, const nlohmann::json& settings, const std::string& source);

/// The backtest settings of a run's validation and test window: its cost, annualisation,
/// risk-free rate and chunking, with the positions the actions stand for. Its products are
/// float32 whatever precision training takes: the decision the policy file defines.
/// The features' settings of config.
data::FeatureConfig feature_config(const TrainConfig& config);

eval::BacktestConfig backtest_config(const TrainConfig& config,
                                     const std::vector<double>& positions);

}  // namespace dqntrader::train

#include "dqntrader/train/train_config.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <sstream>
#include <type_traits>
#include <unordered_map>

#include "dqntrader/core/error.hpp"
#include "dqntrader/io/json_values.hpp"

namespace dqntrader::train {

Precision TrainConfig::default_precision() {
#if defined(DQNTRADER_BACKEND_CUDA)
  return Precision::bf16;
#else
  return Precision::fp32;
#endif
}

std::string number_text(double v) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, v);
  return std::string(buffer, result.ptr);
}

namespace {

template <class T>
T parse_number(const std::string& name, const std::string& value) {
  T result{};
  const char* first = value.data();
  const char* last = first + value.size();
  const auto parsed = std::from_chars(first, last, result);
  if (parsed.ec == std::errc::result_out_of_range && parsed.ptr == last) {
    throw InputError(field(name) + " '" + value + "' is out of the range of the setting (" +
                     (std::is_integral<T>::value
                          ? "whole numbers from " + std::to_string(std::numeric_limits<T>::min()) +
                                " to " + std::to_string(std::numeric_limits<T>::max())
                          : std::string("a double")) +
                     ")");
  }
  if (parsed.ec != std::errc() || parsed.ptr != last) {
    throw InputError(field(name) + ": cannot parse '" + value + "' as a number");
  }
  return result;
}

std::vector<std::string> split(const std::string& value) {
  std::vector<std::string> items;
  std::string item;
  std::istringstream in(value);
  while (std::getline(in, item, ',')) {
    if (!item.empty())
      items.push_back(item);
  }
  return items;
}

// A setting of the population's scope with no accessors yet.
Setting blank(const std::string& name, const std::string& help, bool is_list, bool is_flag,
              bool is_number) {
  Setting s;
  s.name = name;
  s.help = help;
  s.is_list = is_list;
  s.is_flag = is_flag;
  s.is_number = is_number;
  // Move-assigned from a whole string: GCC 12's -Wrestrict misreads a literal's assignment here.
  s.refused = std::string(is_flag ? "maybe" : is_number ? "x" : "");
  return s;
}

template <class T>
Setting number(const std::string& name, const std::string& help, T& field) {
  Setting s = blank(name, help, false, false, true);
  s.get = [&field] {
    if constexpr (std::is_floating_point<T>::value)
      return number_text(field);
    return std::to_string(field);
  };
  s.set = [name, &field](const std::string& v) { field = parse_number<T>(name, v); };
  return s;
}

Setting string(const std::string& name, const std::string& help, std::string& field) {
  Setting s = blank(name, help, false, false, false);
  s.get = [&field] { return field; };
  s.set = [&field](const std::string& v) { field = v; };
  return s;
}

Setting flag(const std::string& name, const std::string& help, bool& value) {
  Setting s = blank(name, help, false, true, false);
  s.get = [&value] { return std::string(value ? "true" : "false"); };
  s.set = [name, &value](const std::string& v) {
    if (v == "true" || v == "1")
      value = true;
    else if (v == "false" || v == "0")
      value = false;
    else
      throw InputError(field(name) + ": expected true or false, got '" + v + "'");
  };
  return s;
}

// A step count or "auto" (unset).
Setting recorded(const std::string& name, const std::string& help,
                 std::optional<std::size_t>& field) {
  Setting s = blank(name, help, false, false, false);
  s.refused = "x";
  s.get = [&field] { return field ? std::to_string(*field) : std::string("auto"); };
  s.set = [name, &field](const std::string& v) {
    if (v == "auto") {
      field.reset();
    } else {
      field = parse_number<std::size_t>(name, v);
    }
  };
  return s;
}

Setting names(const std::string& name, const std::string& help, std::vector<std::string>& field) {
  Setting s = blank(name, help, true, false, false);
  s.get = [&field] {
    std::string joined;
    for (const auto& f : field) {
      if (!joined.empty())
        joined += ',';
      joined += f;
    }
    return joined;
  };
  s.set = [&field](const std::string& v) { field = split(v); };
  return s;
}

Setting widths(const std::string& name, const std::string& help, std::vector<std::size_t>& field) {
  Setting s = blank(name, help, true, false, true);
  s.get = [&field] {
    std::string joined;
    for (std::size_t w : field)
      joined.append(joined.empty() ? "" : ",").append(std::to_string(w));
    return joined;
  };
  s.set = [name, &field](const std::string& v) {
    std::vector<std::size_t> parsed;
    for (const std::string& item : split(v))
      parsed.push_back(parse_number<std::size_t>(name, item));
    field = parsed;
  };
  return s;
}

// The settings as one vector, each moved in (an initializer list would copy every one).
template <class... S>
std::vector<Setting> table(S&&... settings) {
  std::vector<Setting> out;
  out.reserve(sizeof...(settings));
  (out.push_back(std::forward<S>(settings)), ...);
  return out;
}

// A member's own number of learning that the training kernels read: into their record's
// field `to` (member_records()).
template <class T, class D>
Setting number(const std::string& name, const std::string& help, T& field, D MemberSettings::*to) {
  Setting s = number(name, help, field);
  s.scope = Scope::learning;
  s.to_kernels = [&field, to](MemberSettings& m) { m.*to = static_cast<D>(field); };
  return s;
}

// ... that Adam reads.
template <class T, class D>
Setting number(const std::string& name, const std::string& help, T& field,
               D nn::AdamSettings::*to) {
  Setting s = number(name, help, field);
  s.scope = Scope::learning;
  s.to_adam = [&field, to](nn::AdamSettings& a) { a.*to = static_cast<D>(field); };
  return s;
}

// A member's own setting of learning that no record reads as it stands.
Setting learning(Setting s) {
  s.scope = Scope::learning;
  return s;
}

// A member's own setting of another kind.
Setting own(Setting s) {
  s.scope = Scope::member;
  return s;
}

// A setting that refuses value (Setting::refused).
Setting refusing(Setting s, const std::string& value) {
  s.refused = value;
  return s;
}

// A setting every member of a sweep shares.
Setting shared(Setting s) {
  s.scope = Scope::sweep;
  return s;
}

}  // namespace

namespace {

// The data and the features.
std::vector<Setting> data_settings(TrainConfig& c) {
  return table(
      shared(refusing(
          string("data", "bar file (CSV or .dqnbars); empty: the built-in synthetic market",
                 c.data),
          "{dir}")),
      shared(refusing(string("symbol",
                             "the instrument to read from bar files of several (a CSV file "
                             "with a symbol column, one row per instrument and time); empty: "
                             "their one instrument",
                             c.symbol),
                      "a b")),
      shared(refusing(
          string("val-data",
                 "separate validation bar file; empty: the last val-fraction of " + field("data"),
                 c.val_data),
          "{file}")),
      shared(number("val-fraction",
                    "share of the bars before the test window held out for validation",
                    c.val_fraction)),
      shared(refusing(string("test-data",
                             "separate test bar file; empty: the last test-fraction of " +
                                 field("val-data") + ", or of " + field("data"),
                             c.test_data),
                      "{file}")),
      shared(number("test-fraction",
                    "share of the bars held out at the end for the test window, evaluated once "
                    "after training (0: none)",
                    c.test_fraction)),
      shared(number("synth-bars",
                    "bars of the built-in synthetic market (seeded by " + field("seed") + ")",
                    c.synth_bars)),
      refusing(names("feature-columns", "extra feature columns, by name (comma-separated)",
                     c.feature_columns),
               "no-such-column"),
      refusing(names("feature-prefix", "extra feature columns, by name prefix (comma-separated)",
                     c.feature_prefixes),
               "no-such-prefix"),
      number("return-window", "log returns in the state", c.return_window),
      number("volatility-window", "bars of the rolling volatility", c.volatility_window),
      number("ofi-window", "ofi values in the state (when the data has ofi)", c.ofi_window));
}

// The network and how its products compute.
std::vector<Setting> network_settings(TrainConfig& c) {
  Setting precision =
      blank("precision",
            "the learning step's matrix-product arithmetic: fp32, tf32 or bf16 (default bf16 on "
            "CUDA, fp32 on OpenMP); validation and test windows are evaluated in fp32, the "
            "decision a policy file defines",
            false, false, false);
  precision.get = [&c] { return std::string(to_string(c.precision)); };
  precision.documented_default = "bf16 (CUDA), fp32 (OpenMP)";
  precision.set = [&c](const std::string& v) { c.precision = parse_precision(v); };
  precision.refused = "fp8";
  return table(
      widths("hidden", "hidden layer widths (comma-separated)", c.hidden),
      flag("dueling", "dueling head: Q = V + A - mean(A)", c.dueling), std::move(precision),
      refusing(
          string(
              "learning-path",
              "how a learning step computes: products (one batched product a layer), fused (on "
              "CUDA in bf16, networks of 1 to 4 hidden layers at most 128 wide: two kernels on the "
              "tensor cores) or auto: fused where it takes the networks (faster at every "
              "population size measured: docs/BENCHMARKS.md), else products",
              c.learning_path),
          "x"));
}

// How it learns: the loop, the replay, the DQN rule, Adam, the vaccine, the guard, the probe.
std::vector<Setting> learning_settings(TrainConfig& c) {
  Setting lr_schedule = learning(refusing(
      string("lr-schedule", "learning-rate schedule: constant, linear or cosine", c.lr_schedule),
      "x"));
  lr_schedule.to_adam = [&c](nn::AdamSettings& a) {
    a.schedule = nn::parse_schedule(c.lr_schedule);
  };
  return table(
      number("epochs", "training epochs", c.epochs),
      number("steps-per-epoch", "gradient steps per epoch", c.steps_per_epoch),
      number("batch-size", "transitions per gradient step", c.batch_size),
      number("environments", "environments stepped once per gradient step", c.environments),
      number("episode-length", "bars per episode before an environment resets", c.episode_length),
      number("replay-capacity", "transitions the replay ring holds", c.replay_capacity),
      number("learning-starts", "transitions collected before learning starts", c.learning_starts),
      number("n-step", "bars summed into each return (n-step returns)", c.n_step,
             &MemberSettings::n_step),
      number("gamma", "discount per bar", c.gamma, &MemberSettings::gamma),
      number("huber-delta", "Huber loss threshold", c.huber_delta, &MemberSettings::huber_delta),
      number("epsilon-start", "exploration rate at the first step", c.epsilon_start,
             &MemberSettings::epsilon_start),
      number("epsilon-end", "exploration rate after epsilon-steps", c.epsilon_end,
             &MemberSettings::epsilon_end),
      number("epsilon-steps", "steps over which epsilon falls linearly", c.epsilon_steps,
             &MemberSettings::epsilon_steps),
      number("target-update", "hard target-network update every this many steps (tau = 0)",
             c.target_update, &MemberSettings::target_update),
      number("tau", "soft target update rate per step; 0 for hard updates", c.tau,
             &MemberSettings::tau),
      number("reward-scale", "factor on the per-bar net return used as reward", c.reward_scale,
             &MemberSettings::reward_scale),
      number("learning-rate", "Adam learning rate", c.learning_rate,
             &nn::AdamSettings::learning_rate),
      std::move(lr_schedule),
      number("lr-final-fraction", "final learning rate of linear/cosine, as a fraction",
             c.lr_final_fraction, &nn::AdamSettings::final_fraction),
      number("weight-decay", "decoupled weight decay (AdamW)", c.weight_decay,
             &nn::AdamSettings::weight_decay),
      number("clip-norm", "gradient norm clip; 0: none", c.clip_norm, &nn::AdamSettings::clip_norm),
      number("adam-beta1", "Adam beta1", c.adam_beta1, &nn::AdamSettings::beta1),
      number("adam-beta2", "Adam beta2", c.adam_beta2, &nn::AdamSettings::beta2),
      number("adam-epsilon", "Adam epsilon", c.adam_epsilon, &nn::AdamSettings::epsilon),
      learning(number("vaccine-interval",
                      "every this many steps, a batch of stress transitions; 0: never",
                      c.vaccine_interval)),
      number("vaccine-quantile",
             "share of training bars (largest moves, deepest drawdowns) kept as stress bars",
             c.vaccine_quantile),
      number("guard-interval",
             "every this many steps, check and snapshot or restore the state; 0: never",
             c.guard_interval),
      number("guard-limit", "largest magnitude the guard accepts in weights and Q-values",
             c.guard_limit),
      learning(number("probe-interval",
                      "every this many steps, the causal-intervention probe; 0: never",
                      c.probe_interval)),
      number("probe-batch", "states in the causal probe batch", c.probe_batch));
}

// How the run goes: recording, validation, the metrics' constants, seed, files, faults.
std::vector<Setting> run_settings(TrainConfig& c) {
  return table(
      shared(recorded(
          "graph-steps",
          "steps recorded into one CUDA graph and replayed (a multiple of the vaccine, guard "
          "and probe intervals that divides target-update); 0: launch every step's kernels "
          "one by one; auto: on CUDA the smallest such multiple of at least 50 (0 if none), "
          "on OpenMP 0",
          c.graph_steps)),
      shared(number("val-windows", "consecutive walk-forward validation windows", c.val_windows)),
      own(number("patience", "epochs without a better validation Sharpe before stopping; 0: never",
                 c.patience)),
      shared(number("cost", "fees plus slippage, a fraction of traded notional", c.cost)),
      shared(number("bars-per-year", "A, for annualising (252 daily, 98280 US minute bars)",
                    c.bars_per_year)),
      shared(number("risk-free", "risk-free return per bar", c.risk_free)),
      shared(number("chunk-bars", "bars per network pass in validation", c.chunk_bars)),
      own(number("seed",
                 "seed of every random choice (data, initialisation, exploration, sampling)",
                 c.seed, &MemberSettings::seed)),
      own(refusing(string("out", "run directory", c.out), "{file}/run")),
      shared(number("checkpoints",
                    "newest checkpoints kept in the run directory (for " + field("resume") + ")",
                    c.checkpoints)),
      own(number("fault-budget",
                 "consecutive skipped steps or guard restores after which the run stops with "
                 "fault_report.json",
                 c.fault_budget)),
      own(refusing(
          string("inject-fault",
                 "for testing fault handling: kind@epoch writes NaN into a batch, gradient, weight "
                 "or (from then on) every price at that epoch's first step",
                 c.inject_fault),
          "x")));
}

}  // namespace

std::vector<Setting> settings(TrainConfig& c) {
  std::vector<Setting> all;
  for (auto part : {data_settings, network_settings, learning_settings, run_settings}) {
    for (Setting& s : part(c))
      all.push_back(std::move(s));
  }
  return all;
}

void validate(const TrainConfig& c) {
  auto require = [](bool ok, const std::string& what) {
    if (!ok)
      throw InputError(what);
  };
  {
    TrainConfig copy = c;
    for (const Setting& s : settings(copy)) {
      if (s.is_number && !s.is_list) {
        const std::string text = s.get();
        const double value = std::strtod(text.c_str(), nullptr);
        require(std::isfinite(value), field(s.name) + " must be a finite number, not " + text);
      }
    }
  }
  data::check_symbol("symbol", c.symbol);
  require(c.val_fraction > 0.0 && c.val_fraction < 1.0,
          field("val-fraction") + " must lie in (0, 1)");
  require(c.test_fraction >= 0.0 && c.test_fraction < 1.0,
          field("test-fraction") + " must lie in [0, 1)");
  require(c.synth_bars >= 1000, field("synth-bars") + " must be at least 1000");
  require(!c.hidden.empty(), field("hidden") + " needs at least one layer");
  for (std::size_t w : c.hidden)
    require(w > 0 && w <= 8192, field("hidden") + " widths must lie in [1, 8192]");
  require(c.learning_path == "auto" || c.learning_path == "products" || c.learning_path == "fused",
          field("learning-path") + " must be auto, products or fused");
  require(c.epochs >= 1, field("epochs") + " must be at least 1");
  require(c.steps_per_epoch >= 1, field("steps-per-epoch") + " must be at least 1");
  require(c.batch_size >= 1 && c.batch_size <= (1u << 20),
          field("batch-size") + " must lie in [1, 2^20]");
  require(c.environments >= 1 && c.environments <= (1u << 20),
          field("environments") + " must lie in [1, 2^20]");
  require(c.episode_length >= 2, field("episode-length") + " must be at least 2");
  require(c.n_step >= 1 && c.n_step <= 64, field("n-step") + " must lie in [1, 64]");
  require(
      c.replay_capacity >= c.environments * static_cast<std::size_t>(c.n_step + 1) + c.batch_size,
      field("replay-capacity") + " must hold at least (" + field("n-step") + " + 1) x " +
          field("environments") + " + " + field("batch-size") + " transitions");
  require(c.learning_starts <= c.replay_capacity,
          field("learning-starts") + " must not exceed " + field("replay-capacity"));
  require(c.gamma >= 0.0 && c.gamma <= 1.0, field("gamma") + " must lie in [0, 1]");
  require(c.huber_delta > 0.0, field("huber-delta") + " must be positive");
  require(c.epsilon_start >= 0.0 && c.epsilon_start <= 1.0 && c.epsilon_end >= 0.0 &&
              c.epsilon_end <= 1.0,
          field("epsilon-start") + " and " + field("epsilon-end") + " must lie in [0, 1]");
  require(c.tau >= 0.0 && c.tau <= 1.0, field("tau") + " must lie in [0, 1]");
  require(c.tau > 0.0 || c.target_update >= 1,
          field("target-update") + " must be at least 1 when " + field("tau") + " = 0");
  require(c.learning_rate > 0.0, field("learning-rate") + " must be positive");
  require(c.lr_schedule == "constant" || c.lr_schedule == "linear" || c.lr_schedule == "cosine",
          field("lr-schedule") + " must be constant, linear or cosine");
  require(c.lr_final_fraction >= 0.0 && c.lr_final_fraction <= 1.0,
          field("lr-final-fraction") + " must lie in [0, 1]");
  require(c.weight_decay >= 0.0 && c.clip_norm >= 0.0,
          field("weight-decay") + " and " + field("clip-norm") + " must not be negative");
  require(c.adam_beta1 >= 0.0 && c.adam_beta1 < 1.0 && c.adam_beta2 >= 0.0 && c.adam_beta2 < 1.0 &&
              c.adam_epsilon > 0.0,
          "Adam needs " + field("adam-beta1") + " and " + field("adam-beta2") +
              " in [0, 1) and a positive " + field("adam-epsilon"));
  require(c.vaccine_quantile > 0.0 && c.vaccine_quantile < 0.5,
          field("vaccine-quantile") + " must lie in (0, 0.5)");
  require(c.guard_limit > 0.0, field("guard-limit") + " must be positive");
  require(c.probe_batch >= 1, field("probe-batch") + " must be at least 1");
  require(c.val_windows >= 1, field("val-windows") + " must be at least 1");
  require(c.reward_scale > 0.0, field("reward-scale") + " must be positive");
  require(!c.out.empty(), field("out") + " must name a run directory");
  require(c.checkpoints >= 1, field("checkpoints") + " must be at least 1");
  require(c.fault_budget >= 1, field("fault-budget") + " must be at least 1");
  if (!c.inject_fault.empty()) {
    const std::size_t at = c.inject_fault.find('@');
    const std::string kind = c.inject_fault.substr(0, at);
    require(
        at != std::string::npos && at + 1 < c.inject_fault.size() &&
            (kind == "batch" || kind == "gradient" || kind == "weight" || kind == "price") &&
            c.inject_fault.find_first_not_of("0123456789", at + 1) == std::string::npos,
        field("inject-fault") + " must read kind@epoch with kind batch, gradient, weight or price");
  }
  if (c.graph_steps && *c.graph_steps > 0) {
    const std::size_t steps = *c.graph_steps;
    for (std::size_t interval : {c.vaccine_interval, c.guard_interval, c.probe_interval}) {
      require(interval == 0 || steps % interval == 0,
              field("graph-steps") + " must be a multiple of " + field("vaccine-interval") + ", " +
                  field("guard-interval") + " and " + field("probe-interval"));
    }
    require(c.tau > 0.0 || c.target_update % steps == 0, field("graph-steps") + " must divide " +
                                                             field("target-update") + " (or use " +
                                                             field("tau") + ")");
  }
}

std::size_t recorded_steps(const TrainConfig& c) {
  if (c.graph_steps)
    return *c.graph_steps;
#if defined(DQNTRADER_BACKEND_CUDA)
  std::size_t period = 1;  // the least common multiple of the intervals
  for (std::size_t interval : {c.vaccine_interval, c.guard_interval, c.probe_interval}) {
    if (interval > 0)
      period = std::lcm(period, interval);
  }
  constexpr std::size_t kFewest = 50;
  for (std::size_t steps = (kFewest + period - 1) / period * period;
       steps <= std::max(kFewest, c.target_update); steps += period) {
    if (c.tau > 0.0 || c.target_update % steps == 0)
      return steps;
  }
  return 0;
#else
  return 0;
#endif
}

const std::vector<SettingInfo>& setting_infos() {
  static const std::vector<SettingInfo> infos = [] {
    std::vector<SettingInfo> out;
    TrainConfig config;
    for (const Setting& s : settings(config))
      out.push_back({s.name, s.scope, s.is_list, s.is_flag, s.is_number, out.size()});
    return out;
  }();
  return infos;
}

const SettingInfo* find_setting_info(const std::string& name) {
  static const std::unordered_map<std::string, std::size_t> by_name = [] {
    std::unordered_map<std::string, std::size_t> out;
    for (const SettingInfo& info : setting_infos())
      out.emplace(info.name, info.index);
    return out;
  }();
  const auto found = by_name.find(name);
  return found == by_name.end() ? nullptr : &setting_infos()[found->second];
}

Scope setting_scope(const std::string& name) {
  // The run directory is a member's own in a population; to a sweep it is the sweep's
  // directory, in which the sweep names its members'.
  if (name == "out")
    return Scope::sweep;
  const SettingInfo* info = find_setting_info(name);
  return info != nullptr ? info->scope : Scope::population;
}

TrainConfig with_learning_settings(const TrainConfig& own, TrainConfig source) {
  TrainConfig mine = own;
  const std::vector<Setting> from = settings(mine);
  std::vector<Setting> to = settings(source);
  for (std::size_t i = 0; i < to.size(); ++i) {
    if (to[i].scope == Scope::member)
      to[i].set(from[i].get());  // numbers' text reads back exactly
  }
  return source;
}

nlohmann::json member_settings_json(TrainConfig config) {
  nlohmann::json out = nlohmann::json::object();
  for (const Setting& s : settings(config)) {
    if (s.scope == Scope::learning)
      out[s.name] = s.get();
  }
  return out;
}

namespace {
// The interval the members that use it share (0 when none does); InputError when two differ.
std::size_t shared_interval(const std::vector<TrainConfig>& members, const char* name,
                            std::size_t TrainConfig::*member_field) {
  std::size_t interval = 0;
  for (std::size_t m = 0; m < members.size(); ++m) {
    const std::size_t v = members[m].*member_field;
    if (v == 0)
      continue;
    if (interval != 0 && v != interval) {
      throw InputError(field(name) + ": members of one population run " +
                       "it at one interval or not at all (0); member " + std::to_string(m) +
                       " has " + std::to_string(v) + ", another " + std::to_string(interval));
    }
    interval = v;
  }
  return interval;
}
}  // namespace

std::vector<std::pair<std::string, std::string>> population_settings(TrainConfig config) {
  std::vector<std::pair<std::string, std::string>> shared;
  for (const Setting& s : settings(config)) {
    if (!own_setting(s.scope))
      shared.push_back({s.name, s.get()});
  }
  return shared;
}

void check_population(const std::vector<TrainConfig>& members) {
  if (members.empty())
    throw InputError("a population needs at least one member");
  const TrainConfig& first = members.front();
  const auto reference = population_settings(first);
  for (std::size_t m = 1; m < members.size(); ++m) {
    const TrainConfig& other = members[m];
    const auto theirs = population_settings(other);
    for (std::size_t i = 0; i < reference.size(); ++i) {
      if (reference[i].second != theirs[i].second) {
        throw InputError(field(reference[i].first) +
                         " fixes a population's shapes or loop and cannot differ between its "
                         "members: member 0 has " +
                         reference[i].second + ", member " + std::to_string(m) + " " +
                         theirs[i].second);
      }
    }
    if (first.data.empty() && other.seed != first.seed) {
      throw InputError(
          field("seed") +
          ": on the built-in market the seed also chooses the market, so members "
          "with different seeds train on different data; write the market with dqntrader synth "
          "and give it as " +
          field("data"));
    }
  }
  shared_interval(members, "vaccine-interval", &TrainConfig::vaccine_interval);
  shared_interval(members, "probe-interval", &TrainConfig::probe_interval);
  const int most = largest_n_step(members);
  for (const TrainConfig& c : members) {
    if (c.n_step != most &&
        first.learning_starts <= static_cast<std::size_t>(most - 1) * first.environments) {
      throw InputError(field("learning-starts") + " " + std::to_string(first.learning_starts) +
                       " transitions do not hold an n-step window of " + std::to_string(most) +
                       " bars for each of the " + std::to_string(first.environments) +
                       " environments; members with different n-steps start learning together");
    }
  }
}

int largest_n_step(const std::vector<TrainConfig>& members) {
  int most = 1;
  for (const TrainConfig& c : members)
    most = std::max(most, c.n_step);
  return most;
}

TrainConfig population_config(const std::vector<TrainConfig>& members) {
  TrainConfig c = members.front();
  c.vaccine_interval = shared_interval(members, "vaccine-interval", &TrainConfig::vaccine_interval);
  c.probe_interval = shared_interval(members, "probe-interval", &TrainConfig::probe_interval);
  return c;
}

MemberRecords member_records(const TrainConfig& config, const TrainConfig& population) {
  TrainConfig c = config;
  MemberRecords r;
  for (const Setting& s : settings(c)) {
    if (s.to_kernels)
      s.to_kernels(r.kernels);
    if (s.to_adam)
      s.to_adam(r.adam);
  }
  // What the population's loop decides with the member's own settings.
  r.kernels.vaccine = c.vaccine_interval > 0 && population.vaccine_interval > 0 ? 1 : 0;
  r.kernels.probe = c.probe_interval > 0 && population.probe_interval > 0 ? 1 : 0;
  r.adam.schedule_steps = static_cast<std::int64_t>(c.epochs * c.steps_per_epoch);
  return r;
}

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
      joined.append(joined.empty() ? "" : ",").append(as_text(item));
    return joined;
  }
  return value.dump();
}

}  // namespace

std::string settings_json(TrainConfig& config) {
  nlohmann::json j = nlohmann::json::object();
  for (const Setting& s : settings(config))
    j[s.name] = setting_value(s);
  return j.dump(2) + "\n";
}

void apply_settings_json(TrainConfig& config, const std::string& path) {
  apply_settings(config, io::read_json_file(path), path);
}

void apply_settings(TrainConfig& config, const nlohmann::json& j, const std::string& source) {
  if (!j.is_object())
    throw InputError(source, 0, 0, "expected a JSON object of settings");
  std::vector<Setting> all = settings(config);
  for (const auto& item : j.items()) {
    const SettingInfo* info = find_setting_info(item.key());
    if (info == nullptr)
      throw InputError(source, 0, 0, "unknown setting '" + item.key() + "'");
    Setting* found = &all[info->index];
    const nlohmann::json& value = item.value();
    if (value.is_object() || value.is_null() || (value.is_array() && !found->is_list)) {
      throw InputError(source, 0, 0,
                       field(item.key()) + ": expected " +
                           (found->is_list     ? "a list or a comma-separated string"
                            : found->is_flag   ? "true or false"
                            : found->is_number ? "a number"
                                               : "a string") +
                           ", not " + value.dump());
    }
    try {
      found->set(as_text(item.value()));
    } catch (const InputError& e) {
      throw InputError(source, 0, 0, e.message());
    }
  }
}

data::FeatureConfig feature_config(const TrainConfig& c) {
  data::FeatureConfig f;
  f.return_window = c.return_window;
  f.volatility_window = c.volatility_window;
  f.ofi_window = c.ofi_window;
  return f;
}

eval::BacktestConfig backtest_config(const TrainConfig& c, const std::vector<double>& positions) {
  eval::BacktestConfig b;
  b.positions = positions;
  b.cost = c.cost;
  b.bars_per_year = c.bars_per_year;
  b.risk_free = c.risk_free;
  b.chunk_bars = c.chunk_bars;
  return b;
}

}  // namespace dqntrader::train

#include "dqntrader/sweep/sweep_plan.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/hash.hpp"
#include "dqntrader/eval/metrics_json.hpp"
#include "dqntrader/io/atomic_file.hpp"
#include "dqntrader/io/json_values.hpp"
#include "dqntrader/nn/network_spec.hpp"

namespace dqntrader::sweep {

namespace {

std::string numbered(const char* prefix, std::size_t id, int digits) {
  char text[32];
  std::snprintf(text, sizeof text, "%s%0*zu", prefix, digits, id);
  return text;
}

// The settings of config that a population shares, as one text: members alike in it can
// share a population.
std::string population_key(const train::TrainConfig& config) {
  return nlohmann::json(train::population_settings(config)).dump();
}

}  // namespace

namespace {

// InputError naming two combinations that set every setting alike: their members (one a seed)
// would be the same runs, and a selection among copies measures nothing.
void check_distinct(const std::vector<Combination>& combinations, const SearchSpace& space,
                    const train::TrainConfig& base) {
  std::map<std::vector<std::string>, std::size_t> seen;
  for (std::size_t c = 0; c < combinations.size(); ++c) {
    std::vector<std::string> applied;  // each setting's value as the settings read it back
    apply(base, combinations[c], base.seed, &applied);
    const auto [at, added] = seen.insert({applied, c});
    if (added)
      continue;
    std::string values;
    for (const auto& [name, value] : combinations[c].values)
      values += (values.empty() ? "" : " ") + name + "=" + value;
    throw InputError(
        (space.random > 0 ? field("random") + " " + std::to_string(space.random) + ": draws "
                          : std::string("combinations ")) +
        std::to_string(at->second + 1) + " and " + std::to_string(c + 1) +
        " are the same settings (" + (values.empty() ? "the base settings" : values) +
        "): their members would be the same runs" +
        (space.random > 0 ? "; draw from ranges (LO:HI) or from more values, or fewer times" : ""));
  }
}

}  // namespace

SweepPlan make_plan(const train::TrainConfig& base, const SearchSpace& space,
                    const std::string& directory, std::size_t most) {
  SweepPlan plan;
  plan.directory = directory;
  train::TrainConfig shared = base;
  plan.base = nlohmann::json::parse(train::settings_json(shared));
  plan.space = space;
  plan.combinations = combinations(space);
  check_distinct(plan.combinations, space, base);
  plan.most = most > 0 ? most : 1;
  const std::vector<std::uint64_t> seeds =
      space.seeds.empty() ? std::vector<std::uint64_t>{base.seed} : space.seeds;
  std::vector<std::string> keys;
  std::map<std::string, std::vector<std::size_t>> groups;
  for (std::size_t c = 0; c < plan.combinations.size(); ++c) {
    for (std::uint64_t seed : seeds) {
      MemberPlan m;
      m.id = plan.members.size();
      m.combination = c;
      m.seed = seed;
      m.run = "members/" + numbered("m-", m.id, 4);
      plan.members.push_back(m);
      const train::TrainConfig config = member_config(plan, m.id);
      train::validate(config);
      const std::string key = population_key(config);
      if (groups.find(key) == groups.end())
        keys.push_back(key);
      groups[key].push_back(m.id);
    }
  }
  for (const std::string& key : keys) {
    const std::vector<std::size_t>& ids = groups[key];
    for (std::size_t first = 0; first < ids.size(); first += plan.most) {
      PopulationPlan p;
      p.id = plan.populations.size();
      p.checkpoints = "populations/" + numbered("p-", p.id, 3);
      for (std::size_t i = first; i < ids.size() && i < first + plan.most; ++i) {
        p.members.push_back(ids[i]);
        plan.members[ids[i]].population = p.id;
      }
      std::vector<train::TrainConfig> configs;
      for (std::size_t id : p.members)
        configs.push_back(member_config(plan, id));
      train::check_population(configs);
      plan.populations.push_back(p);
    }
  }
  return plan;
}

train::TrainConfig member_config(const SweepPlan& plan, std::size_t member) {
  train::TrainConfig base;
  train::apply_settings(base, plan.base, plan.directory + "/sweep.json");
  const MemberPlan& m = plan.members.at(member);
  train::TrainConfig config = apply(base, plan.combinations.at(m.combination), m.seed);
  config.out = plan.directory + "/" + m.run;
  return config;
}

nlohmann::json to_json(const MemberResult& r) {
  nlohmann::json j = {{"status", r.status},
                      {"epochs", r.epochs},
                      {"best_epoch", r.best_epoch},
                      {"validation_sharpe", io::json_number(r.validation_sharpe)},
                      {"last_sharpe", io::json_number(r.last_sharpe)},
                      {"best", r.best}};
  if (!r.test.empty())
    j["test"] = r.test;
  if (!r.failure.empty())
    j["failure"] = r.failure;
  if (!r.restarted.empty())
    j["restarted"] = r.restarted;
  if (!r.skipped.empty())
    j["skipped"] = r.skipped;
  if (!r.files.empty())
    j["files"] = r.files;
  if (!r.schedule.empty())
    j["schedule"] = r.schedule;
  return j;
}

MemberResult member_result_from_json(const nlohmann::json& j) {
  MemberResult r;
  r.status = j.value("status", std::string("pending"));
  r.epochs = j.value("epochs", std::size_t{0});
  r.best_epoch = j.value("best_epoch", std::size_t{0});
  r.validation_sharpe = io::number_of(j.value("validation_sharpe", nlohmann::json()));
  r.last_sharpe = io::number_of(j.value("last_sharpe", nlohmann::json()));
  r.best = j.value("best", nlohmann::json::object());
  r.test = j.value("test", nlohmann::json::object());
  r.failure = j.value("failure", std::string());
  r.restarted = j.value("restarted", std::string());
  r.skipped = j.value("skipped", std::string());
  r.files = j.value("files", nlohmann::json::object());
  r.schedule = j.value("schedule", nlohmann::json::array());
  return r;
}

namespace {

// A file's size and checksum, or null when it cannot be read.
nlohmann::json file_record(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return nullptr;
  return io::content_record(
      std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
}

constexpr const char* kMemberFiles[] = {"config.json", "metrics.jsonl", "best.dqnpolicy",
                                        "last.dqnpolicy", "final_metrics.json"};

}  // namespace

nlohmann::json member_files(const train::RunResult& result) {
  nlohmann::json files = nlohmann::json::object();
  for (const char* name : kMemberFiles) {
    const auto written = result.files.find(name);
    if (written != result.files.end())
      files[name] = io::content_record(written->second);
  }
  return files;
}

std::vector<std::string> reopen_damaged_populations(SweepPlan& plan) {
  std::vector<std::string> lines;
  for (PopulationPlan& population : plan.populations) {
    if (!population.finished)
      continue;
    std::string damage;
    for (std::size_t id : population.members) {
      const MemberPlan& m = plan.members[id];
      for (const auto& [name, recorded] : m.result.files.items()) {
        const nlohmann::json now = file_record(plan.directory + "/" + m.run + "/" + name);
        if (now != recorded) {
          damage = m.run + "/" + name + (now.is_null() ? " is missing" : " has changed");
          break;
        }
      }
      if (!damage.empty())
        break;
    }
    if (damage.empty())
      continue;
    population.finished = false;
    for (std::size_t id : population.members)
      plan.members[id].result = MemberResult{};
    lines.push_back("population " + std::to_string(population.id + 1) + " runs again: " + damage);
  }
  return lines;
}

MemberResult member_result(const train::RunResult& result) {
  MemberResult r;
  r.status = result.failed ? "failed" : (result.stopped_early ? "stopped early" : "finished");
  r.epochs = result.epochs;
  r.best_epoch = result.best_epoch;
  r.validation_sharpe = result.best_epoch > 0 ? result.best_sharpe : std::nan("");
  r.last_sharpe = result.epochs > 0 ? result.last_sharpe : std::nan("");
  r.best = result.best_epoch > 0 ? eval::to_json(result.best) : nlohmann::json::object();
  if (result.test)
    r.test = eval::to_json(result.test->best);
  r.failure = result.failure;
  r.schedule = result.schedule;
  r.phases = result.phases;
  return r;
}

nlohmann::json plan_json(const SweepPlan& plan) {
  nlohmann::json combinations = nlohmann::json::array();
  for (const Combination& c : plan.combinations) {
    nlohmann::json values = nlohmann::json::object();
    for (const auto& [name, value] : c.values)
      values[name] = value;
    combinations.push_back(values);
  }
  nlohmann::json members = nlohmann::json::array();
  for (const MemberPlan& m : plan.members) {
    members.push_back({{"id", m.id},
                       {"combination", m.combination},
                       {"seed", m.seed},
                       {"population", m.population},
                       {"run", m.run},
                       {"result", to_json(m.result)}});
  }
  nlohmann::json populations = nlohmann::json::array();
  for (const PopulationPlan& p : plan.populations) {
    populations.push_back({{"id", p.id},
                           {"members", p.members},
                           {"checkpoints", p.checkpoints},
                           {"finished", p.finished}});
  }
  nlohmann::json j = {{"format", "dqntrader sweep 1"}, {"base", plan.base},
                      {"space", to_json(plan.space)},  {"population_size", plan.most},
                      {"pbo_blocks", plan.pbo_blocks}, {"schedule", to_json(plan.schedule)},
                      {"combinations", combinations},  {"members", members},
                      {"populations", populations}};
  if (!plan.data_fingerprint.empty())
    j["data_fingerprint"] = plan.data_fingerprint;
  if (!plan.test_fingerprint.empty())
    j["test_fingerprint"] = plan.test_fingerprint;
  if (!plan.selection.is_null())
    j["selection"] = plan.selection;
  return j;
}

void write_plan(const SweepPlan& plan) {
  io::write_file_atomically(plan.directory + "/sweep.json", plan_json(plan).dump(2) + "\n");
}

SweepPlan read_plan(const std::string& directory) {
  const std::string path = directory + "/sweep.json";
  if (!std::filesystem::exists(path))
    throw InputError(path, 0, 0,
                     std::string("cannot open (not a sweep directory?): ") + std::strerror(ENOENT));
  return plan_from_json(io::read_json_file(path), directory, path);
}

SweepPlan plan_from_json(const nlohmann::json& j, const std::string& directory,
                         const std::string& path) {
  try {
    if (j.value("format", std::string()) != "dqntrader sweep 1")
      throw InputError(path, 0, 0, "not a sweep plan of this dqntrader");
    SweepPlan plan;
    plan.directory = directory;
    plan.base = j.at("base");
    if (plan.base.is_object() && !plan.base.contains("test-fraction"))
      plan.base["test-fraction"] = 0;  // a sweep from before test windows held none out
    plan.space = space_from_json(j.at("space"), path);
    plan.most = j.at("population_size").get<std::size_t>();
    plan.pbo_blocks = j.value("pbo_blocks", std::size_t{16});
    plan.schedule = schedule_from_json(j.value("schedule", nlohmann::json()), path);
    plan.selection = j.value("selection", nlohmann::json());
    plan.data_fingerprint = j.value("data_fingerprint", std::string());
    plan.test_fingerprint = j.value("test_fingerprint", std::string());
    for (const auto& c : j.at("combinations")) {
      Combination combination;
      for (const Axis& a : plan.space.axes)
        combination.values.push_back({a.setting, c.at(a.setting).get<std::string>()});
      plan.combinations.push_back(combination);
    }
    for (const auto& m : j.at("members")) {
      MemberPlan member;
      member.id = m.at("id").get<std::size_t>();
      member.combination = m.at("combination").get<std::size_t>();
      member.seed = m.at("seed").get<std::uint64_t>();
      member.population = m.at("population").get<std::size_t>();
      member.run = m.at("run").get<std::string>();
      member.result = member_result_from_json(m.at("result"));
      plan.members.push_back(member);
    }
    for (const auto& p : j.at("populations")) {
      PopulationPlan population;
      population.id = p.at("id").get<std::size_t>();
      population.members = p.at("members").get<std::vector<std::size_t>>();
      population.checkpoints = p.at("checkpoints").get<std::string>();
      population.finished = p.at("finished").get<bool>();
      plan.populations.push_back(population);
    }
    return plan;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path, 0, 0, std::string("not a valid sweep plan: ") + e.what());
  }
}

}  // namespace dqntrader::sweep

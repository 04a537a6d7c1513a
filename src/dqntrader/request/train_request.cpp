#include "dqntrader/core/error.hpp"
#include "dqntrader/request/requests.hpp"
#include "dqntrader/request/tables.hpp"

namespace dqntrader::request {

std::vector<Option> setting_options(const train::TrainConfig& defaults,
                                    const std::function<std::string(const train::Setting&)>& help) {
  train::TrainConfig copy = defaults;
  std::vector<Option> out;
  for (const train::Setting& s : train::settings(copy)) {
    Option o;
    o.name = s.name;
    o.help = help(s);
    o.kind = s.is_flag     ? Kind::flag
             : s.is_list   ? Kind::list
             : s.is_number ? Kind::number
                           : Kind::text;
    o.default_text = s.documented_default.empty() ? s.get() : s.documented_default;
    o.setting = true;
    o.refused = s.refused;
    out.push_back(std::move(o));
  }
  return out;
}

void apply_given_settings(const Table& table, const Given& given, train::TrainConfig& config) {
  std::vector<train::Setting> bound = train::settings(config);
  for (const std::string& name : given.names()) {
    const Option* o = table.find(name);
    if (o != nullptr && o->setting)
      bound[train::find_setting_info(name)->index].set(given.text(name));
  }
}

Exclusion test_fraction_beside_test_data() {
  return {"test-fraction", "test-data",
          "cuts the test window off the data, and a test-data file is the test window"};
}

void refuse_test_fraction_beside_test_data(const Given& given, const train::TrainConfig& config) {
  if (given.has("test-fraction") && !config.test_data.empty()) {
    throw InputError(field("test-fraction") + " cuts the test window off the data, and " +
                     field("test-data") + " " + config.test_data +
                     " (from a settings file) is the test window: give one of them");
  }
}

Table train_table() {
  Table t;
  t.command = "train";
  t.summary =
      "train a DQN trading agent on the device and validate it every epoch; without data it "
      "trains on the built-in synthetic market";
  Option config;
  config.name = "config";
  config.help =
      "JSON file of settings (keys as the settings' names); settings given here override it";
  config.refused = "{dir}";
  Option resume;
  resume.name = "resume";
  resume.help =
      "continue the run in this directory from its newest valid checkpoint (its config.json "
      "gives the settings; settings given here override them, e.g. epochs)";
  resume.refused = "{file}";
  Option force;
  force.name = "force";
  force.kind = Kind::flag;
  force.default_text = "false";
  force.help =
      "with resume: continue even when settings or data differ from the checkpoint's (says "
      "what differs); without: start again in an out that holds a run, removing its files first";
  force.refused = "maybe";
  t.options = {config, resume, force};
  for (Option& o :
       setting_options(train::TrainConfig{}, [](const train::Setting& s) { return s.help; }))
    t.options.push_back(std::move(o));
  t.exclusions = {
      {"resume", "config", "takes the settings from the run's config.json"},
      {"resume", "out", "continues the run in its own directory"},
      test_fraction_beside_test_data(),
  };
  return t;
}

TrainRequest train_request(const Given& given) {
  const Table& t = table("train");
  check(t, given);
  TrainRequest r;
  if (given.has("resume")) {
    const std::string& directory = given.text("resume");
    if (directory.empty())
      throw InputError(field("resume") + ": an empty path names no run");
    train::apply_settings_json(r.config, directory + "/config.json");
    r.config.out = directory;
    r.resume = true;
  }
  if (given.has("config")) {
    check_input("config", given.text("config"));
    train::apply_settings_json(r.config, given.text("config"));
  }
  apply_given_settings(t, given, r.config);
  refuse_test_fraction_beside_test_data(given, r.config);
  check_directory(r.resume ? "resume" : "out", r.config.out);
  r.force = given.has("force") && flag(given.text("force"));
  return r;
}

}  // namespace dqntrader::request

#include <iostream>

#include <memory>

#include "dqntrader/cli/commands.hpp"
#include "dqntrader/eval/metrics_json.hpp"
#include "dqntrader/train/train_config.hpp"

namespace dqntrader::cli {

void SettingFlags::add(CLI::App* c, train::TrainConfig defaults,
                       const std::function<std::string(const train::Setting&)>& help) {
  const std::vector<train::Setting> all = train::settings(defaults);
  m_values.assign(all.size(), std::string());  // before any is bound: their addresses stay
  m_options.clear();
  for (std::size_t i = 0; i < all.size(); ++i) {
    const train::Setting& s = all[i];
    // A flag alone is true (--dueling), and takes a value as --dueling=false; given without a
    // value it is never read as its default.
    CLI::Option* option = s.is_flag ? c->add_flag("--" + s.name + "{true}", m_values[i], help(s))
                                    : c->add_option("--" + s.name, m_values[i], help(s));
    option->default_str(s.get());
    m_options.push_back(option);
  }
}

void SettingFlags::apply(train::TrainConfig& config) const {
  std::vector<train::Setting> bound = train::settings(config);
  for (std::size_t i = 0; i < m_options.size(); ++i) {
    if (m_options[i]->count() == 0)
      continue;
    bound[i].set(m_values[i]);
  }
}

Command add_settings(CLI::App& app) {
  auto metrics = std::make_shared<bool>(false);
  Command command;
  command.app = app.add_subcommand(
      "settings", "print every training setting with its default, as a Markdown table");
  command.app->add_flag("--metrics", *metrics,
                        "print the reported metrics with their definitions instead");
  command.run = [metrics](const ExecSpace&) {
    std::cout << (*metrics ? metrics_table() : settings_table());
  };
  return command;
}

std::string metrics_table() {
  std::size_t count = 0;
  const eval::MetricDefinition* definitions = eval::metric_definitions(count);
  std::string table = "| key | definition |\n|---|---|\n";
  for (std::size_t i = 0; i < count; ++i)
    table += std::string("| `") + definitions[i].key + "` | " + definitions[i].definition + " |\n";
  return table;
}

std::string settings_table() {
  train::TrainConfig defaults;
  // In a sweep (dqntrader sweep --set): a member's own setting, one that forms a population
  // of each value, or one every member shares.
  std::string table = "| setting | default | in a sweep | meaning |\n|---|---|---|---|\n";
  for (const train::Setting& s : train::settings(defaults)) {
    const std::string value = s.get();
    const std::string shown = !s.documented_default.empty() ? s.documented_default
                              : value.empty()               ? "(empty)"
                                                            : "`" + value + "`";
    const train::Scope scope = train::setting_scope(s.name);
    const std::string sweep = s.name == "seed"                    ? "`--seeds`"
                              : train::own_setting(scope)         ? "per member"
                              : scope == train::Scope::population ? "per population"
                                                                  : "shared";
    table += "| `--" + s.name + "` | " + shown + " | " + sweep + " | " + s.help + " |\n";
  }
  return table;
}

}  // namespace dqntrader::cli

#include <iostream>

#include <memory>

#include "dqntrader/cli/commands.hpp"
#include "dqntrader/io/metrics_json.hpp"
#include "dqntrader/train/train_config.hpp"

namespace dqntrader::cli {

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
  const io::MetricDefinition* definitions = io::metric_definitions(count);
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
    const std::string scope = train::setting_scope(s.name);
    const std::string sweep = s.name == "seed"        ? "`--seeds`"
                              : scope == "member"     ? "per member"
                              : scope == "population" ? "per population"
                                                      : "shared";
    table += "| `--" + s.name + "` | " + shown + " | " + sweep + " | " + s.help + " |\n";
  }
  return table;
}

}  // namespace dqntrader::cli

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "dqntrader/cli/commands.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/eval/metrics_json.hpp"
#include "dqntrader/request/requests.hpp"
#include "dqntrader/train/train_config.hpp"

namespace dqntrader::cli {

Command add_settings(CLI::App& app) {
  struct Choice {
    bool metrics = false;
    std::string options;
  };
  auto choice = std::make_shared<Choice>();
  Command command;
  command.app = app.add_subcommand(
      "settings", "print every training setting with its default, as a Markdown table");
  command.app->add_flag("--metrics", choice->metrics,
                        "print the reported metrics with their definitions instead");
  std::vector<std::string> names;
  for (const request::Table& t : request::tables())
    names.push_back(t.command);
  command.app
      ->add_option("--options", choice->options,
                   "print the options of this command (besides the training settings) instead")
      ->check(CLI::IsMember(names));
  command.run = [choice](const ExecSpace&) {
    if (!choice->options.empty()) {
      std::cout << spelled(request::markdown(request::table(choice->options)), Spelling::command);
      return;
    }
    std::cout << (choice->metrics ? metrics_table() : settings_table());
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
    table += "| `--" + s.name + "` | " + shown + " | " + sweep + " | " +
             spelled(s.help, Spelling::command) + " |\n";
  }
  return table;
}

}  // namespace dqntrader::cli

#include <iostream>

#include "dqntrader/cli/commands.hpp"
#include "dqntrader/train/train_config.hpp"

namespace dqntrader::cli {

Command add_settings(CLI::App& app) {
  Command command;
  command.app = app.add_subcommand(
      "settings", "print every training setting with its default, as a Markdown table");
  command.run = [](const ExecSpace&) { std::cout << settings_table(); };
  return command;
}

std::string settings_table() {
  train::TrainConfig defaults;
  std::string table = "| setting | default | meaning |\n|---|---|---|\n";
  for (const train::Setting& s : train::settings(defaults)) {
    const std::string value = s.get();
    const std::string shown = !s.documented_default.empty() ? s.documented_default
                              : value.empty()               ? "(empty)"
                                                            : "`" + value + "`";
    table += "| `--" + s.name + "` | " + shown + " | " + s.help + " |\n";
  }
  return table;
}

}  // namespace dqntrader::cli

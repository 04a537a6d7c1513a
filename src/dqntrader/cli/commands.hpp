// The dqntrader subcommands: each registers its options on the application and runs after
// Kokkos is up.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

#include "dqntrader/core/types.hpp"
#include "dqntrader/train/train_config.hpp"

namespace dqntrader::cli {

/// A parsed subcommand, ready to run on an execution space.
struct Command {
  CLI::App* app = nullptr;
  std::function<void(const ExecSpace&)> run;
};

Command add_info(CLI::App& app);
Command add_synth(CLI::App& app);
Command add_cache(CLI::App& app);
Command add_backtest(CLI::App& app);
Command add_train(CLI::App& app);
Command add_sweep(CLI::App& app);
Command add_settings(CLI::App& app);
Command add_report(CLI::App& app);

/// Every training setting as an option --name of a subcommand, whose given values apply() sets.
class SettingFlags {
 public:
  /// Adds the options to c, each with help(setting) and the setting's value in defaults as its
  /// default.
  void add(CLI::App* c, train::TrainConfig defaults,
           const std::function<std::string(const train::Setting&)>& help);
  /// Sets in config the settings whose options were given (a flag given alone: true).
  void apply(train::TrainConfig& config) const;

 private:
  std::vector<CLI::Option*> m_options;
  std::vector<std::string> m_values;  // the options' texts, bound by address
};

/// The training settings as a Markdown table (README.md embeds it; a test keeps them equal).
std::string settings_table();
/// The metrics with their definitions as a Markdown table (README.md embeds it too).
std::string metrics_table();

/// Writes text to path atomically (or to stdout for "-").
void write_output(const std::string& path, const std::string& text);

}  // namespace dqntrader::cli

// The dqntrader subcommands: each registers its options on the application and runs after
// Kokkos is up.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

#include "dqntrader/core/types.hpp"

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

/// The training settings as a Markdown table (README.md embeds it; a test keeps them equal).
std::string settings_table();
/// The metrics with their definitions as a Markdown table (README.md embeds it too).
std::string metrics_table();

/// Writes text to path atomically (or to stdout for "-").
void write_output(const std::string& path, const std::string& text);

}  // namespace dqntrader::cli

// The dqntrader subcommands: each registers its options on the application and runs after
// Kokkos is up.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dqntrader/core/types.hpp"
#include "dqntrader/data/bars.hpp"
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
Command add_act(CLI::App& app);
#if defined(DQNTRADER_WITH_ONNX)
Command add_export(CLI::App& app);
#endif

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

/// InputError when --test-fraction is given on c's command line and the settings have a
/// test-data file: the file is the test window, and the fraction would be silently ignored.
void refuse_test_fraction_beside_test_data(const CLI::App& c, const train::TrainConfig& config);

/// The training settings as a Markdown table (README.md embeds it; a test keeps them equal).
std::string settings_table();
/// The metrics with their definitions as a Markdown table (README.md embeds it too).
std::string metrics_table();

/// Writes text to path atomically (or to stdout for "-"; through, for a FIFO or a character
/// device: io::AtomicFile).
void write_output(const std::string& path, const std::string& text);

/// A validator of a count or a seed: digits only (a '-' would wrap around to a huge unsigned
/// number), at least `least` and at most 2^64 - 1; its messages quote what was typed.
CLI::Validator whole_number(std::uint64_t least = 0);

/// An input of a command: how the command names it ("--data") and its path.
struct NamedInput {
  std::string option, path;
};

/// InputError naming both when the output (option and path; "-" for standard output) is one of
/// the inputs' files, links followed: writing it would destroy what is being read.
void refuse_output_over_input(const std::string& option, const std::string& output,
                              const std::vector<NamedInput>& inputs);

/// InputError naming the option and the path when path is a directory: an input file is
/// meant (a bar file, a policy file).
void check_input(const std::string& option, const std::string& path);

/// InputError naming the option unless path is "-" or a path a file can be written to
/// (io::resolve_output): checked before any work, so that a bad output path costs nothing.
void check_output(const std::string& option, const std::string& path);

}  // namespace dqntrader::cli

// The dqntrader subcommands: each registers its options on the application and runs after
// Kokkos is up.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "dqntrader/core/types.hpp"
#include "dqntrader/data/bars.hpp"
#include "dqntrader/request/options.hpp"

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

/// A request's options (request/options.hpp) as the flags of a subcommand.
class RequestFlags {
 public:
  /// Adds the subcommand table.command to app with every option of table as --name (a
  /// positional one by its name), its help and default, and returns it.
  CLI::App* add(CLI::App& app, const request::Table& table);
  /// What the command line gave.
  request::Given given() const;

 private:
  struct Bound {
    std::string name;
    CLI::Option* option;
    std::vector<std::string>* many;  // a repeatable option's values
    std::string* one;                // another's value
  };
  std::vector<Bound> m_bound;
  std::deque<std::vector<std::string>> m_many;  // bound by address: a deque keeps them
  std::deque<std::string> m_one;
};

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

}  // namespace dqntrader::cli

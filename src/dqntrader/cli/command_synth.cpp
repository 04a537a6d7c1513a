#include <iostream>
#include <memory>

#include "dqntrader/cli/commands.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/data/bar_cache.hpp"
#include "dqntrader/data/csv_reader.hpp"
#include "dqntrader/data/synthetic.hpp"
#include "dqntrader/data/timestamp.hpp"

namespace dqntrader::cli {

Command add_synth(CLI::App& app) {
  struct Options {
    data::SynthConfig config;
    std::string out;
    std::string start = "2000-01-03";
    double interval_seconds = 86400;
  };
  auto options = std::make_shared<Options>();
  Command command;
  command.app = app.add_subcommand(
      "synth",
      "generate synthetic bars with switching regimes, jumps and an 'ofi' column that predicts the "
      "next bar's return (the built-in default data)");
  CLI::App* c = command.app;
  c->add_option("--out", options->out, "output file: .csv, or .dqnbars for the binary cache")
      ->required();
  c->add_option("--bars", options->config.bars, "number of bars")
      ->capture_default_str()
      ->check(CLI::Range(2, 1 << 30));
  c->add_option("--seed", options->config.seed, "random seed")->capture_default_str();
  c->add_option("--ofi-signal", options->config.ofi_signal,
                "correlation of ofi with the next bar's return shock, in [0, 1]")
      ->capture_default_str();
  c->add_option("--persistence", options->config.persistence,
                "probability that a regime persists from one bar to the next")
      ->capture_default_str();
  c->add_option("--jump-probability", options->config.jump_probability,
                "probability of a jump per bar")
      ->capture_default_str();
  c->add_option("--start", options->start, "first timestamp (ISO-8601, UTC)")
      ->capture_default_str();
  c->add_option("--interval-seconds", options->interval_seconds, "time between bars")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command.run = [options](const ExecSpace&) {
    if (options->out == "-")
      throw InputError("--out -: synth writes a file (.csv, or .dqnbars for the binary cache)");
    check_output("--out", options->out);
    const auto start = data::parse_iso8601_ms(options->start);
    if (!start)
      throw InputError("--start: cannot parse '" + options->start + "' as an ISO-8601 date");
    options->config.start_ms = *start;
    options->config.interval_ms = static_cast<std::int64_t>(options->interval_seconds * 1000.0);
    const data::Bars bars = data::generate_bars(options->config);
    if (data::is_bar_cache_path(options->out)) {
      data::write_bar_cache(options->out, bars);
    } else {
      data::write_bars_csv(options->out, bars);
    }
    std::cerr << "dqntrader synth: wrote " << bars.size() << " bars to " << options->out << "\n";
  };
  return command;
}

Command add_cache(CLI::App& app) {
  struct Options {
    std::string data, out;
    data::ColumnSelection columns;
  };
  auto options = std::make_shared<Options>();
  Command command;
  command.app =
      app.add_subcommand("cache", "convert a CSV bar file into the binary cache (.dqnbars)");
  CLI::App* c = command.app;
  c->add_option("--data", options->data, "CSV bar file")->required();
  c->add_option("--out", options->out, "cache file to write (.dqnbars)")->required();
  c->add_option("--feature-columns", options->columns.names,
                "extra feature columns to keep, by name")
      ->delimiter(',');
  c->add_option("--feature-prefix", options->columns.prefixes,
                "keep extra columns whose names start with this")
      ->delimiter(',');
  command.run = [options](const ExecSpace&) {
    if (!data::is_bar_cache_path(options->out))
      throw InputError("--out must end in .dqnbars");
    check_input("--data", options->data);
    check_output("--out", options->out);
    const data::Bars bars = data::read_bars_csv(options->data, options->columns);
    data::write_bar_cache(options->out, bars);
    std::cerr << "dqntrader cache: wrote " << bars.size() << " bars to " << options->out << "\n";
  };
  return command;
}

}  // namespace dqntrader::cli

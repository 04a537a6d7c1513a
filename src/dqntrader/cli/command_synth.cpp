#include <iostream>
#include <memory>

#include "dqntrader/cli/commands.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/data/bar_cache.hpp"
#include "dqntrader/data/csv_reader.hpp"
#include "dqntrader/data/synthetic.hpp"
#include "dqntrader/request/requests.hpp"

namespace dqntrader::cli {

Command add_synth(CLI::App& app) {
  auto flags = std::make_shared<RequestFlags>();
  auto out = std::make_shared<std::string>();
  Command command;
  command.app = flags->add(app, request::table("synth"));
  command.app->add_option("--out", *out, "output file: .csv, or .dqnbars for the binary cache")
      ->required();
  command.run = [flags, out](const ExecSpace&) {
    const request::SynthRequest r = request::synth_request(flags->given());
    if (*out == "-")
      throw InputError("--out -: synth writes a file (.csv, or .dqnbars for the binary cache)");
    request::check_output("out", *out);
    const data::SynthPanel panel = data::synth_panel(r.config);
    if (panel.bars.size() > 1) {
      if (data::is_bar_cache_path(*out))
        data::write_bar_cache(*out, data::Panel{panel.symbols, panel.bars});
      else
        data::write_bars_csv(*out, panel.bars, panel.symbols);
    } else if (data::is_bar_cache_path(*out)) {
      data::write_bar_cache(*out, panel.bars.front());
    } else {
      data::write_bars_csv(*out, panel.bars.front());
    }
    std::cerr << "dqntrader synth: wrote " << panel.bars.front().size() << " bars"
              << (panel.bars.size() > 1
                      ? " of " + std::to_string(panel.bars.size()) + " instruments"
                      : std::string())
              << " to " << *out << "\n";
  };
  return command;
}

Command add_cache(CLI::App& app) {
  struct Options {
    std::string data, out;
    data::BarSelection columns;
  };
  auto options = std::make_shared<Options>();
  Command command;
  command.app = app.add_subcommand(
      "cache",
      "convert a CSV bar file into the binary cache (.dqnbars): every instrument of a file of "
      "several, unless --symbol chooses one");
  CLI::App* c = command.app;
  c->add_option("--data", options->data, "CSV bar file")->required();
  c->add_option("--out", options->out, "cache file to write (.dqnbars)")->required();
  c->add_option("--feature-columns", options->columns.names,
                "extra feature columns to keep, by name")
      ->delimiter(',');
  c->add_option("--feature-prefix", options->columns.prefixes,
                "keep extra columns whose names start with this")
      ->delimiter(',');
  c->add_option("--symbol", options->columns.symbol,
                "the instrument to keep of a CSV file of several (one with a symbol column); "
                "default every instrument");
  command.run = [options](const ExecSpace&) {
    data::check_symbol("symbol", options->columns.symbol);
    if (!data::is_bar_cache_path(options->out))
      throw InputError("--out must end in .dqnbars");
    request::check_input("data", options->data);
    request::check_output("out", options->out);
    const data::Panel panel = data::read_panel_csv(options->data, options->columns);
    data::write_bar_cache(options->out, panel);
    std::size_t bars = 0;
    for (const data::Bars& instrument : panel.instruments)
      bars += instrument.size();
    std::cerr << "dqntrader cache: wrote " << bars << " bars"
              << (panel.size() > 1 ? " of " + std::to_string(panel.size()) + " instruments"
                                   : std::string())
              << " to " << options->out << "\n";
  };
  return command;
}

}  // namespace dqntrader::cli

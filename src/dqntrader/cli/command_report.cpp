#include <filesystem>
#include <iostream>
#include <memory>

#include "dqntrader/cli/commands.hpp"
#include "dqntrader/report/run_report.hpp"
#include "dqntrader/report/sweep_report.hpp"

namespace dqntrader::cli {

Command add_report(CLI::App& app) {
  struct Options {
    std::string run, out, data;
  };
  auto options = std::make_shared<Options>();
  Command command;
  command.app = app.add_subcommand(
      "report",
      "write one self-contained HTML report of a training run (the best policy against the "
      "built-in policies on the validation window, the training curves and the metrics) or of "
      "a sweep (every member's validation Sharpe over its epochs, each swept setting against "
      "it, the leaderboards and the best member against buy-and-hold)");
  CLI::App* c = command.app;
  c->add_option("run", options->run,
                "run directory written by dqntrader train, or sweep directory written by "
                "dqntrader sweep")
      ->required()
      ->check(CLI::ExistingDirectory);
  c->add_option("--out", options->out, "HTML file to write ('-' for stdout)")
      ->default_str("RUN/report.html");
  c->add_option("--data", options->data,
                "the run's (the sweep's) bar file, when it has moved since training (it must "
                "hold the same bars)");
  command.run = [options](const ExecSpace& space) {
    const std::string out = options->out.empty() ? options->run + "/report.html" : options->out;
    check_output("--out", out);
    if (!options->data.empty())
      check_input("--data", options->data);
    if (std::filesystem::exists(options->run + "/sweep.json")) {
      std::cerr << "dqntrader report: reading the sweep in " << options->run
                << " and evaluating its best member\n";
      const report::SweepReport r =
          report::collect_sweep_report(space, options->run, options->data);
      write_output(out, report::render_html(r));
      std::cerr << "dqntrader report: wrote " << out << " (" << r.members.size() << " members, "
                << r.axes.size() << " swept settings)\n";
      return;
    }
    std::cerr << "dqntrader report: evaluating the best policy of " << options->run << "\n";
    const report::RunReport r = report::collect_run_report(space, options->run, options->data);
    write_output(out, report::render_html(r));
    std::cerr << "dqntrader report: wrote " << out << " (" << r.validation.policy.returns.size()
              << " validation bars, " << r.epochs.size() << " epochs)\n";
  };
  return command;
}

}  // namespace dqntrader::cli

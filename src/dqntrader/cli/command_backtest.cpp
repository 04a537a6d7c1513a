#include <algorithm>
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>

#include "dqntrader/cli/commands.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/core/transfer.hpp"
#include "dqntrader/data/bar_cache.hpp"
#include "dqntrader/data/features.hpp"
#include "dqntrader/data/timestamp.hpp"
#include "dqntrader/eval/backtest_run.hpp"
#include "dqntrader/eval/metrics_json.hpp"
#include "dqntrader/eval/path_evaluator.hpp"
#include "dqntrader/eval/policy_file.hpp"
#include "dqntrader/io/csv_field.hpp"
#include "dqntrader/io/json_values.hpp"

namespace dqntrader::cli {

namespace {

// One column per policy, one row per metric.
std::string metrics_table(const std::vector<std::string>& names,
                          const std::vector<eval::WindowMetrics>& metrics) {
  std::size_t count = 0;
  const eval::MetricDefinition* definitions = eval::metric_definitions(count);
  std::vector<nlohmann::json> values;
  std::vector<std::size_t> widths;
  for (std::size_t k = 0; k < names.size(); ++k) {
    values.push_back(eval::to_json(metrics[k]));
    widths.push_back(std::max<std::size_t>(names[k].size(), 14));
  }
  std::ostringstream out;
  char cell[512];
  std::snprintf(cell, sizeof cell, "  %-18s", "");
  out << cell;
  for (std::size_t k = 0; k < names.size(); ++k) {
    std::snprintf(cell, sizeof cell, " %*s", static_cast<int>(widths[k]), names[k].c_str());
    out << cell;
  }
  out << "\n";
  for (std::size_t i = 0; i < count; ++i) {
    std::snprintf(cell, sizeof cell, "  %-18s", definitions[i].key);
    out << cell;
    for (std::size_t k = 0; k < names.size(); ++k) {
      std::snprintf(cell, sizeof cell, " %*s", static_cast<int>(widths[k]),
                    io::metric_text(values[k].at(definitions[i].key)).c_str());
      out << cell;
    }
    out << "\n";
  }
  return out.str();
}

// The per-bar paths as CSV: a row per bar return of each window (the window's number, the bar
// at whose close the return is realised and its time), per policy the position held over the
// bar, the net return and the equity after it (E_0 = 1 at the window's first bar), every
// number with 17 significant digits (it reads back as the same double; a zero is written "0").
std::string returns_csv(const std::vector<std::string>& names,
                        const std::vector<eval::BarRange>& windows,
                        const std::vector<std::vector<eval::PathDetail>>& details,
                        const data::Bars& bars) {
  std::string out = "window,bar,timestamp";
  for (const std::string& name : names) {
    for (const char* column : {":position", ":return", ":equity"})
      out += "," + io::csv_field(name + column);
  }
  out += "\n";
  char number[32];
  auto add = [&](double v) {
    std::snprintf(number, sizeof number, "%.17g", v == 0.0 ? 0.0 : v);  // no "-0"
    out += ',';
    out += number;
  };
  for (std::size_t w = 0; w < windows.size(); ++w) {
    for (std::size_t i = 0; i < windows[w].returns(); ++i) {
      const std::size_t bar = windows[w].begin + i + 1;
      out += std::to_string(w + 1) + "," + std::to_string(bar) + "," +
             data::format_iso8601_ms(bars.timestamp_ms[bar]);
      for (const eval::PathDetail& d : details[w]) {
        add(d.positions[i]);
        add(d.returns[i]);
        add(d.equity[i + 1]);
      }
      out += "\n";
    }
  }
  return out;
}

}  // namespace

Command add_backtest(CLI::App& app) {
  struct Options {
    std::string data, json, returns, from, to, precision;
    std::vector<std::string> weights, policies;
    std::size_t windows = 1;
    eval::BacktestConfig config;
  };
  auto options = std::make_shared<Options>();
  Command command;
  command.app = app.add_subcommand(
      "backtest",
      "backtest trained policies (--weights) and built-in ones (--policy) on bar data, all "
      "together, and print their metrics side by side");
  CLI::App* c = command.app;
  c->add_option("--data", options->data, "bar file: CSV or .dqnbars cache")->required();
  c->add_option("--weights", options->weights,
                "policy file written by dqntrader train (.dqnpolicy); repeatable: files that "
                "share a network and features are evaluated in one pass");
  c->add_option("--policy", options->policies,
                "built-in policy: buy-and-hold, flat or sign-of-ofi; repeatable");
  c->add_option("--from", options->from,
                "first bar of the window: a bar index or an ISO-8601 timestamp (the first bar "
                "at or after it); default the first bar every policy can decide at");
  c->add_option("--to", options->to,
                "last bar of the window: a bar index or an ISO-8601 timestamp (the last bar at "
                "or before it); default the last bar");
  c->add_option("--windows", options->windows,
                "split the window into this many consecutive walk-forward windows, each "
                "starting flat, and print each")
      ->capture_default_str()
      ->check(whole_number(1));
  c->add_option("--cost", options->config.cost, "fees plus slippage, a fraction of traded notional")
      ->capture_default_str();
  c->add_option("--bars-per-year", options->config.bars_per_year,
                "A, for annualising (252 daily equity bars, 98280 US equity minute bars)")
      ->capture_default_str();
  c->add_option("--risk-free", options->config.risk_free, "risk-free return per bar")
      ->capture_default_str();
  c->add_option("--json", options->json,
                "also write the metrics as a JSON array, one object per policy and window "
                "(policy, window, metrics), to this file ('-' for stdout)");
  c->add_option("--returns", options->returns,
                "also write every policy's per-bar position, net return and equity as CSV to "
                "this file ('-' for stdout): one row per bar return (window, bar, timestamp), "
                "one column group per policy");
  c->add_option("--precision", options->precision,
                "network arithmetic: fp32 (the default: the decision a policy file defines and "
                "export writes), tf32 or bf16 (faster on CUDA; its decisions may differ where "
                "Q-values nearly tie)");
  c->add_option("--chunk-bars", options->config.chunk_bars,
                "bars per network pass (bounds device memory)")
      ->capture_default_str()
      ->check(whole_number(1));
  command.run = [options](const ExecSpace& space) {
    if (options->weights.empty() && options->policies.empty())
      throw InputError("backtest needs at least one --weights FILE or --policy NAME");
    check_input("--data", options->data);
    for (const std::string& path : options->weights)
      check_input("--weights", path);
    if (!options->json.empty())
      check_output("--json", options->json);
    if (!options->returns.empty())
      check_output("--returns", options->returns);
    std::vector<NamedInput> inputs = {{"--data", options->data}};
    for (const std::string& path : options->weights)
      inputs.push_back({"--weights", path});
    refuse_output_over_input("standard output", "-", inputs);
    if (!options->json.empty())
      refuse_output_over_input("--json", options->json, inputs);
    if (!options->returns.empty())
      refuse_output_over_input("--returns", options->returns, inputs);
    if (options->json == "-" && options->returns == "-")
      throw InputError(
          "--json - and --returns - would both write to standard output; send one "
          "of them to a file");
    eval::BacktestRequest request;
    request.config = options->config;
    if (!options->precision.empty())
      request.config.precision = parse_precision(options->precision);
    for (const std::string& name : options->policies)
      request.builtins.push_back(eval::parse_builtin_policy(name));
    request.from = options->from;
    request.to = options->to;
    request.windows = options->windows;
    request.paths = !options->returns.empty();
    const eval::BacktestPolicies files = eval::read_backtest_policies(options->weights);
    const data::Bars bars = data::load_bars(options->data, files.columns);
    const eval::BacktestResult result = eval::run_backtest(space, bars, files, request);
    const std::vector<std::string>& names = result.names;
    const std::vector<eval::BarRange>& windows = result.windows;
    const eval::BacktestConfig& config = result.config;
    auto describe = [&](const eval::BarRange& w) {
      return "bars " + std::to_string(w.begin) + " .. " + std::to_string(w.end - 1) + " (" +
             data::format_iso8601_ms(bars.timestamp_ms[w.begin]) + " .. " +
             data::format_iso8601_ms(bars.timestamp_ms[w.end - 1]) + ")";
    };
    // The table for a person: on standard output, unless the data go there.
    std::ostream& table = options->json == "-" || options->returns == "-" ? std::cerr : std::cout;
    for (std::size_t k = 0; k < names.size(); ++k) {
      table << "policy  " << (k < files.paths.size() ? names[k] : "built-in " + names[k]) << "\n";
    }
    table << "data    " << options->data << ": "
          << describe(eval::BarRange{windows.front().begin, windows.back().end}) << "\n"
          << "costs   " << config.cost << " per unit traded; A = " << config.bars_per_year
          << " bars per year; rf = " << config.risk_free << " per bar\n";
    for (std::size_t w = 0; w < windows.size(); ++w) {
      if (windows.size() > 1) {
        table << "window " << w + 1 << " of " << windows.size() << ": " << describe(windows[w])
              << "\n";
      }
      table << metrics_table(names, result.metrics[w]);
    }
    if (!options->json.empty())
      write_output(options->json, eval::to_json(result).dump(2) + "\n");
    if (request.paths)
      write_output(options->returns, returns_csv(names, windows, result.details, bars));
  };
  return command;
}

}  // namespace dqntrader::cli

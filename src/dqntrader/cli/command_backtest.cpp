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
#include "dqntrader/request/requests.hpp"

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

// The per-bar paths as CSV: a row per bar return of each window of each instrument (of a
// panel of several, the instrument's symbol first; the window's number, the bar at whose close
// the return is realised and its time), per policy the position held over the bar, the net
// return and the equity after it (E_0 = 1 at the window's first bar), every number with 17
// significant digits (it reads back as the same double; a zero is written "0").
std::string returns_csv(const std::vector<std::string>& names, const data::Panel& panel,
                        const std::vector<eval::BacktestResult>& results) {
  const bool symbols = panel.size() > 1;
  std::string out = symbols ? "symbol,window,bar,timestamp" : "window,bar,timestamp";
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
  for (std::size_t s = 0; s < panel.size(); ++s) {
    const std::vector<eval::BarRange>& windows = results[s].windows;
    for (std::size_t w = 0; w < windows.size(); ++w) {
      for (std::size_t i = 0; i < windows[w].returns(); ++i) {
        const std::size_t bar = windows[w].begin + i + 1;
        if (symbols)
          out += io::csv_field(panel.symbols[s]) + ",";
        out += std::to_string(w + 1) + "," + std::to_string(bar) + "," +
               data::format_iso8601_ms(panel.instruments[s].timestamp_ms[bar]);
        for (const eval::PathDetail& d : results[s].details[w]) {
          add(d.positions[i]);
          add(d.returns[i]);
          add(d.equity[i + 1]);
        }
        out += "\n";
      }
    }
  }
  return out;
}

}  // namespace

Command add_backtest(CLI::App& app) {
  struct Outputs {
    std::string json, returns;
  };
  auto flags = std::make_shared<RequestFlags>();
  auto outputs = std::make_shared<Outputs>();
  Command command;
  command.app = flags->add(app, request::table("backtest"));
  CLI::App* c = command.app;
  c->add_option("--json", outputs->json,
                "also write the metrics as a JSON array, one object per policy and window "
                "(policy, window, metrics), to this file ('-' for stdout)");
  c->add_option("--returns", outputs->returns,
                "also write every policy's per-bar position, net return and equity as CSV to "
                "this file ('-' for stdout): one row per bar return (window, bar, timestamp), "
                "one column group per policy");
  command.run = [flags, outputs](const ExecSpace& space) {
    request::BacktestRequest r = request::backtest_request(flags->given());
    const std::string &json = outputs->json, &returns = outputs->returns;
    if (!json.empty())
      request::check_output("json", json);
    if (!returns.empty())
      request::check_output("returns", returns);
    std::vector<NamedInput> inputs;
    for (const std::string& path : r.data)
      inputs.push_back({"--data", path});
    for (const std::string& path : r.weights)
      inputs.push_back({"--weights", path});
    refuse_output_over_input("standard output", "-", inputs);
    if (!json.empty())
      refuse_output_over_input("--json", json, inputs);
    if (!returns.empty())
      refuse_output_over_input("--returns", returns, inputs);
    if (json == "-" && returns == "-")
      throw InputError(
          "--json - and --returns - would both write to standard output; send one "
          "of them to a file");
    r.run.paths = !returns.empty();
    eval::BacktestPolicies files = eval::read_backtest_policies(r.weights);
    files.columns.symbol = r.symbol;
    // Every instrument of the data (the one --symbol chooses, when given), each backtested on
    // its own bars.
    const data::Panel panel = data::load_panel(r.data, files.columns);
    const std::vector<eval::BacktestResult> results =
        eval::run_backtest(space, panel, files, r.run);
    const std::vector<std::string>& names = results.front().names;
    const eval::BacktestConfig& config = results.front().config;
    auto describe = [](const data::Bars& bars, const eval::BarRange& w) {
      return "bars " + std::to_string(w.begin) + " .. " + std::to_string(w.end - 1) + " (" +
             data::format_iso8601_ms(bars.timestamp_ms[w.begin]) + " .. " +
             data::format_iso8601_ms(bars.timestamp_ms[w.end - 1]) + ")";
    };
    // The table for a person: on standard output, unless the data go there.
    std::ostream& table = json == "-" || returns == "-" ? std::cerr : std::cout;
    for (std::size_t k = 0; k < names.size(); ++k) {
      table << "policy  " << (k < files.paths.size() ? names[k] : "built-in " + names[k]) << "\n";
    }
    std::string files_read;
    for (const std::string& path : r.data)
      files_read += (files_read.empty() ? "" : ", ") + path;
    table << "data    " << files_read << ": ";
    if (panel.size() == 1) {
      const std::vector<eval::BarRange>& windows = results.front().windows;
      table << describe(panel.instruments.front(),
                        eval::BarRange{windows.front().begin, windows.back().end});
    } else {
      table << panel.size() << " instruments";
    }
    table << "\n"
          << "costs   " << config.cost << " per unit traded; A = " << config.bars_per_year
          << " bars per year; rf = " << config.risk_free << " per bar\n";
    for (std::size_t s = 0; s < panel.size(); ++s) {
      const eval::BacktestResult& result = results[s];
      const std::vector<eval::BarRange>& windows = result.windows;
      const std::string instrument =
          panel.size() > 1 ? "instrument " + panel.symbols[s] : std::string();
      for (std::size_t w = 0; w < windows.size(); ++w) {
        if (windows.size() > 1) {
          table << (instrument.empty() ? "" : instrument + ", ") << "window " << w + 1 << " of "
                << windows.size() << ": " << describe(panel.instruments[s], windows[w]) << "\n";
        } else if (!instrument.empty()) {
          table << instrument << ": " << describe(panel.instruments[s], windows[w]) << "\n";
        }
        table << metrics_table(names, result.metrics[w]);
      }
    }
    if (!json.empty())
      write_output(json, eval::to_json(panel, results).dump(2) + "\n");
    if (r.run.paths)
      write_output(returns, returns_csv(names, panel, results));
  };
  return command;
}

}  // namespace dqntrader::cli

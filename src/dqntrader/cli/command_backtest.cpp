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
#include "dqntrader/eval/backtest_evaluator.hpp"
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

// A weight file read, with what decides whether it can share an evaluator with others.
struct WeightPolicy {
  std::string path;
  eval::PolicyFile file;
};

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

// The policy files, checked to share an action set, the bar columns their features need
// beyond the standard ones, and the bars their features need before the first decision.
struct PolicyFiles {
  std::vector<WeightPolicy> weights;
  data::ColumnSelection columns;
  std::size_t warmup = 0;
};

PolicyFiles read_policy_files(const std::vector<std::string>& paths) {
  PolicyFiles out;
  for (const std::string& path : paths) {
    out.weights.push_back({path, eval::read_policy(path)});
    const eval::PolicyFile& file = out.weights.back().file;
    if (!out.weights.front().file.positions.empty() &&
        file.positions != out.weights.front().file.positions) {
      throw InputError(path, 0, 0,
                       "the policy files hold different action sets; backtest them apart");
    }
    for (const std::string& extra : file.features.extra) {
      if (std::find(out.columns.names.begin(), out.columns.names.end(), extra) ==
          out.columns.names.end())
        out.columns.names.push_back(extra);
    }
    out.warmup = std::max(out.warmup, file.features.warmup());
  }
  return out;
}

// The window --from .. --to (by default from the first bar every policy can decide at to the
// last), cut into `count` consecutive walk-forward windows.
std::vector<eval::BarRange> backtest_windows(const std::string& from, const std::string& to,
                                             std::size_t count, const data::Bars& bars,
                                             std::size_t warmup) {
  const std::size_t first = from.empty() ? warmup : bar_index("from", from, bars, true);
  const std::size_t last = to.empty() ? bars.size() - 1 : bar_index("to", to, bars, false);
  if (first < warmup) {
    throw InputError("--from " + from + " selects bar " + std::to_string(first) + ", before bar " +
                     std::to_string(warmup) +
                     ", the first at which the policies' features are defined");
  }
  if (last < first) {
    throw InputError("--from " + (from.empty() ? std::to_string(first) : from) + " (bar " +
                     std::to_string(first) + ") comes after --to " +
                     (to.empty() ? std::to_string(last) : to) + " (bar " + std::to_string(last) +
                     ")");
  }
  const std::size_t span = last - first + 1;
  if (span < 2 * count) {
    throw InputError(
        (count > 1 ? "--windows " + std::to_string(count) + ": " : std::string("--from/--to: ")) +
        "bars " + std::to_string(first) + " .. " + std::to_string(last) + " hold " +
        std::to_string(span) + " bar(s); a window needs at least 2");
  }
  std::vector<eval::BarRange> windows;
  for (std::size_t w = 0; w < count; ++w)
    windows.push_back({first + w * span / count, first + (w + 1) * span / count});
  return windows;
}

// Every policy's metrics (and, with paths, its per-bar detail) on every window, [window][policy]:
// the weight files in groups that share an evaluator (one evaluate_many pass each), then the
// built-ins.
struct Evaluated {
  std::vector<std::vector<eval::WindowMetrics>> metrics;
  std::vector<std::vector<eval::PathDetail>> details;  // empty without paths
};

Evaluated evaluate_policies(const ExecSpace& space, const std::vector<WeightPolicy>& weights,
                            const std::vector<eval::BuiltinPolicy>& builtins,
                            const data::Bars& bars, const std::vector<eval::BarRange>& windows,
                            const eval::BacktestConfig& config, bool paths) {
  const std::size_t policies = weights.size() + builtins.size();
  Evaluated out;
  out.metrics.assign(windows.size(), std::vector<eval::WindowMetrics>(policies));
  if (paths)
    out.details.assign(windows.size(), std::vector<eval::PathDetail>(policies));
  std::vector<bool> done(weights.size(), false);
  for (std::size_t k = 0; k < weights.size(); ++k) {
    if (done[k])
      continue;
    std::vector<std::size_t> group;
    for (std::size_t j = k; j < weights.size(); ++j) {
      if (!done[j] && eval::same_evaluator(weights[k].file, weights[j].file)) {
        group.push_back(j);
        done[j] = true;
      }
    }
    const eval::PolicyFile& file = weights[k].file;
    std::vector<float> rows;
    for (std::size_t j : group)  // one network: parameter vectors of one length
      rows.insert(rows.end(), weights[j].file.parameters.begin(), weights[j].file.parameters.end());
    const auto device = upload(space, rows, "dqntrader::cli::parameters");
    const eval::ParameterRows parameters =
        eval::parameter_rows(device.data(), group.size(), file.parameters.size());
    const data::FeatureSet features(space, bars, file.features);
    for (std::size_t w = 0; w < windows.size(); ++w) {
      eval::BacktestEvaluator evaluator(space, features, file.stats, file.network, windows[w],
                                        config, group.size());
      const std::vector<eval::WindowMetrics> m = evaluator.evaluate_many(parameters);
      for (std::size_t g = 0; g < group.size(); ++g) {
        out.metrics[w][group[g]] = m[g];
        if (paths) {
          out.details[w][group[g]] = evaluator.path_detail(
              eval::Parameters(device.data() + g * file.parameters.size(), file.parameters.size()));
        }
      }
    }
  }
  if (!builtins.empty()) {
    std::size_t longest = 0;
    for (const eval::BarRange& w : windows)
      longest = std::max(longest, w.returns());
    eval::BuiltinEvaluator evaluator(space, bars, config, longest);
    for (std::size_t b = 0; b < builtins.size(); ++b) {
      for (std::size_t w = 0; w < windows.size(); ++w) {
        out.metrics[w][weights.size() + b] = evaluator.evaluate(builtins[b], windows[w]);
        if (paths)
          out.details[w][weights.size() + b] = evaluator.detail(builtins[b], windows[w]);
      }
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
                "network arithmetic: fp32, tf32 or bf16 (default: bf16 on CUDA, "
                "fp32 on OpenMP)");
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
    if (options->json == "-" && options->returns == "-")
      throw InputError(
          "--json - and --returns - would both write to standard output; send one "
          "of them to a file");
    eval::BacktestConfig config = options->config;
    if (!options->precision.empty())
      config.precision = parse_precision(options->precision);
    std::vector<eval::BuiltinPolicy> builtins;
    for (const std::string& name : options->policies)
      builtins.push_back(eval::parse_builtin_policy(name));
    const PolicyFiles files = read_policy_files(options->weights);
    if (!files.weights.empty())
      config.positions = files.weights.front().file.positions;
    eval::validate(config);
    const data::Bars bars = data::load_bars(options->data, files.columns);
    if (bars.size() < 2)
      throw InputError(options->data, 0, 0, "a backtest needs at least 2 bars");
    for (const WeightPolicy& w : files.weights)
      data::check_features_available(w.file.features, bars, 2);
    const std::vector<eval::BarRange> windows =
        backtest_windows(options->from, options->to, options->windows, bars, files.warmup);
    const bool paths = !options->returns.empty();
    const Evaluated evaluated =
        evaluate_policies(space, files.weights, builtins, bars, windows, config, paths);

    std::vector<std::string> names;
    for (const WeightPolicy& w : files.weights)
      names.push_back(w.path);
    for (const eval::BuiltinPolicy p : builtins)
      names.push_back(eval::to_string(p));
    auto describe = [&](const eval::BarRange& w) {
      return "bars " + std::to_string(w.begin) + " .. " + std::to_string(w.end - 1) + " (" +
             data::format_iso8601_ms(bars.timestamp_ms[w.begin]) + " .. " +
             data::format_iso8601_ms(bars.timestamp_ms[w.end - 1]) + ")";
    };
    // The table for a person: on standard output, unless the data go there.
    std::ostream& table = options->json == "-" || options->returns == "-" ? std::cerr : std::cout;
    for (std::size_t k = 0; k < names.size(); ++k) {
      table << "policy  " << (k < files.weights.size() ? names[k] : "built-in " + names[k]) << "\n";
    }
    table << "data    " << options->data << ": "
          << describe(eval::BarRange{windows.front().begin, windows.back().end}) << "\n"
          << "costs   " << config.cost << " per unit traded; A = " << config.bars_per_year
          << " bars per year; rf = " << config.risk_free << " per bar\n";
    nlohmann::json json = nlohmann::json::array();
    for (std::size_t w = 0; w < windows.size(); ++w) {
      if (windows.size() > 1) {
        table << "window " << w + 1 << " of " << windows.size() << ": " << describe(windows[w])
              << "\n";
      }
      table << metrics_table(names, evaluated.metrics[w]);
      for (std::size_t k = 0; k < names.size(); ++k) {
        json.push_back(
            {{"policy", names[k]},
             {"window", {{"first_bar", windows[w].begin}, {"last_bar", windows[w].end - 1}}},
             {"metrics", eval::to_json(evaluated.metrics[w][k])}});
      }
    }
    if (!options->json.empty())
      write_output(options->json, json.dump(2) + "\n");
    if (paths)
      write_output(options->returns, returns_csv(names, windows, evaluated.details, bars));
  };
  return command;
}

}  // namespace dqntrader::cli

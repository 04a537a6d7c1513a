#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>

#include "dqntrader/cli/commands.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/core/transfer.hpp"
#include "dqntrader/data/bar_cache.hpp"
#include "dqntrader/data/features.hpp"
#include "dqntrader/data/timestamp.hpp"
#include "dqntrader/eval/backtest_evaluator.hpp"
#include "dqntrader/eval/path_evaluator.hpp"
#include "dqntrader/io/atomic_file.hpp"
#include "dqntrader/io/metrics_json.hpp"
#include "dqntrader/io/policy_file.hpp"

namespace dqntrader::cli {

void write_output(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text;
    return;
  }
  io::write_file_atomically(path, text);
}

namespace {

std::string metrics_table(const eval::WindowMetrics& metrics) {
  const nlohmann::json j = io::to_json(metrics);
  std::size_t count = 0;
  const io::MetricDefinition* definitions = io::metric_definitions(count);
  std::ostringstream out;
  for (std::size_t i = 0; i < count; ++i) {
    const nlohmann::json& v = j.at(definitions[i].key);
    std::string text;
    if (v.is_null()) {
      text = "nan";
    } else if (v.is_string()) {
      text = v.get<std::string>();
    } else if (v.is_number_integer()) {
      text = std::to_string(v.get<long long>());
    } else {
      text = io::format_metric(v.get<double>());
    }
    char line[160];
    std::snprintf(line, sizeof line, "  %-18s %14s\n", definitions[i].key, text.c_str());
    out << line;
  }
  return out.str();
}

}  // namespace

Command add_backtest(CLI::App& app) {
  struct Options {
    std::string data, weights, policy, json;
    eval::BacktestConfig config;
    std::string precision;
  };
  auto options = std::make_shared<Options>();
  Command command;
  command.app = app.add_subcommand(
      "backtest",
      "backtest a trained policy (--weights) or a built-in one (--policy) on bar data "
      "and print its metrics");
  CLI::App* c = command.app;
  c->add_option("--data", options->data, "bar file: CSV or .dqnbars cache")->required();
  auto* weights = c->add_option("--weights", options->weights,
                                "policy file written by dqntrader train (.dqnpolicy)");
  auto* policy = c->add_option("--policy", options->policy,
                               "built-in policy: buy-and-hold, flat or sign-of-ofi");
  weights->excludes(policy);
  policy->excludes(weights);
  c->add_option("--cost", options->config.cost, "fees plus slippage, a fraction of traded notional")
      ->capture_default_str();
  c->add_option("--bars-per-year", options->config.bars_per_year,
                "A, for annualising (252 daily equity bars, 98280 US equity minute bars)")
      ->capture_default_str();
  c->add_option("--risk-free", options->config.risk_free, "risk-free return per bar")
      ->capture_default_str();
  c->add_option("--json", options->json,
                "also write the metrics as JSON to this file ('-' for stdout)");
  c->add_option("--precision", options->precision,
                "network arithmetic: fp32, tf32 or bf16 (default: bf16 on CUDA, "
                "fp32 on OpenMP)");
  c->add_option("--chunk-bars", options->config.chunk_bars,
                "bars per network pass (bounds device memory)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command.run = [options](const ExecSpace& space) {
    if (options->weights.empty() == options->policy.empty()) {
      throw InputError("backtest needs exactly one of --weights FILE or --policy NAME");
    }
    eval::BacktestConfig config = options->config;
    if (!options->precision.empty())
      config.precision = parse_precision(options->precision);
    eval::WindowMetrics metrics;
    eval::BarRange window;
    data::Bars bars;
    std::string what;
    if (!options->weights.empty()) {
      const io::PolicyFile policy = io::read_policy(options->weights);
      data::ColumnSelection columns;
      columns.names = policy.features.extra;
      bars = data::load_bars(options->data, columns);
      data::check_features_available(policy.features, bars, 2);
      config.positions = policy.positions;
      eval::validate(config);
      data::FeatureSet features(space, bars, policy.features);
      window = eval::BarRange{policy.features.warmup(), bars.size()};
      eval::BacktestEvaluator evaluator(space, features, policy.stats, policy.network, window,
                                        config);
      metrics = evaluator.evaluate(upload(space, policy.parameters, "dqntrader::cli::parameters"));
      what = options->weights;
    } else {
      const eval::BuiltinPolicy builtin = eval::parse_builtin_policy(options->policy);
      bars = data::load_bars(options->data);
      if (bars.size() < 2)
        throw InputError(options->data, 0, 0, "a backtest needs at least 2 bars");
      eval::validate(config);
      window = eval::BarRange{0, bars.size()};
      const auto close = upload(space, bars.close, "dqntrader::cli::close");
      const auto ofi = upload(space, bars.ofi, "dqntrader::cli::ofi");
      const auto path = eval::builtin_path(space, builtin, ofi, window, config);
      eval::PathEvaluator evaluator(space, close, config, window.returns());
      metrics = evaluator.evaluate(window.begin, path);
      what = std::string("built-in ") + eval::to_string(builtin);
    }
    std::cout << "policy  " << what << "\n"
              << "data    " << options->data << ": bars " << window.begin << " .. "
              << window.end - 1 << " (" << data::format_iso8601_ms(bars.timestamp_ms[window.begin])
              << " .. " << data::format_iso8601_ms(bars.timestamp_ms[window.end - 1]) << ")\n"
              << "costs   " << config.cost << " per unit traded; A = " << config.bars_per_year
              << " bars per year; rf = " << config.risk_free << " per bar\n"
              << metrics_table(metrics);
    if (!options->json.empty())
      write_output(options->json, io::to_json(metrics).dump(2) + "\n");
  };
  return command;
}

}  // namespace dqntrader::cli

#include "dqntrader/report/run_report.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/transfer.hpp"
#include "dqntrader/data/features.hpp"
#include "dqntrader/data/timestamp.hpp"
#include "dqntrader/eval/backtest_evaluator.hpp"
#include "dqntrader/eval/metrics_json.hpp"
#include "dqntrader/eval/path_evaluator.hpp"
#include "dqntrader/eval/policy_file.hpp"
#include "dqntrader/io/json_values.hpp"
#include "dqntrader/report/report_parts.hpp"
#include "dqntrader/report/svg_chart.hpp"
#include "dqntrader/train/run_data.hpp"
#include "dqntrader/train/train_config.hpp"

namespace dqntrader::report {

namespace {

constexpr double nan = std::numeric_limits<double>::quiet_NaN();

// A metrics value as written by io::json_number: a number, null (NaN) or "inf"/"-inf".
double json_value(const nlohmann::json& record, const char* key, const std::string& path,
                  std::size_t line) {
  const auto found = record.find(key);
  if (found == record.end())
    throw InputError(path, line, 0, std::string("no \"") + key + "\"");
  const nlohmann::json& v = *found;
  if (v.is_null() || v.is_number() || v == "inf" || v == "-inf")
    return io::number_of(v);
  throw InputError(path, line, 0, std::string("\"") + key + "\" is not a number");
}

// Each non-empty line of a JSON-lines file, parsed; InputError with line and column.
std::vector<std::pair<std::size_t, nlohmann::json>> read_json_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw InputError(path, 0, 0, std::string("cannot open: ") + std::strerror(errno));
  std::vector<std::pair<std::size_t, nlohmann::json>> records;
  std::string text;
  for (std::size_t line = 1; std::getline(in, text); ++line) {
    if (text.empty())
      continue;
    try {
      nlohmann::json j = nlohmann::json::parse(text);
      if (!j.is_object())
        throw InputError(path, line, 1, "expected a JSON object");
      records.emplace_back(line, std::move(j));
    } catch (const nlohmann::json::parse_error& e) {
      throw InputError(path, line, e.byte, std::string("not valid JSON: ") + e.what());
    }
  }
  return records;
}

}  // namespace

std::vector<EpochPoint> read_epochs(const std::string& dir) {
  std::map<long long, double> seconds;
  const std::string timings = dir + "/timings.jsonl";
  for (const auto& [line, record] : read_json_lines(timings)) {
    if (record.contains("run"))
      continue;  // the run's phases, after its epochs
    seconds[static_cast<long long>(json_value(record, "epoch", timings, line))] =
        json_value(record, "train_seconds", timings, line) +
        json_value(record, "validation_seconds", timings, line);
  }
  std::vector<EpochPoint> epochs;
  const std::string metrics = dir + "/metrics.jsonl";
  for (const auto& [line, record] : read_json_lines(metrics)) {
    EpochPoint p;
    p.epoch = json_value(record, "epoch", metrics, line);
    p.loss = json_value(record, "loss", metrics, line);
    p.mean_q = json_value(record, "mean_q", metrics, line);
    p.epsilon = json_value(record, "epsilon", metrics, line);
    p.validation_sharpe = json_value(record, "validation_sharpe", metrics, line);
    const auto s = seconds.find(static_cast<long long>(p.epoch));
    p.seconds = s == seconds.end() ? nan : s->second;
    epochs.push_back(p);
  }
  if (epochs.empty())
    throw InputError(metrics, 0, 0, "no epochs recorded");
  return epochs;
}

namespace {

// The policy's metrics and per-bar path on window of bars, and the built-in policies' beside.
WindowCurves curves_on(const ExecSpace& space, const data::Bars& bars, const eval::BarRange& window,
                       const eval::PolicyFile& policy, const eval::BacktestConfig& backtest) {
  WindowCurves curves;
  curves.data_source = bars.source;
  curves.first_bar = window.begin;
  curves.last_bar = window.end - 1;
  curves.timestamps_ms.assign(bars.timestamp_ms.begin() + window.begin,
                              bars.timestamp_ms.begin() + window.end);
  {
    const data::FeatureSet features(space, bars, policy.features);
    eval::BacktestEvaluator evaluator(space, features, policy.stats, policy.network, window,
                                      backtest);
    const auto parameters = upload(space, policy.parameters, "dqntrader::report::parameters");
    curves.policy_metrics = evaluator.evaluate(parameters);
    curves.policy = evaluator.path_detail(parameters);
  }
  for (const eval::BuiltinRun& run : eval::evaluate_builtins(
           space, bars, eval::builtin_policies(bars), {window}, backtest, true)) {
    curves.baselines.push_back(
        {eval::to_string(run.policy), run.details.front(), run.metrics.front()});
  }
  return curves;
}

}  // namespace

RunReport collect_run_report(const ExecSpace& space, const std::string& dir,
                             const std::string& data_override) {
  RunReport report;
  report.run_directory = dir;
  train::TrainConfig config;
  const nlohmann::json settings = io::read_json_file(dir + "/config.json");
  train::apply_settings(config, settings, dir + "/config.json");
  if (!settings.contains("test-fraction"))
    config.test_fraction = 0;  // a run from before test windows held none out
  if (!data_override.empty())
    config.data = data_override;
  const eval::PolicyFile policy = eval::read_policy(dir + "/best.dqnpolicy");
  report.epochs = read_epochs(dir);
  if (policy.info.contains("epoch") && policy.info["epoch"].is_number_unsigned())
    report.best_epoch = policy.info["epoch"].get<std::size_t>();

  const train::RunData run = train::load_run_data(config);
  train::check_same_data(run, dir + "/best.dqnpolicy");
  const data::Bars& bars = run.separate_validation() ? run.validation : run.bars;
  const train::RunWindows windows = train::split_windows(
      config, run.bars.size(), run.validation.size(), policy.features.warmup());
  report.network = nn::describe(policy.network) + ", " + to_string(config.precision);

  const eval::BacktestConfig backtest = train::backtest_config(config, policy.positions);
  eval::validate(backtest);
  report.validation =
      curves_on(space, bars, eval::BarRange{windows.val_begin, windows.val_end}, policy, backtest);
  if (run.has_test()) {
    report.test = curves_on(space, run.test, train::test_window(run, policy.features.warmup()),
                            policy, backtest);
  }
  return report;
}

const char* baseline_colour(const std::string& policy) {
  if (policy == "buy-and-hold")
    return "#d9822b";
  if (policy == "sign-of-ofi")
    return "#2a9d4b";
  return "#8c8c8c";  // flat
}

namespace {

// Drawdown after each equity value, E_t / max(E_0 .. E_t) - 1, from the log of equity where
// equity is positive (equity past the largest double is drawn too). The peak is positive:
// E_0 = 1 is part of it.
std::vector<double> drawdowns(const eval::PathDetail& path) {
  std::vector<double> out(path.equity.size());
  double peak = 0.0;  // log of the peak
  for (std::size_t i = 0; i < path.equity.size(); ++i) {
    if (path.equity[i] > 0.0) {
      peak = std::max(peak, path.log_equity[i]);
      out[i] = std::expm1(path.log_equity[i] - peak);
    } else {
      out[i] = path.equity[i] / std::exp(peak) - 1.0;
    }
  }
  return out;
}

// log10 of equity where it is positive (NaN, a gap, elsewhere).
std::vector<double> log10_equity(const eval::PathDetail& path) {
  std::vector<double> out(path.equity.size());
  for (std::size_t i = 0; i < path.equity.size(); ++i)
    out[i] = path.equity[i] > 0.0 ? path.log_equity[i] / std::log(10.0) : nan;
  return out;
}

std::vector<double> as_doubles(const std::vector<std::int64_t>& values, std::size_t count) {
  return std::vector<double>(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(count));
}

std::string epoch_chart(const RunReport& r, const char* id, const char* title, const char* label,
                        double EpochPoint::*field) {
  LineChart chart;
  chart.id = id;
  chart.title = title;
  chart.x.label = "epoch";
  chart.y.label = label;
  Series s;
  s.name = "value";
  s.colour = policy_colour;
  for (const EpochPoint& p : r.epochs) {
    s.x.push_back(p.epoch);
    s.y.push_back(p.*field);
  }
  chart.series.push_back(std::move(s));
  return render(chart);
}

const char* const style = R"(
body { font: 14px/1.45 system-ui, sans-serif; color: #1d2330; margin: 0 auto; max-width: 980px;
       padding: 16px 24px 48px; background: #ffffff; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; margin-top: 32px; border-bottom: 1px solid #d5dae3; padding-bottom: 4px; }
.meta { color: #4a5568; margin: 0; }
figure.chart { margin: 18px 0; }
figure.chart figcaption { font-weight: 600; margin-bottom: 2px; }
figure.chart svg { width: 100%; height: auto; display: block; }
rect.plot-area { fill: #fbfcfe; stroke: #c3cad6; }
line.grid { stroke: #e6e9ef; }
line.zero { stroke: #7b8494; stroke-dasharray: 4 3; }
path.series { stroke-width: 1.6; stroke-linejoin: round; }
text.tick, text.legend { font-size: 11px; fill: #4a5568; }
text.axis-label { font-size: 12px; fill: #2d3748; }
text.no-data { font-size: 14px; fill: #7b8494; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #e6e9ef; }
td.value { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
circle.point { fill-opacity: 0.8; }
)";

}  // namespace

std::string document_head(const std::string& title) {
  return std::string("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n") +
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>" +
         escape_html(title) + "</title>\n<style>" + style + "</style>\n</head>\n<body>\n";
}

std::string equity_chart(const std::string& id, const std::string& title,
                         const std::vector<EquityCurve>& curves, const std::vector<double>& time) {
  LineChart chart;
  chart.id = id;
  chart.title = title;
  chart.x = {"time (UTC)", true};
  chart.y.label = "equity";
  // Growth over orders of magnitude reads on a log axis; growth past the largest double
  // (equity +inf) is drawn as log10 of equity, from its logarithm.
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  bool overflowed = false;
  for (const EquityCurve& c : curves) {
    for (double v : c.path->equity) {
      overflowed = overflowed || std::isinf(v);
      if (v > 0 && std::isfinite(v)) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
  }
  auto values = [&](const eval::PathDetail& p) { return overflowed ? log10_equity(p) : p.equity; };
  if (overflowed) {
    chart.y.label = "log10 equity";
    chart.title += " (log10 of equity, which passes the largest double)";
  } else if (hi > 100 * lo) {
    chart.y.log = true;
    chart.y.label = "equity (log scale)";
    chart.title += " (log scale)";
  }
  for (const EquityCurve& c : curves)
    chart.series.push_back({c.name, c.colour, time, values(*c.path)});
  return render(chart);
}

namespace {

// "bars 12 .. 340 (2020-01-01 .. 2020-12-31), 328 bar returns" of a window.
std::string window_text(const WindowCurves& w) {
  return escape_html(w.data_source) + ", bars " + std::to_string(w.first_bar) + " .. " +
         std::to_string(w.last_bar) + " (" +
         escape_html(data::format_iso8601_ms(w.timestamps_ms.front())) + " .. " +
         escape_html(data::format_iso8601_ms(w.timestamps_ms.back())) + "), " +
         std::to_string(w.policy.returns.size()) + " bar returns";
}

// The equity and drawdown charts of the policy and the built-in policies on a window (ids
// prefix + "equity", prefix + "drawdown"), and a line of the built-in policies' metrics.
std::string window_charts(const WindowCurves& w, const std::string& prefix) {
  std::ostringstream out;
  const std::vector<double> time = as_doubles(w.timestamps_ms, w.timestamps_ms.size());
  {
    std::vector<EquityCurve> curves = {{"policy", policy_colour, &w.policy}};
    for (const BaselineCurve& b : w.baselines)
      curves.push_back({b.policy, baseline_colour(b.policy), &b.path});
    out << equity_chart(prefix + "equity",
                        "Equity (E_0 = 1): best policy and the built-in policies", curves, time);
  }
  {
    LineChart chart;
    chart.id = prefix + "drawdown";
    chart.title = "Drawdown: E_t / max(E_0 .. E_t) - 1";
    chart.x = {"time (UTC)", true};
    chart.y.label = "drawdown";
    chart.series.push_back({"policy", policy_colour, time, drawdowns(w.policy)});
    for (const BaselineCurve& b : w.baselines)
      chart.series.push_back({b.policy, baseline_colour(b.policy), time, drawdowns(b.path)});
    out << render(chart);
  }
  out << "<p class=\"meta\">The policy: total return "
      << io::format_metric(w.policy_metrics.total_return) << ", Sharpe "
      << io::format_metric(w.policy_metrics.sharpe) << ", max drawdown "
      << io::format_metric(w.policy_metrics.max_drawdown)
      << ". The built-in policies over the same bars:";
  for (const BaselineCurve& b : w.baselines) {
    out << (&b == &w.baselines.front() ? " " : "; ") << escape_html(b.policy) << " total return "
        << io::format_metric(b.metrics.total_return) << ", Sharpe "
        << io::format_metric(b.metrics.sharpe) << ", max drawdown "
        << io::format_metric(b.metrics.max_drawdown);
  }
  out << ".</p>\n";
  return out.str();
}

}  // namespace

std::string render_html(const RunReport& r) {
  const WindowCurves& v = r.validation;
  std::ostringstream out;
  out << document_head("dqntrader report: " + r.run_directory);
  out << "<h1>dqntrader run report</h1>\n<p class=\"meta\">Run <code>"
      << escape_html(r.run_directory) << "</code>; network " << escape_html(r.network)
      << "; best policy from epoch " << r.best_epoch << " of " << r.epochs.size() << ".</p>\n"
      << "<p class=\"meta\">Validation window: " << window_text(v) << ".</p>\n";
  if (r.test)
    out << "<p class=\"meta\">Test window: " << window_text(*r.test) << ".</p>\n";

  out << "<h2>Best policy on the validation window</h2>\n" << window_charts(v, "");
  {
    LineChart chart;
    chart.id = "position";
    chart.title = "Position held over each bar (p_t)";
    chart.x = {"time (UTC)", true};
    chart.y.label = "position";
    chart.zero_line = true;
    Series s{"policy", policy_colour, as_doubles(v.timestamps_ms, v.policy.positions.size()),
             v.policy.positions, true};
    chart.series.push_back(std::move(s));
    out << render(chart);
  }
  {
    Histogram h;
    h.id = "returns";
    h.title = "Distribution of the policy's bar returns r_t (after costs)";
    h.x.label = "bar return";
    h.values = v.policy.returns;
    h.colour = policy_colour;
    out << render(h);
  }
  if (r.test) {
    out << "<h2 id=\"test\">Best policy on the unseen test window</h2>\n"
        << "<p class=\"meta\">The validation window chose the epoch; these bars came after it "
           "and took no part in any choice, so their numbers carry no selection bias.</p>\n"
        << window_charts(*r.test, "test-");
  }

  out << "<h2>Metrics of the best policy</h2>\n<table id=\"metrics\">\n"
      << "<tr><th>metric</th><th>value</th><th>definition</th></tr>\n";
  const nlohmann::json values = eval::to_json(v.policy_metrics);
  std::size_t count = 0;
  const eval::MetricDefinition* definitions = eval::metric_definitions(count);
  for (std::size_t i = 0; i < count; ++i) {
    out << "<tr data-metric=\"" << definitions[i].key << "\"><td>" << definitions[i].key
        << "</td><td class=\"value\">"
        << escape_html(io::metric_text(values.at(definitions[i].key))) << "</td><td>"
        << escape_html(definitions[i].definition) << "</td></tr>\n";
  }
  out << "</table>\n";

  out << "<h2>Training</h2>\n"
      << epoch_chart(r, "loss", "Mean Huber TD loss per epoch", "loss", &EpochPoint::loss)
      << epoch_chart(r, "mean-q",
                     "Mean online Q of the actions taken in the training batches, per epoch",
                     "mean Q", &EpochPoint::mean_q)
      << epoch_chart(r, "epsilon", "Exploration rate epsilon at the end of each epoch", "epsilon",
                     &EpochPoint::epsilon)
      << epoch_chart(r, "validation-sharpe", "Validation Sharpe ratio per epoch", "Sharpe",
                     &EpochPoint::validation_sharpe)
      << epoch_chart(r, "epoch-seconds", "Wall-clock seconds per epoch (training + validation)",
                     "seconds", &EpochPoint::seconds)
      << "</body>\n</html>\n";
  return out.str();
}

}  // namespace dqntrader::report

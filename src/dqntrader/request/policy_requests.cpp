// The requests that read policies: backtest, act and export.
#include "dqntrader/core/error.hpp"
#include "dqntrader/eval/path_evaluator.hpp"
#include "dqntrader/request/requests.hpp"
#include "dqntrader/request/tables.hpp"
#include "dqntrader/sweep/leaderboard.hpp"

namespace dqntrader::request {

namespace {

// weights: the policy act and export read.
Option weights_option() {
  Option o = option("weights", Kind::text,
                    "policy file (.dqnpolicy), a training run's directory (its best policy) or a "
                    "sweep's directory (its winner's best policy)",
                    "{file}");
  o.required = true;
  return o;
}

// precision: the network arithmetic of a backtest's or act's decisions.
Option precision_option() {
  Option o = option("precision", Kind::choice,
                    "network arithmetic: fp32 (the default: the decision a policy file defines "
                    "and export writes), tf32 or bf16 (faster on CUDA; its decisions may differ "
                    "where Q-values nearly tie)",
                    "fp8", to_string(eval::BacktestConfig{}.precision));
  o.choices = {"fp32", "tf32", "bf16"};
  return o;
}

// symbol: the instrument of a bar file of several; without: what the command reads then.
Option symbol_option(const std::string& without = "the file's one instrument") {
  return option("symbol", Kind::text,
                "the instrument to read from a bar file of several (a CSV file with a symbol "
                "column, one row per instrument and time); default " +
                    without,
                "a b");
}

Option chunk_bars_option() {
  Option o = option("chunk-bars", Kind::whole, "bars per network pass (bounds device memory)", "0",
                    std::to_string(eval::BacktestConfig{}.chunk_bars));
  o.least = 1;
  return o;
}

}  // namespace

Table backtest_table() {
  const eval::BacktestConfig defaults;
  Table t;
  t.command = "backtest";
  t.summary =
      "backtest trained policies (weights) and built-in ones (policy) on bar data, all "
      "together, and give their metrics side by side";
  Option data = option("data", Kind::text,
                       "bar file: CSV or .dqnbars cache; several make one universe (a file of "
                       "one instrument named by its file name's stem)",
                       "{dir}");
  data.repeatable = true;
  data.required = true;
  Option weights = option("weights", Kind::text,
                          std::string("policy file written by dqntrader train (.dqnpolicy); "
                                      "files that share a network and features are evaluated "
                                      "in one pass"),
                          "{file}");
  weights.repeatable = true;
  Option policy = option("policy", Kind::choice,
                         "built-in policy: buy-and-hold, flat or sign-of-ofi", "always-long");
  policy.choices = {"buy-and-hold", "flat", "sign-of-ofi"};
  policy.repeatable = true;
  Option windows = option("windows", Kind::whole,
                          "split the window into this many consecutive walk-forward windows, "
                          "each starting flat",
                          "0", "1");
  windows.least = 1;
  t.options = {
      data,
      symbol_option("every instrument of the file, each backtested on its own bars"),
      weights,
      policy,
      option("start", Kind::text,
             "first bar of the window: a bar index or an ISO-8601 timestamp (the first bar at "
             "or after it; of several instruments, each one's own); default the first bar every "
             "policy can decide at",
             "yesterday"),
      option("end", Kind::text,
             "last bar of the window: a bar index or an ISO-8601 timestamp (the last bar at or "
             "before it); default the last bar",
             "tomorrow"),
      windows,
      option("cost", Kind::number, "fees plus slippage, a fraction of traded notional", "-1",
             train::number_text(defaults.cost)),
      option("bars-per-year", Kind::number,
             "A, for annualising (252 daily equity bars, 98280 US equity minute bars)", "0",
             train::number_text(defaults.bars_per_year)),
      option("risk-free", Kind::number, "risk-free return per bar", "x",
             train::number_text(defaults.risk_free)),
      precision_option(),
      chunk_bars_option(),
  };
  return t;
}

BacktestRequest backtest_request(const Given& given, BarsFrom bars) {
  check(table("backtest"), given);
  BacktestRequest r;
  if (!given.has("weights") && !given.has("policy")) {
    throw InputError("backtest needs at least one policy file (" + field("weights") +
                     ") or built-in policy (" + field("policy") + ")");
  }
  r.data = given.values("data");
  if (bars == BarsFrom::path) {
    for (const std::string& path : r.data)
      check_input("data", path);
  }
  r.symbol = given.text("symbol");
  data::check_symbol("symbol", r.symbol);
  r.weights = given.values("weights");
  for (const std::string& path : r.weights)
    check_input("weights", path);
  for (const std::string& name : given.values("policy"))
    r.run.builtins.push_back(eval::parse_builtin_policy(name));
  r.run.start = given.text("start");
  r.run.end = given.text("end");
  if (given.has("windows"))
    r.run.windows = whole(given.text("windows"));
  eval::BacktestConfig& c = r.run.config;
  if (given.has("cost"))
    c.cost = number(given.text("cost"));
  if (given.has("bars-per-year"))
    c.bars_per_year = number(given.text("bars-per-year"));
  if (given.has("risk-free"))
    c.risk_free = number(given.text("risk-free"));
  if (given.has("precision"))
    c.precision = parse_precision(given.text("precision"));
  if (given.has("chunk-bars"))
    c.chunk_bars = whole(given.text("chunk-bars"));
  eval::validate(c);
  return r;
}

Table act_table() {
  Table t;
  t.command = "act";
  t.summary =
      "a trained policy's decision for the latest bar of the data (its Q-values, the action "
      "and the position to hold from the next bar on), or one per bar of a window carrying the "
      "position as a backtest does";
  Option data = option("data", Kind::text,
                       "bar file: CSV or .dqnbars; - for CSV rows on standard input", "{dir}");
  data.required = true;
  t.options = {
      weights_option(),
      data,
      symbol_option("every instrument of the file, each on its own bars"),
      option("start", Kind::text,
             "decide at every bar from this one (a bar index or an ISO-8601 timestamp) to " +
                 field("end") + ", carrying the position; default the latest bar alone",
             "yesterday"),
      option("end", Kind::text, "the last bar of the window (default the last bar of the data)",
             "tomorrow"),
      option("position", Kind::text,
             "the position held coming into the first decision: a number, or flat, long or "
             "short",
             "sideways", "flat"),
      precision_option(),
      chunk_bars_option(),
  };
  return t;
}

ActRequest act_request(const Given& given, BarsFrom bars) {
  check(table("act"), given);
  ActRequest r;
  r.weights = sweep::policy_path(given.text("weights"));
  check_input("weights", r.weights);
  r.data = given.text("data");
  if (bars == BarsFrom::path && r.data != "-")
    check_input("data", r.data);
  r.symbol = given.text("symbol");
  data::check_symbol("symbol", r.symbol);
  r.start = given.text("start");
  r.end = given.text("end");
  r.position = given.text("position", r.position);
  const eval::BacktestConfig defaults;
  r.precision =
      given.has("precision") ? parse_precision(given.text("precision")) : defaults.precision;
  r.chunk_bars = given.has("chunk-bars") ? whole(given.text("chunk-bars")) : defaults.chunk_bars;
  return r;
}

#if defined(DQNTRADER_WITH_ONNX)
Table export_table() {
  Table t;
  t.command = "export";
  t.summary =
      "write a policy's whole decision as an ONNX model: the recent raw bars and the incoming "
      "position of any number of rows in, their Q-values and greedy actions out "
      "(docs/POLICY.md)";
  Option onnx = option("onnx", Kind::text,
                       "the ONNX model to write (.onnx), or - for standard output", "{dir}");
  onnx.required = true;
  Option inputs = option("inputs", Kind::choice,
                         "float64: the bars in double, the features computed as dqntrader "
                         "computes them (onnxruntime); float32: every input and constant "
                         "float32, the closes in two parts (OpenCV's DNN, TensorRT)",
                         "float16", "float64");
  inputs.choices = {"float64", "float32"};
  t.options = {weights_option(), onnx, inputs};
  return t;
}

ExportRequest export_request(const Given& given) {
  check(table("export"), given);
  ExportRequest r;
  r.weights = sweep::policy_path(given.text("weights"));
  check_input("weights", r.weights);
  r.onnx = given.text("onnx");
  check_output("onnx", r.onnx);
  r.inputs = eval::parse_onnx_inputs(given.text("inputs", "float64"));
  return r;
}
#endif

}  // namespace dqntrader::request

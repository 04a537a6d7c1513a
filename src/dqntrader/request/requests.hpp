// One typed request per command, made from what a caller gave (Given) against the command's
// table (options.hpp). A request's maker owns every check of its options (ranges, choices,
// exclusive options, defaults that depend on the backend) and names the option in its errors
// as a field (core/error.hpp), which each front end spells: `--test-fraction` for the command,
// `test_fraction=` for the Python module. The command files and python/module.cpp only turn
// their caller's arguments into a Given and present the results.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "dqntrader/core/precision.hpp"
#include "dqntrader/data/synthetic.hpp"
#include "dqntrader/eval/backtest_run.hpp"
#include "dqntrader/request/options.hpp"
#include "dqntrader/sweep/sweep_start.hpp"
#include "dqntrader/train/train_config.hpp"
#if defined(DQNTRADER_WITH_ONNX)
#include "dqntrader/eval/onnx_export.hpp"
#endif

namespace dqntrader::request {

/// The tables of the commands the front ends share: train, sweep, backtest, act, export (in a
/// build with ONNX), synth and report.
const std::vector<Table>& tables();
/// The table of command; Error for a command without one.
const Table& table(const std::string& command);

/// dqntrader train: a run's settings (defaults, then --config or the resumed run's config.json,
/// then the settings given), to start or to continue.
struct TrainRequest {
  train::TrainConfig config;
  bool resume = false;  // continue the run in config.out from its newest valid checkpoint
  bool force = false;   // see train::ResumeOptions
};
TrainRequest train_request(const Given& given);

/// dqntrader sweep: a new sweep's plan request, or the directory of one to continue.
struct SweepRequest {
  std::string resume;  // non-empty: continue the sweep in this directory as it was planned
  sweep::SweepRequest plan;
};
SweepRequest sweep_request(const Given& given);

/// The bars of a backtest or of act: a file's path, or bars the caller holds in memory (the
/// Python module's Bars), which are not read from a path.
enum class BarsFrom { path, memory };

/// dqntrader backtest.
struct BacktestRequest {
  std::vector<std::string> data;  // the bar files (BarsFrom::path: data::load_panel)
  std::string symbol;             // their instrument, of several (data::BarSelection)
  std::vector<std::string> weights;
  eval::BacktestRequest run;
};
BacktestRequest backtest_request(const Given& given, BarsFrom bars = BarsFrom::path);

/// dqntrader act: decisions at the latest bar (start and end empty) or over a window.
struct ActRequest {
  std::string weights;  // the policy file (of a run's or a sweep's directory, when given one)
  std::string data;     // "-" for CSV rows on standard input
  std::string symbol;   // its instrument, of several (data::BarSelection)
  std::string start, end, position = "flat";
  Precision precision = Precision::fp32;
  std::size_t chunk_bars = 0;
};
ActRequest act_request(const Given& given, BarsFrom bars = BarsFrom::path);

#if defined(DQNTRADER_WITH_ONNX)
/// dqntrader export.
struct ExportRequest {
  std::string weights;  // the policy file (of a run's or a sweep's directory, when given one)
  std::string onnx;     // "-" for standard output
  eval::OnnxInputs inputs = eval::OnnxInputs::float64;
};
ExportRequest export_request(const Given& given);
#endif

/// dqntrader synth: the synthetic market's settings.
struct SynthRequest {
  data::SynthConfig config;
};
SynthRequest synth_request(const Given& given);

/// dqntrader report.
struct ReportRequest {
  std::string run;   // a run's or a sweep's directory
  std::string out;   // the HTML file ("-" for standard output); default RUN/report.html
  std::string data;  // the bar file, when it has moved since training
};
ReportRequest report_request(const Given& given);

/// InputError naming the option and the path when path is empty or a directory: an input
/// file is meant (a bar file, a policy file).
void check_input(const std::string& option, const std::string& path);

/// InputError naming the option when path is empty, or when what exists of it (path itself, or
/// its nearest existing parent) is not a directory: a run's or a sweep's directory is meant.
void check_directory(const std::string& option, const std::string& path);

/// InputError naming the option unless path is "-" or a path a file can be written to
/// (io::resolve_output): checked before any work, so that a bad output path costs nothing.
void check_output(const std::string& option, const std::string& path);

}  // namespace dqntrader::request

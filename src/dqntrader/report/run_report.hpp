// The run report: one self-contained HTML file (inline CSS and SVG, no script, no external
// resource) about a training run directory: the best policy on the validation window against
// the built-in baselines (equity and drawdown beside buy-and-hold, flat and, with ofi,
// sign-of-ofi; the policy's position and distribution of bar returns), the same on the unseen
// test window when the run held one out (equity and drawdown), the per-epoch
// training curves (loss, mean Q, epsilon, validation Sharpe, epoch time) and the metrics
// table with each metric's definition.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dqntrader/core/types.hpp"
#include "dqntrader/eval/metrics_engine.hpp"
#include "dqntrader/eval/window_metrics.hpp"

namespace dqntrader::report {

/// One line of metrics.jsonl (with its timings.jsonl seconds); NaN where the run recorded none.
struct EpochPoint {
  double epoch = 0, loss = 0, mean_q = 0, epsilon = 0, validation_sharpe = 0;
  double seconds = 0;  // training plus validation
};

/// A built-in policy on the validation window.
struct BaselineCurve {
  std::string policy;  // buy-and-hold, flat, sign-of-ofi
  eval::PathDetail path;
  eval::WindowMetrics metrics;
};

/// A policy and the built-in policies on one window of bars.
struct WindowCurves {
  std::string data_source;                  // where the window's bars came from
  std::size_t first_bar = 0, last_bar = 0;  // the window, as bar indices
  std::vector<std::int64_t> timestamps_ms;  // the window's bars: E_0 .. E_N are at these times
  eval::PathDetail policy;
  eval::WindowMetrics policy_metrics;
  std::vector<BaselineCurve> baselines;  // buy-and-hold, flat and, with ofi, sign-of-ofi
};

struct RunReport {
  std::string run_directory;
  std::string network;               // e.g. "9-128-128-3, fp32"
  std::size_t best_epoch = 0;        // the epoch best.dqnpolicy was saved after
  WindowCurves validation;           // the best policy on the validation window
  std::optional<WindowCurves> test;  // and on the test window, when the run holds one out
  std::vector<EpochPoint> epochs;
};

/// A run directory's metrics.jsonl with each epoch's seconds from timings.jsonl; InputError
/// (file, line, column) for a malformed record, or when no epoch is recorded.
std::vector<EpochPoint> read_epochs(const std::string& run_directory);

/// Reads run_directory (config.json, metrics.jsonl, timings.jsonl, best.dqnpolicy), loads the run's
/// data again (data_override replaces the data file's path when it is not empty; the data must be
/// what the run trained on) and evaluates the best policy and the built-in policies on the
/// validation window, and on the test window when the run has one, on the device. InputError for a
/// missing or malformed file.
RunReport collect_run_report(const ExecSpace& space, const std::string& run_directory,
                             const std::string& data_override = "");

/// The HTML document.
std::string render_html(const RunReport& report);

}  // namespace dqntrader::report

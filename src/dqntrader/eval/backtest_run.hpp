// A backtest of trained policies (policy files) and built-in ones over a window of bars cut into
// walk-forward windows: every policy's metrics on every window and, when asked, its per-bar
// path. `dqntrader backtest` and the Python module's backtest() both run it.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dqntrader/core/types.hpp"
#include "dqntrader/data/bars.hpp"
#include "dqntrader/eval/backtest_config.hpp"
#include "dqntrader/eval/metrics_engine.hpp"
#include "dqntrader/eval/path_evaluator.hpp"
#include "dqntrader/eval/policy_file.hpp"
#include "dqntrader/eval/window_metrics.hpp"

namespace dqntrader::eval {

/// Policy files read for a backtest, checked to share an action set, with the bar columns their
/// features need beyond the standard ones and the bars their features need before the first
/// decision.
struct BacktestPolicies {
  std::vector<std::string> paths;
  std::vector<PolicyFile> files;
  data::BarSelection columns;
  std::size_t warmup = 0;
};
BacktestPolicies read_backtest_policies(const std::vector<std::string>& paths);

struct BacktestRequest {
  std::vector<BuiltinPolicy> builtins;
  // The window's first and last bar, as bar indices or ISO-8601 timestamps (empty: the first
  // bar every policy can decide at, the last bar); messages name them as the fields start and
  // end.
  std::string start, end;
  std::size_t windows = 1;  // consecutive walk-forward windows, each starting flat
  BacktestConfig config;    // its positions are the policy files' (set by run_backtest)
  bool paths = false;       // also each policy's per-bar path (BacktestResult::details)
};

struct BacktestResult {
  std::vector<std::string> names;  // the policy files' paths, then the built-ins' names
  std::vector<BarRange> windows;
  std::vector<std::vector<WindowMetrics>> metrics;  // [window][policy]
  std::vector<std::vector<PathDetail>> details;     // [window][policy]; empty without paths
  BacktestConfig config;                            // as it ran
};

/// Backtests policies and request.builtins on bars (which must hold policies.columns) over the
/// window the request names, policy files that share a network and features in one pass.
/// InputError for no policy at all, a bad window, bars too few or lacking a feature's column.
BacktestResult run_backtest(const ExecSpace& space, const data::Bars& bars,
                            const BacktestPolicies& policies, const BacktestRequest& request);

/// The backtest of every instrument of a panel, each on its own bars over the window the
/// request names (bounds given as timestamps cut each at the same times; as bar indices, each
/// its own bars), in the panel's order. Of a panel of several, an instrument's InputError is
/// prefixed with its bars' source ("path[symbol]").
std::vector<BacktestResult> run_backtest(const ExecSpace& space, const data::Panel& panel,
                                         const BacktestPolicies& policies,
                                         const BacktestRequest& request);

/// The metrics as `backtest --json` writes them: one object per policy and window, {"policy",
/// "window": {"first_bar", "last_bar"}, "metrics"}.
nlohmann::json to_json(const BacktestResult& result);

/// The same of every instrument of a panel, in order, each object with its "symbol" where the
/// panel holds several.
nlohmann::json to_json(const data::Panel& panel, const std::vector<BacktestResult>& results);

}  // namespace dqntrader::eval

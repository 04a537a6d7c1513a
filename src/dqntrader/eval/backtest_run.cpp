#include "dqntrader/eval/backtest_run.hpp"

#include <algorithm>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/transfer.hpp"
#include "dqntrader/data/features.hpp"
#include "dqntrader/eval/backtest_evaluator.hpp"
#include "dqntrader/eval/metrics_json.hpp"

namespace dqntrader::eval {

namespace {

// The window from .. to (by default from the first bar every policy can decide at to the
// last), cut into `count` consecutive walk-forward windows.
std::vector<BarRange> backtest_windows(const BacktestRequest& r, const data::Bars& bars,
                                       std::size_t warmup) {
  const std::size_t first =
      r.start.empty() ? warmup : data::bar_index(field("start"), r.start, bars, true);
  const std::size_t last =
      r.end.empty() ? bars.size() - 1 : data::bar_index(field("end"), r.end, bars, false);
  if (first < warmup) {
    throw InputError(field("start") + " " + r.start + " selects bar " + std::to_string(first) +
                     ", before bar " + std::to_string(warmup) +
                     ", the first at which the policies' features are defined");
  }
  if (last < first) {
    throw InputError(field("start") + " " + (r.start.empty() ? std::to_string(first) : r.start) +
                     " (bar " + std::to_string(first) + ") comes after " + field("end") + " " +
                     (r.end.empty() ? std::to_string(last) : r.end) + " (bar " +
                     std::to_string(last) + ")");
  }
  const std::size_t span = last - first + 1;
  if (r.windows == 0)
    throw InputError(field("windows") + " 0: a backtest needs at least one window");
  if (span < 2 * r.windows) {
    throw InputError((r.windows > 1 ? field("windows") + " " + std::to_string(r.windows) + ": "
                                    : field("start") + "/" + field("end") + ": ") +
                     "bars " + std::to_string(first) + " .. " + std::to_string(last) + " hold " +
                     std::to_string(span) + " bar(s); a window needs at least 2");
  }
  std::vector<BarRange> windows;
  for (std::size_t w = 0; w < r.windows; ++w)
    windows.push_back({first + w * span / r.windows, first + (w + 1) * span / r.windows});
  return windows;
}

}  // namespace

BacktestPolicies read_backtest_policies(const std::vector<std::string>& paths) {
  BacktestPolicies out;
  for (const std::string& path : paths) {
    out.paths.push_back(path);
    out.files.push_back(read_policy(path));
    const PolicyFile& file = out.files.back();
    if (!out.files.front().positions.empty() && file.positions != out.files.front().positions) {
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

BacktestResult run_backtest(const ExecSpace& space, const data::Bars& bars,
                            const BacktestPolicies& policies, const BacktestRequest& request) {
  if (policies.files.empty() && request.builtins.empty())
    throw InputError("a backtest needs at least one policy file or built-in policy");
  BacktestResult out;
  out.config = request.config;
  if (!policies.files.empty())
    out.config.positions = policies.files.front().positions;
  validate(out.config);
  if (bars.size() < 2)
    throw InputError(bars.source, 0, 0, "a backtest needs at least 2 bars");
  for (const PolicyFile& file : policies.files)
    data::check_features_available(file.features, bars, 2);
  out.windows = backtest_windows(request, bars, policies.warmup);
  out.names = policies.paths;
  for (const BuiltinPolicy p : request.builtins)
    out.names.emplace_back(to_string(p));

  // The policy files in groups that share an evaluator (one evaluate_many pass each), then
  // the built-ins.
  const std::size_t count = out.names.size();
  const std::vector<PolicyFile>& files = policies.files;
  out.metrics.assign(out.windows.size(), std::vector<WindowMetrics>(count));
  if (request.paths)
    out.details.assign(out.windows.size(), std::vector<PathDetail>(count));
  std::vector<const PolicyFile*> pointers;
  for (const PolicyFile& file : files)
    pointers.push_back(&file);
  for (const std::vector<std::size_t>& group : evaluator_groups(pointers)) {
    const PolicyFile& file = files[group.front()];
    std::vector<float> rows;
    for (std::size_t j : group)  // one network: parameter vectors of one length
      rows.insert(rows.end(), files[j].parameters.begin(), files[j].parameters.end());
    const auto device = upload(space, rows, "dqntrader::eval::backtest_parameters");
    const ParameterRows parameters =
        parameter_rows(device.data(), group.size(), file.parameters.size());
    const data::FeatureSet features(space, bars, file.features);
    for (std::size_t w = 0; w < out.windows.size(); ++w) {
      BacktestEvaluator evaluator(space, features, file.stats, file.network, out.windows[w],
                                  out.config, group.size());
      const std::vector<WindowMetrics> m = evaluator.evaluate_many(parameters);
      for (std::size_t g = 0; g < group.size(); ++g) {
        out.metrics[w][group[g]] = m[g];
        if (request.paths) {
          out.details[w][group[g]] = evaluator.path_detail(
              Parameters(device.data() + g * file.parameters.size(), file.parameters.size()));
        }
      }
    }
  }
  const std::vector<BuiltinRun> builtins =
      evaluate_builtins(space, bars, request.builtins, out.windows, out.config, request.paths);
  for (std::size_t b = 0; b < builtins.size(); ++b) {
    for (std::size_t w = 0; w < out.windows.size(); ++w) {
      out.metrics[w][files.size() + b] = builtins[b].metrics[w];
      if (request.paths)
        out.details[w][files.size() + b] = builtins[b].details[w];
    }
  }
  return out;
}

std::vector<BacktestResult> run_backtest(const ExecSpace& space, const data::Panel& panel,
                                         const BacktestPolicies& policies,
                                         const BacktestRequest& request) {
  std::vector<BacktestResult> results;
  data::for_each_instrument(panel, [&](const data::Bars& bars) {
    results.push_back(run_backtest(space, bars, policies, request));
  });
  return results;
}

nlohmann::json to_json(const BacktestResult& result) {
  nlohmann::json json = nlohmann::json::array();
  for (std::size_t w = 0; w < result.windows.size(); ++w) {
    for (std::size_t k = 0; k < result.names.size(); ++k) {
      json.push_back(
          {{"policy", result.names[k]},
           {"window",
            {{"first_bar", result.windows[w].begin}, {"last_bar", result.windows[w].end - 1}}},
           {"metrics", to_json(result.metrics[w][k])}});
    }
  }
  return json;
}

nlohmann::json to_json(const data::Panel& panel, const std::vector<BacktestResult>& results) {
  nlohmann::json json = nlohmann::json::array();
  for (std::size_t s = 0; s < results.size(); ++s) {
    for (nlohmann::json& object : to_json(results[s])) {
      if (panel.size() > 1)
        object["symbol"] = panel.symbols[s];
      json.push_back(std::move(object));
    }
  }
  return json;
}

}  // namespace dqntrader::eval

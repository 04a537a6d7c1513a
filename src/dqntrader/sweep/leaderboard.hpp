// A sweep's leaderboards, DIR/leaderboard.csv and DIR/leaderboard.json: one row per member
// (its varied settings, seed, status, the validation metrics of its best epoch and, with a
// test window, that policy's metrics there: reported, never ranked by), best validation
// Sharpe first, and one row per combination of settings aggregated over its seeds
// (mean, standard deviation and minimum of their best validation Sharpe), best mean first.
// Members that failed or have not run rank last.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "dqntrader/sweep/sweep_plan.hpp"

namespace dqntrader::sweep {

/// {"members": [...], "combinations": [...]}, each sorted, and, once the sweep has finished,
/// "selection" (selection.hpp).
nlohmann::json leaderboard_json(const SweepPlan& plan);

/// The same rows as CSV, member rows then combination rows, a column "row" telling them
/// apart (columns that do not apply to a row are empty).
std::string leaderboard_csv(const SweepPlan& plan);

/// Writes both files into the sweep's directory, atomically.
void write_leaderboards(const SweepPlan& plan);

/// The policy file a path names: a sweep's directory its winner's (the leaderboard's first
/// member's) best.dqnpolicy, a training run's directory its best.dqnpolicy, any other path
/// itself. InputError for a sweep no member of which finished, or a directory that is neither.
std::string policy_path(const std::string& path);

}  // namespace dqntrader::sweep

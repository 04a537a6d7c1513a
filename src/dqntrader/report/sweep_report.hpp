// The sweep report: one self-contained HTML file (inline CSS and SVG, no script, no external
// resource) about a sweep directory (dqntrader sweep): every member's validation Sharpe over
// its epochs, each swept setting against the members' best validation Sharpe (one scatter
// chart per setting), the leaderboards (members and combinations of settings over their
// seeds), the best member's best policy on the validation window against buy-and-hold and,
// with a schedule, what it did: the lineage of population based training (who copied whom
// after which epoch) with the winner's schedule of settings, or successive halving's rungs.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "dqntrader/core/types.hpp"
#include "dqntrader/report/run_report.hpp"
#include "dqntrader/sweep/search_space.hpp"

namespace dqntrader::report {

struct SweepMemberRow {
  std::size_t rank = 0;  // 1-based, as the leaderboard ranks it
  std::string member;    // m-0000
  std::uint64_t seed = 0;
  std::vector<std::pair<std::string, std::string>> settings;  // the swept settings' values
  std::string status;
  std::size_t best_epoch = 0;
  double validation_sharpe = 0, total_return = 0, max_drawdown = 0;  // of its best epoch
  double test_sharpe = 0;          // the same policy on the test window (NaN without one)
  std::vector<EpochPoint> epochs;  // empty for a member that has not run
  // What the sweep's schedule did to it (sweep.json's "schedule": by epoch, whom it copied
  // and its settings after, or that it stopped).
  nlohmann::json schedule = nlohmann::json::array();
};

/// The winner's settings as its weights lived them: at each epoch, the member whose slot
/// trained those weights then (following the copies back from the winner) and the settings it
/// trained them with.
struct AncestorEpoch {
  std::size_t epoch = 0;
  std::string member;
  std::vector<std::pair<std::string, std::string>> settings;
};

struct SweepCombinationRow {
  std::size_t rank = 0, members = 0, finished = 0;
  std::vector<std::pair<std::string, std::string>> settings;
  double mean = 0, stdev = 0, minimum = 0;  // of its members' best validation Sharpe
};

struct SweepReport {
  std::string directory;
  std::vector<sweep::Axis> axes;  // the swept settings
  std::size_t populations = 0;
  std::vector<SweepMemberRow> members;            // best first
  std::vector<SweepCombinationRow> combinations;  // best mean first
  bool has_best = false;                          // a member finished: best holds its run's report
  RunReport best;
  nlohmann::json selection;       // the sweep's selection statistics (null before it has finished)
  std::string schedule = "none";  // the sweep's schedule: none, pbt or halving
};

/// The best member's ancestry (its weights' history) epoch by epoch, from its records and the
/// schedule's copies; empty without members that ran.
std::vector<AncestorEpoch> winner_ancestry(const SweepReport& report);

/// Reads the sweep's plan (sweep.json) and its members' records (metrics.jsonl,
/// timings.jsonl) and evaluates the best member's best policy and buy-and-hold on the
/// validation window on the device (data_override as for a run report). InputError for a
/// missing or malformed file.
SweepReport collect_sweep_report(const ExecSpace& space, const std::string& directory,
                                 const std::string& data_override = "");

/// The HTML document.
std::string render_html(const SweepReport& report);

}  // namespace dqntrader::report

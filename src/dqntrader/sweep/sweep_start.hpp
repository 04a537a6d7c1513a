// A sweep from what its caller asked (`dqntrader sweep`'s options, or the Python module's
// sweep()): the plan of a new sweep, checked before anything is written, or the plan of one to
// continue, its data checked; and the sweep's last lines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "dqntrader/sweep/schedule.hpp"
#include "dqntrader/sweep/search_space.hpp"
#include "dqntrader/sweep/sweep_plan.hpp"
#include "dqntrader/train/train_config.hpp"

namespace dqntrader::sweep {

struct SweepRequest {
  train::TrainConfig base;  // the settings every member starts from; out is the sweep's directory
  bool out_given = false;   // a sweep has no default directory
  SearchSpace space;        // from a space file (its base already in base), or empty
  std::vector<std::string> sets;      // NAME=V1,V2,... or NAME=LO:HI[:log], added to the space
  std::optional<std::string> seeds;   // "1-8", "1,3,5"
  std::optional<std::size_t> random;  // draws instead of the grid
  std::optional<std::uint64_t> random_seed;
  std::optional<std::size_t> population;  // members trained together at most; none: as memory holds
  std::size_t ranks = 1;  // the processes that will share the populations (MPI ranks)
  std::size_t pbo_blocks = 16;
  ScheduleSettings schedule;
  std::optional<std::string> perturb;  // pbt's two factors, "0.8,1.2"
  // The schedule's options the caller gave, by their names (pbt-interval, halving-rate):
  // each must belong to the schedule's kind.
  std::vector<std::string> schedule_options;
};

/// The plan of a new sweep (not yet written): InputError naming what is wrong (no data, no
/// directory, a directory that holds a sweep or a run, a bad space or schedule).
SweepPlan plan_sweep(SweepRequest request);

/// The plan of the sweep in directory, to continue it: InputError when its data are not the
/// data it was planned on; populations whose finished members' files were lost or changed are
/// reopened (one line each to log).
SweepPlan reopen_sweep(const std::string& directory, std::ostream& log);

/// The sweep's last lines: the best members and settings, the selection statistics (measured
/// in selection_seconds) and where the leaderboards are.
void print_leaders(const SweepPlan& plan, double selection_seconds, std::ostream& out);

}  // namespace dqntrader::sweep

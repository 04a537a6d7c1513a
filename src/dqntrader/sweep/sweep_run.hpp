// Running a sweep's plan: its populations one after another on one device (or, with MPI,
// handed out to ranks: dist/), each member's results recorded in sweep.json as its population
// finishes, and the leaderboards at the end. A population that has checkpoints continues from
// its newest; a finished one is not run again.
#pragma once

#include <cstddef>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "dqntrader/core/types.hpp"
#include "dqntrader/sweep/sweep_plan.hpp"
#include "dqntrader/train/training_run.hpp"

namespace dqntrader::io {
class BackgroundWriter;
class SnapshotPool;
}  // namespace dqntrader::io

namespace dqntrader::sweep {

/// The schedule of population p of plan (plan.schedule, which must not be none), as
/// train::PopulationOptions takes it: at each decision, the members copied to take their
/// sources' state and their new settings, and the members halving stops stop; each member's
/// step records whom it copied (its run directory, relative to the sweep's) and its scheduled
/// settings after, or {"stopped": "halving"}. plan must outlive it.
std::function<std::vector<train::ScheduleStep>(std::size_t, const std::vector<double>&,
                                               const std::vector<bool>&, train::DqnTrainer&)>
population_schedule(const SweepPlan& plan, std::size_t p);

/// Trains population p of plan (continuing from its checkpoints when it has any) and returns
/// its members' results, in the population's member order. Writes only the members' run
/// directories and the population's checkpoints: through writer when given (they may still be
/// on their way to the disk when it returns), else before it returns; its checkpoints copied
/// from the device into snapshots' pinned memory when given (a pool that outlives writer's
/// batches), else into the population's own; its bars and baselines from shared where an
/// earlier population's settings loaded the same (a sweep's, kept across its populations);
/// on_epoch (if given) after
/// each epoch. A population that cannot train (InputError: its data or settings) gives every
/// member the status failed, with the message; device and file-system failures are thrown.
std::vector<MemberResult> run_planned_population(
    const ExecSpace& space, const SweepPlan& plan, std::size_t p,
    const std::function<void(std::size_t epoch, std::size_t epochs)>& on_epoch = {},
    const std::function<bool()>& interrupted = {}, io::BackgroundWriter* writer = nullptr,
    io::SnapshotPool* snapshots = nullptr, train::SharedInputs* shared = nullptr);

/// The results of population p when it failed as a whole (why): each member failed, saying why.
std::vector<MemberResult> failed_population(const SweepPlan& plan, std::size_t p,
                                            const std::string& why);

/// Records population p's results in plan (its members' entries; the population finished
/// unless finished is false: a population a device or file-system failure stopped, which a
/// resume trains again), writes sweep.json (through writer when given: after what was handed
/// to it before) and returns the line about it: its members, how they ended, its best member
/// and the seconds it took.
std::string record(SweepPlan& plan, std::size_t p, const std::vector<MemberResult>& results,
                   double seconds, io::BackgroundWriter* writer = nullptr, bool finished = true);

/// Runs every population of plan that has not finished, in order, on space: sweep.json after
/// each, the leaderboards at the end; a progress bar on a terminal (log being std::cerr) and
/// one line per finished population to log. interrupted, when given, is asked before every
/// step: true stops the sweep there with Interrupted (what finished is recorded; the population
/// it stopped continues from its last checkpoint on resume).
void run_sweep(const ExecSpace& space, SweepPlan& plan, std::ostream& log,
               const std::function<bool()>& interrupted = {});

}  // namespace dqntrader::sweep

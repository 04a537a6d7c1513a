// Sweeps across ranks: `mpirun -np N dqntrader sweep ...` (or `srun`), one rank per GPU. Rank 0
// and every other rank plan the same sweep from the same flags; rank 0's plan is the one
// kept, after a check that every rank sees the sweep directory as the same directory (a token
// file rank 0 writes there, which every rank reads). Rank 0 writes sweep.json, hands out the
// populations as ranks become free (and trains populations itself between hand-outs), records
// each finished population's results as they arrive (a few hundred bytes each) and writes the
// leaderboards; each rank writes its own members' run directories. A population that fails on
// a rank (a device or file-system failure) fails its members, which the leaderboard marks, and
// the others go on; --resume, with any number of ranks, runs what did not finish (those
// populations included).
//
// Built with DQNTRADER_ENABLE_MPI this is dist/mpi_dist.cpp, the only code that calls MPI;
// without it, dist/single_rank.cpp: one rank, the sweep as sweep::run_sweep runs it.
#pragma once

#include <functional>
#include <iosfwd>
#include <string>

#if defined(DQNTRADER_WITH_MPI)
#include <mpi.h>
#endif

#include "dqntrader/core/types.hpp"
#include "dqntrader/sweep/sweep_plan.hpp"

namespace dqntrader::dist {

struct Ranks {
  int rank = 0, size = 1;
  int local_rank = 0;  // among the ranks of this node
};

/// The ranks a sweep runs across, for this process's lifetime of it. At most one at a time.
class Session {
 public:
  /// Starts MPI (MPI_Init_thread, asking for MPI_THREAD_MULTIPLE) when distributed is true (the
  /// sweep command) and the build has MPI, the sweep's ranks those of MPI_COMM_WORLD; finalizes
  /// it on destruction. Error when there are several ranks and MPI gives fewer threads.
  Session(int* argc, char*** argv, bool distributed);
#if defined(DQNTRADER_WITH_MPI)
  /// For a caller that runs MPI itself: the sweep's ranks are those of comm (a communicator of
  /// its own is duplicated from it, and freed on destruction; MPI stays started). Error when MPI
  /// has not been started, or there are several ranks and it was started without
  /// MPI_THREAD_MULTIPLE.
  explicit Session(MPI_Comm comm);
#endif
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

 private:
  bool m_finalize = false;
};

/// The MPI library the build uses (its own words), or that the build has none.
std::string library_description();

/// This process's place among the ranks: one rank of one unless a Session started MPI.
const Ranks& ranks();

/// The GPU a rank takes when --device is not given: its node-local rank modulo the node's
/// devices (ranks beyond the node's GPUs share them).
inline int device_of(const Ranks& ranks, int devices) {
  return devices > 0 ? ranks.local_rank % devices : 0;
}

/// Every rank calls this with the plan it made (or read, for --resume) from its own flags.
/// Checks that every rank's plan.directory is one directory (rank 0 creates it; Error naming
/// the first rank that does not see it, with nothing left behind), has rank 0 call
/// write_first (sweep.json and its summary; a failure there reaches every rank) and returns
/// rank 0's plan, with this rank's directory.
sweep::SweepPlan share_plan(const sweep::SweepPlan& plan,
                            const std::function<void(const sweep::SweepPlan&)>& write_first);

/// Runs the plan's unfinished populations: on one rank as sweep::run_sweep does; on several,
/// rank 0 hands them out one at a time as ranks ask, trains populations itself, records every
/// result in plan and sweep.json, prints one line a population to log and writes the
/// leaderboards; on the others plan is left as it was. A population that fails on a rank fails
/// its members (sweep::failed_population) and stays unfinished; a rank that fails otherwise
/// ends the job.
/// interrupted (asked before every step) stops a sweep of one rank (sweep::run_sweep).
void run_sweep(const ExecSpace& space, sweep::SweepPlan& plan, std::ostream& log,
               const std::function<bool()>& interrupted = {});

/// A planned sweep run to its end, as `dqntrader sweep` runs it: every rank shares rank 0's
/// plan (written by rank 0 for a new sweep, resuming = false), rank 0 holds the directory's
/// lock throughout, the populations run (run_sweep), and rank 0 measures the selection
/// statistics, writes sweep.json and the leaderboards and prints the last lines to log.
/// Error when no member finished. Returns the plan as it ended (rank 0's).
sweep::SweepPlan run_whole_sweep(const ExecSpace& space, const sweep::SweepPlan& plan,
                                 bool resuming, std::ostream& log,
                                 const std::function<bool()>& interrupted = {});

}  // namespace dqntrader::dist

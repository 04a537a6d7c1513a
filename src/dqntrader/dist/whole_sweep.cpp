// A planned sweep run to its end on every rank (dist.hpp: run_whole_sweep).
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <ostream>

#include "dqntrader/core/error.hpp"
#include "dqntrader/dist/dist.hpp"
#include "dqntrader/io/atomic_file.hpp"
#include "dqntrader/sweep/leaderboard.hpp"
#include "dqntrader/sweep/selection.hpp"
#include "dqntrader/sweep/sweep_lock.hpp"
#include "dqntrader/sweep/sweep_start.hpp"

namespace dqntrader::dist {

sweep::SweepPlan run_whole_sweep(const ExecSpace& space, const sweep::SweepPlan& planned,
                                 bool resuming, std::ostream& log,
                                 const std::function<bool()>& interrupted) {
  // Every rank has planned the same sweep (under MPI; one rank otherwise): rank 0's plan is
  // kept, and only rank 0 writes it.
  // Rank 0 holds the directory's lock for the sweep's life: a second process on the same
  // directory (a second start, a --resume while this one runs) is refused.
  std::optional<sweep::SweepLock> lock;
  sweep::SweepPlan plan =
      share_plan(planned, [resuming, &lock, &log](const sweep::SweepPlan& first) {
        if (resuming) {
          lock.emplace(first.directory);
          log << "dqntrader sweep: continuing " << first.directory << "\n";
          return;
        }
        std::error_code error;
        std::filesystem::create_directories(first.directory, error);
        if (error) {
          throw Error("cannot create the sweep directory '" + first.directory +
                      "': " + error.message());
        }
        lock.emplace(first.directory);
        if (std::filesystem::exists(first.directory + "/sweep.json")) {
          throw InputError(first.directory + " holds a sweep already: continue it with " +
                           field("resume") + " " + first.directory + ", or choose another " +
                           field("out"));
        }
        sweep::write_plan(first);
        const std::size_t seeds = first.space.seeds.empty() ? 1 : first.space.seeds.size();
        log << "dqntrader sweep: " << first.members.size() << " members ("
            << first.combinations.size() << " combinations x " << seeds << " seeds) in "
            << first.populations.size() << " populations of at most " << first.most << " members"
            << (first.schedule.kind == "pbt"       ? ", population based training in each"
                : first.schedule.kind == "halving" ? ", successive halving in each"
                                                   : "")
            << "; " << first.directory << "\n";
      });
  run_sweep(space, plan, log, interrupted);
  if (ranks().rank == 0) {
    // Every population has finished: how much of the winner is luck, measured once.
    const auto start = std::chrono::steady_clock::now();
    plan.selection = sweep::selection_json(space, plan);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!plan.timings.is_object())
      plan.timings = nlohmann::json::object();
    plan.timings["selection_seconds"] = seconds;
    io::write_file_atomically(plan.directory + "/timings.json", plan.timings.dump(2) + "\n");
    sweep::write_plan(plan);
    sweep::write_leaderboards(plan);
    sweep::print_leaders(plan, seconds, log);
    if (std::all_of(plan.members.begin(), plan.members.end(),
                    [](const sweep::MemberPlan& m) { return m.result.status == "failed"; })) {
      throw Error("no member of the sweep finished: every one of its " +
                  std::to_string(plan.members.size()) +
                  " members failed (sweep.json gives each one's failure)");
    }
  }
  return plan;
}

}  // namespace dqntrader::dist

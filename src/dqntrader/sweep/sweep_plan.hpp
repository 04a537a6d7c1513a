// A sweep's plan, kept in DIR/sweep.json: the shared settings, the space, every member (a
// combination of the space's values and a seed) with its run directory, the populations the
// members are trained in (members that share every setting but their own, at most a given
// number together) and, as populations finish, each member's status and results.
//
//   DIR/sweep.json                 this plan
//   DIR/members/m-<id>/            each member's run directory (the format of dqntrader train)
//   DIR/populations/p-<id>/        each population's checkpoints (for --resume)
//   DIR/timings.json               where the sweep's time went (the last process's)
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dqntrader/sweep/schedule.hpp"
#include "dqntrader/sweep/search_space.hpp"
#include "dqntrader/train/train_config.hpp"
#include "dqntrader/train/training_run.hpp"

namespace dqntrader::sweep {

/// What a member's run came to, once its population has finished.
struct MemberResult {
  std::string status = "pending";  // pending, finished, stopped early, failed
  std::size_t epochs = 0, best_epoch = 0;
  double validation_sharpe = 0;  // of its best epoch (mean over the validation windows)
  double last_sharpe = 0;        // of its last epoch
  nlohmann::json best = nlohmann::json::object();  // its best epoch's validation metrics
  // The same policy's metrics on the test window, looked at once when its run ended (empty
  // without a test window): reported beside the ranking, never used for it.
  nlohmann::json test = nlohmann::json::object();
  std::string failure;
  // Why its population was trained again from the start, when its checkpoints could not be
  // resumed from (empty otherwise).
  std::string restarted;
  // The checkpoints its population's resume skipped, and why (empty when it skipped none).
  std::string skipped;
  // Its run directory's files as its population left them: name -> {"bytes", "checksum"}
  // (member_files), which a resume checks.
  nlohmann::json files = nlohmann::json::object();
  // What the sweep's schedule did to it, by epoch (train::RunResult::schedule): whom it copied
  // and its settings after, or that it stopped; empty without a schedule.
  nlohmann::json schedule = nlohmann::json::array();
  // Where its population's time went (where this process ran it; not kept in sweep.json).
  train::RunPhases phases;
};

struct MemberPlan {
  std::size_t id = 0, combination = 0, population = 0;
  std::uint64_t seed = 1;
  std::string run;  // its run directory, relative to the sweep's
  MemberResult result;
};

struct PopulationPlan {
  std::size_t id = 0;
  std::vector<std::size_t> members;
  std::string checkpoints;  // relative to the sweep's directory
  bool finished = false;
};

struct SweepPlan {
  std::string directory;
  nlohmann::json base;  // every shared setting (settings_json)
  SearchSpace space;
  std::vector<Combination> combinations;
  std::vector<MemberPlan> members;
  std::vector<PopulationPlan> populations;
  std::size_t most = 1;         // members per population at most
  std::size_t pbo_blocks = 16;  // row blocks of the selection's cross-validation (even)
  ScheduleSettings schedule;    // what each population does between epochs
  // The data the sweep was planned on (train::fingerprint_text of the bars it learns and
  // validates on, and of its test window's; empty when it has none): a resume on other data
  // is refused.
  std::string data_fingerprint, test_fingerprint;
  // The selection statistics over the members' best policies (selection_json), once every
  // population has finished; null before.
  nlohmann::json selection;
  // Where this process's time in the sweep went: populations, the wait for their files, the
  // selection statistics (the sweep's timings.json; wall-clock, so not in sweep.json, whose
  // content the sweep's settings decide).
  nlohmann::json timings;
};

/// Plans a sweep of every combination of space times every seed (the base's seed when it
/// lists none) into directory, members grouped by every setting but their own into
/// populations of at most `most`. InputError when a member's settings are invalid or members
/// of one population cannot train together (naming the setting).
SweepPlan make_plan(const train::TrainConfig& base, const SearchSpace& space,
                    const std::string& directory, std::size_t most);

/// Member m's settings.
train::TrainConfig member_config(const SweepPlan& plan, std::size_t member);

/// Writes DIR/sweep.json atomically; reads it back (InputError naming the file).
void write_plan(const SweepPlan& plan);
SweepPlan read_plan(const std::string& directory);
/// The plan as sweep.json holds it, and back (source names it in an InputError).
nlohmann::json plan_json(const SweepPlan& plan);
SweepPlan plan_from_json(const nlohmann::json& json, const std::string& directory,
                         const std::string& source);

/// What a population's run gives its members' entries in the plan.
MemberResult member_result(const train::RunResult& result);

/// The files of a finished member's run directory that the leaderboards and reports read
/// (config.json, metrics.jsonl, best.dqnpolicy, last.dqnpolicy, final_metrics.json), each
/// that its run wrote with its size and checksum, from the run's result (what the run wrote
/// into them, which may still be on its way to the disk).
nlohmann::json member_files(const train::RunResult& result);

/// Reopens every finished population of plan one of whose members' files (as recorded) is
/// missing or changed: it will run again (resuming from its checkpoints, or from the start),
/// which writes them again. One line per population reopened, saying which file.
std::vector<std::string> reopen_damaged_populations(SweepPlan& plan);

/// A member's result as JSON (what sweep.json keeps, and what a rank sends), and back.
nlohmann::json to_json(const MemberResult& result);
MemberResult member_result_from_json(const nlohmann::json& json);

}  // namespace dqntrader::sweep

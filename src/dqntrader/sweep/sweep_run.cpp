#include "dqntrader/sweep/sweep_run.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/status_line.hpp"
#include "dqntrader/io/background_writer.hpp"
#include "dqntrader/io/json_values.hpp"
#include "dqntrader/io/snapshot.hpp"
#include "dqntrader/sweep/leaderboard.hpp"
#include "dqntrader/train/dqn_trainer.hpp"
#include "dqntrader/train/run_checkpoint.hpp"
#include "dqntrader/train/training_run.hpp"

namespace dqntrader::sweep {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

std::function<std::vector<train::ScheduleStep>(std::size_t, const std::vector<double>&,
                                               const std::vector<bool>&, train::DqnTrainer&)>
population_schedule(const SweepPlan& plan, std::size_t p) {
  return [&plan, p](std::size_t epoch, const std::vector<double>& sharpes,
                    const std::vector<bool>& running, train::DqnTrainer& trainer) {
    const std::vector<std::size_t>& ids = plan.populations.at(p).members;
    std::vector<train::TrainConfig> now;
    for (std::size_t m = 0; m < ids.size(); ++m)
      now.push_back(trainer.member(m));
    const Decision d = decide(
        plan.schedule, plan.space, plan.populations[p].id, epoch,
        member_config(plan, ids.front()).epochs, sharpes, running, now,
        [&trainer](std::size_t m, const train::TrainConfig& c) { trainer.set_member(m, c); });
    std::vector<train::ScheduleStep> steps(ids.size());
    trainer.copy_members(d.copies);
    for (std::size_t i = 0; i < d.copies.size(); ++i) {
      const auto [to, from] = d.copies[i];
      steps[to].record = {{"copied", plan.members[ids[from]].run}, {"settings", d.values[i]}};
    }
    for (const std::size_t m : d.stops) {
      steps[m].record = {{"stopped", "halving"}};
      steps[m].stop = true;
    }
    return steps;
  };
}

std::vector<MemberResult> run_planned_population(
    const ExecSpace& space, const SweepPlan& plan, std::size_t p,
    const std::function<void(std::size_t, std::size_t)>& on_epoch,
    const std::function<bool()>& interrupted, io::BackgroundWriter* writer,
    io::SnapshotPool* snapshots, train::SharedInputs* shared) {
  const PopulationPlan& population = plan.populations.at(p);
  std::vector<train::TrainConfig> members;
  for (std::size_t id : population.members)
    members.push_back(member_config(plan, id));
  train::PopulationOptions options;
  options.checkpoints = plan.directory + "/" + population.checkpoints;
  options.on_epoch = on_epoch;
  options.interrupted = interrupted;
  options.writer = writer;
  options.snapshots = snapshots;
  options.shared = shared;
  if (plan.schedule.kind != "none")
    options.schedule = population_schedule(plan, p);
  train::ResumeOptions resume;
  resume.resume = !train::checkpoint_paths(options.checkpoints).empty();
  std::ostringstream log;  // a sweep prints a line a population (population_line), not its epochs
  std::vector<MemberResult> out;
  try {
    std::string restarted;
    std::vector<train::RunResult> results;
    try {
      results = train::run_population(space, members, options, log, resume);
    } catch (const InputError& e) {
      if (!resume.resume)
        throw;
      // Its checkpoints cannot be resumed from (every one damaged, or made for other
      // settings): the population trains again from the start, which gives what an
      // uninterrupted run of its settings gives, and its members' results say why.
      restarted = e.what();
      if (writer != nullptr)
        writer->wait();  // what the failed run handed over, before its checkpoints go
      for (const std::string& checkpoint : train::checkpoint_paths(options.checkpoints))
        std::filesystem::remove(checkpoint);
      resume.resume = false;
      results = train::run_population(space, members, options, log, resume);
    }
    // The checkpoints the resume skipped (damaged), as train says them.
    std::string skipped;
    std::istringstream lines(log.str());
    const std::string mark = "dqntrader train: skipping ";
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind(mark, 0) == 0)
        skipped += (skipped.empty() ? "" : "; ") + line.substr(mark.size());
    }
    for (std::size_t i = 0; i < results.size(); ++i) {
      out.push_back(member_result(results[i]));
      out.back().restarted = restarted;
      out.back().skipped = skipped;
      out.back().files = member_files(results[i]);
    }
  } catch (const InputError& e) {
    // The population cannot train (its data or settings): its members fail, the sweep goes on.
    out = failed_population(plan, p, e.what());
  }
  return out;
}

std::vector<MemberResult> failed_population(const SweepPlan& plan, std::size_t p,
                                            const std::string& why) {
  MemberResult failed;
  failed.status = "failed";
  failed.validation_sharpe = failed.last_sharpe = std::nan("");
  failed.failure = why;
  return std::vector<MemberResult>(plan.populations.at(p).members.size(), failed);
}

namespace {

// One line about finished population p: its members, how they ended, its best member and the
// seconds it took.
std::string population_line(const SweepPlan& plan, std::size_t p, double seconds) {
  const PopulationPlan& population = plan.populations.at(p);
  std::size_t finished = 0, stopped = 0, failed = 0, best = population.members.front();
  for (std::size_t id : population.members) {
    const MemberResult& r = plan.members[id].result;
    finished += r.status == "finished" ? 1 : 0;
    stopped += r.status == "stopped early" ? 1 : 0;
    failed += r.status == "failed" ? 1 : 0;
    // The best of the members that did not fail (a failed member's Sharpe is not a result).
    const MemberResult& b = plan.members[best].result;
    const bool usable = r.status != "failed" && std::isfinite(r.validation_sharpe);
    const bool best_usable = b.status != "failed" && std::isfinite(b.validation_sharpe);
    if (usable && (!best_usable || r.validation_sharpe > b.validation_sharpe))
      best = id;
  }
  std::size_t done = 0, members_done = 0;
  for (const PopulationPlan& q : plan.populations) {
    done += q.finished ? 1 : 0;
    members_done += q.finished ? q.members.size() : 0;
  }
  std::ostringstream line;
  line << "population " << p + 1 << " of " << plan.populations.size() << " ("
       << population.members.size() << " members: " << finished << " finished";
  if (stopped > 0)
    line << ", " << stopped << " stopped early";
  if (failed > 0)
    line << ", " << failed << " failed";
  const std::string& skipped = plan.members[population.members.front()].result.skipped;
  if (!skipped.empty())
    line << "; resumed past damaged checkpoints: " << skipped;
  const std::string& restarted = plan.members[population.members.front()].result.restarted;
  if (!restarted.empty())
    line << "; trained again from the start, its checkpoints could not be resumed from: "
         << restarted;
  const MemberResult& b = plan.members[best].result;
  if (b.status == "failed")
    line << "); no member finished";
  else
    line << "); best validation Sharpe " << io::format_fixed(b.validation_sharpe, 3) << " ("
         << plan.members[best].run << ")";
  line << "; " << io::format_fixed(seconds, 1) << " s; sweep " << members_done << "/"
       << plan.members.size() << " members, " << done << "/" << plan.populations.size()
       << " populations";
  return line.str();
}

}  // namespace

std::string record(SweepPlan& plan, std::size_t p, const std::vector<MemberResult>& results,
                   double seconds, io::BackgroundWriter* writer, bool finished) {
  PopulationPlan& population = plan.populations.at(p);
  for (std::size_t i = 0; i < population.members.size(); ++i)
    plan.members.at(population.members[i]).result = results.at(i);
  population.finished = finished;
  if (writer != nullptr)
    writer->submit([written = plan] { write_plan(written); });
  else
    write_plan(plan);
  return population_line(plan, p, seconds);
}

void run_sweep(const ExecSpace& space, SweepPlan& plan, std::ostream& log,
               const std::function<bool()>& interrupted) {
  // The populations' files and sweep.json reach the disk while the next population trains;
  // their checkpoints are copied from the device into the pool's pinned memory, which the
  // writer's batches hold until written (so the pool goes after the writer).
  io::SnapshotPool snapshots;
  io::BackgroundWriter writer;
  train::SharedInputs shared;  // the bars and baselines populations of the same data share
  StatusLine status(log);
  const auto sweep_start = std::chrono::steady_clock::now();
  std::size_t members_done = 0;
  for (const PopulationPlan& q : plan.populations)
    members_done += q.finished ? q.members.size() : 0;
  for (std::size_t p = 0; p < plan.populations.size(); ++p) {
    if (plan.populations[p].finished)
      continue;
    const auto start = std::chrono::steady_clock::now();
    const std::size_t size = plan.populations[p].members.size();
    auto bar = [&](std::size_t epoch, std::size_t epochs) {
      if (!status.shown())
        return;
      const double share = (static_cast<double>(members_done) +
                            static_cast<double>(size) * epoch / std::max<std::size_t>(epochs, 1)) /
                           static_cast<double>(plan.members.size());
      const int width = 30, filled = static_cast<int>(share * width);
      std::ostringstream text;
      text << "[" << std::string(filled, '#') << std::string(width - filled, '.') << "] "
           << static_cast<int>(100 * share) << "%  population " << p + 1 << "/"
           << plan.populations.size() << ", epoch " << epoch << "/" << epochs;
      status.show(text.str());
    };
    bar(0, 1);
    const std::vector<MemberResult> results =
        run_planned_population(space, plan, p, bar, interrupted, &writer, &snapshots, &shared);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string line = record(plan, p, results, seconds, &writer);
    members_done += size;
    status.clear();
    log << line << "\n  " << train::phases_line(results.front().phases) << "\n";
  }
  const double populations = seconds_since(sweep_start);
  const double waited = writer.wait();
  log << "the populations' files written: waited " << io::format_fixed(waited, 2)
      << " s for them after " << io::format_fixed(populations, 2) << " s of populations\n";
  plan.timings = {{"populations_seconds", populations}, {"files_wait_seconds", waited}};
  write_leaderboards(plan);
}

}  // namespace dqntrader::sweep

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "dqntrader/cli/commands.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/dist/dist.hpp"
#include "dqntrader/sweep/search_space.hpp"
#include "dqntrader/sweep/sweep_plan.hpp"
#include "dqntrader/sweep/sweep_run.hpp"
#include "dqntrader/sweep/sweep_start.hpp"
#include "dqntrader/train/training_run.hpp"

namespace dqntrader::cli {

Command add_sweep(CLI::App& app) {
  struct Options {
    train::TrainConfig config;
    std::string config_file, space_file, resume, seeds;
    std::vector<std::string> sets;
    std::size_t random = 0, population = 0, pbo_blocks = 16;
    std::uint64_t random_seed = 1;
    sweep::ScheduleSettings schedule;
    std::string perturb = "0.8,1.2";
    SettingFlags flags;
  };
  auto options = std::make_shared<Options>();
  Command command;
  command.app = app.add_subcommand(
      "sweep",
      "train every combination of a search space's settings with every seed, members that "
      "share their shapes trained together as populations on the device, and rank them (built "
      "with MPI, under mpirun or srun: across ranks, one per GPU)");
  CLI::App* c = command.app;
  c->add_option("--set", options->sets,
                "a setting to vary: NAME=V1,V2,... (the grid takes every value; a list "
                "setting's items separated by '/', e.g. hidden=64/64,128/128) or "
                "NAME=LO:HI[:log] (with --random); repeatable");
  c->add_option("--seeds", options->seeds,
                "the seeds every combination is trained with: 1-8, 1,3,5 (default: --seed)");
  c->add_option("--random", options->random,
                "N random draws of the settings instead of the grid (ranges uniform or "
                "log-uniform, lists uniform)")
      ->check(whole_number())
      ->check(CLI::Range(std::size_t{0}, sweep::kMostDraws));
  c->add_option("--random-seed", options->random_seed, "seed of the random draws")
      ->capture_default_str()
      ->check(whole_number());
  c->add_option("--space", options->space_file,
                "the search space as a JSON file (seeds, random, random_seed, set, base); "
                "--set, --seeds and --random add to it");
  c->add_option("--population", options->population,
                "members trained together at most (default: as many as the device's free "
                "memory holds, at most 256, and under MPI enough populations for every rank)")
      ->check(whole_number());
  c->add_option("--pbo-blocks", options->pbo_blocks,
                "row blocks of the validation window into which the probability of backtest "
                "overfitting cuts the members' returns (even, 2 to 24)")
      ->capture_default_str()
      ->check(whole_number());
  c->add_option("--schedule", options->schedule.kind,
                "what each population does between epochs: none (every member trains its "
                "whole budget), pbt (population based training: the worst copy the best and "
                "perturb the settings --set varies per member) or halving (successive "
                "halving: the worst stop)")
      ->capture_default_str();
  c->add_option("--pbt-interval", options->schedule.interval, "pbt: epochs between decisions")
      ->capture_default_str()
      ->check(whole_number());
  c->add_option("--pbt-fraction", options->schedule.fraction,
                "pbt: the bottom quantile that copies the top quantile (at most 0.5)")
      ->capture_default_str();
  c->add_option("--pbt-perturb", options->perturb,
                "pbt: the two factors a perturbed number is multiplied by (a list's value "
                "moves to its neighbour)")
      ->capture_default_str();
  c->add_option("--pbt-resample", options->schedule.resample,
                "pbt: probability that a setting is drawn afresh from the space instead")
      ->capture_default_str();
  c->add_option("--pbt-burn-in", options->schedule.burn_in,
                "pbt: no decision before the end of this epoch")
      ->capture_default_str()
      ->check(whole_number());
  c->add_option("--halving-rate", options->schedule.halving_rate,
                "halving: 1 / rate of the running members go on at each rung")
      ->capture_default_str();
  c->add_option("--halving-interval", options->schedule.halving_interval,
                "halving: epochs between rungs")
      ->capture_default_str()
      ->check(whole_number());
  c->add_option("--config", options->config_file,
                "JSON file of shared settings (keys as the flags below, without --)");
  c->add_option("--resume", options->resume,
                "continue the sweep in this directory as it was planned: populations that "
                "finished are not run again, one that was interrupted continues from its "
                "newest checkpoint");
  options->config.out = "runs/sweep";
  options->flags.add(c, options->config, [](const train::Setting& s) {
    const train::Scope scope = train::setting_scope(s.name);
    const std::string varies = s.name == "seed"            ? " [--seeds gives each member's]"
                               : train::own_setting(scope) ? " [--set may vary it per member]"
                               : scope == train::Scope::population
                                   ? " [--set may list values: a population "
                                     "of each]"
                                   : " [every member shares it]";
    return (s.name == "out" ? std::string("the sweep's directory") : s.help) + varies;
  });
  command.run = [options, c](const ExecSpace& space) {
    sweep::SweepPlan plan;
    if (!options->resume.empty()) {
      for (CLI::Option* o : c->get_options()) {
        if (o->count() > 0 && o->get_name() != "--resume")
          throw InputError("--resume continues the sweep as it was planned; drop " + o->get_name());
      }
      plan = sweep::reopen_sweep(options->resume, std::cerr);
    } else {
      sweep::SweepRequest request;
      train::TrainConfig& base = request.base;
      base = options->config;
      if (!options->config_file.empty())
        train::apply_settings_json(base, options->config_file);
      if (!options->space_file.empty()) {
        request.space = sweep::read_space(options->space_file);
        train::apply_settings(base, request.space.base, options->space_file + " (base)");
      }
      options->flags.apply(base);
      refuse_test_fraction_beside_test_data(*c, base);
      request.out_given = c->get_option("--out")->count() > 0 || !options->config_file.empty();
      request.sets = options->sets;
      if (c->get_option("--seeds")->count() > 0)
        request.seeds = options->seeds;
      if (c->get_option("--random")->count() > 0)
        request.random = options->random;
      if (c->get_option("--random-seed")->count() > 0)
        request.random_seed = options->random_seed;
      if (c->get_option("--population")->count() > 0)
        request.population = options->population;
      request.pbo_blocks = options->pbo_blocks;
      request.schedule = options->schedule;
      if (c->get_option("--pbt-perturb")->count() > 0)
        request.perturb = options->perturb;
      for (const char* flag :
           {"--pbt-interval", "--pbt-fraction", "--pbt-perturb", "--pbt-resample", "--pbt-burn-in",
            "--halving-rate", "--halving-interval"}) {
        if (c->get_option(flag)->count() > 0)
          request.schedule_options.emplace_back(flag + 2);  // the name, without "--"
      }
      request.ranks = static_cast<std::size_t>(dist::ranks().size);
      plan = sweep::plan_sweep(std::move(request));
    }
    dist::run_whole_sweep(space, plan, !options->resume.empty(), std::cerr);
  };
  return command;
}

}  // namespace dqntrader::cli

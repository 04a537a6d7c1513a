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

#include "backends/execution.hpp"
#include "dqntrader/cli/commands.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/data/features.hpp"
#include "dqntrader/dist/dist.hpp"
#include "dqntrader/io/json_values.hpp"
#include "dqntrader/sweep/leaderboard.hpp"
#include "dqntrader/sweep/search_space.hpp"
#include "dqntrader/sweep/selection.hpp"
#include "dqntrader/sweep/sweep_lock.hpp"
#include "dqntrader/sweep/sweep_plan.hpp"
#include "dqntrader/sweep/sweep_run.hpp"
#include "dqntrader/train/dqn_trainer.hpp"
#include "dqntrader/train/training_run.hpp"

namespace dqntrader::cli {

namespace {

constexpr std::size_t kMostMembers = 64;

// The best rows of the leaderboards and the selection statistics (measured in
// selection_seconds), for the sweep's last lines.
void print_leaders(const sweep::SweepPlan& plan, double selection_seconds, std::ostream& out) {
  const nlohmann::json board = sweep::leaderboard_json(plan);
  auto settings = [](const nlohmann::json& s) {
    std::string text;
    for (const auto& item : s.items()) {
      if (!text.empty())
        text += ' ';
      text += item.key() + "=" + item.value().get<std::string>();
    }
    return text.empty() ? std::string("(base settings)") : text;
  };
  const bool tested =
      std::any_of(plan.members.begin(), plan.members.end(),
                  [](const sweep::MemberPlan& m) { return !m.result.test.empty(); });
  out << "best members (validation Sharpe of their best epoch"
      << (tested ? "; on the unseen test window" : "") << "):\n";
  for (std::size_t i = 0; i < board["members"].size() && i < 5; ++i) {
    const auto& m = board["members"][i];
    const double sharpe = io::number_of(m["validation_sharpe"]);
    out << "  " << m["rank"] << ". " << io::format_fixed(sharpe, 3);
    if (tested)
      out << "; " << io::format_fixed(io::number_of(m["test_sharpe"]), 3);
    out << "  " << m["run"].get<std::string>() << "  seed " << m["seed"] << "  "
        << settings(m["settings"])
        << (m["status"] == "failed" ? "  (failed: ranked after every member that did not)" : "")
        << "\n";
  }
  if (!plan.space.axes.empty()) {
    out << "best settings (mean validation Sharpe over their seeds, std, min):\n";
    for (std::size_t i = 0; i < board["combinations"].size() && i < 5; ++i) {
      const auto& c = board["combinations"][i];
      out << "  " << c["rank"] << ". "
          << io::format_fixed(io::number_of(c["validation_sharpe_mean"]), 3) << " ("
          << io::format_fixed(io::number_of(c["validation_sharpe_std"]), 3) << ", "
          << io::format_fixed(io::number_of(c["validation_sharpe_min"]), 3) << ")  "
          << settings(c["settings"]) << "\n";
    }
  }
  const nlohmann::json& s = plan.selection;
  if (s.contains("note")) {
    out << "selection statistics: " << s["note"].get<std::string>() << "\n";
  } else if (s.contains("deflated_sharpe")) {
    const nlohmann::json& w = s["winner"];
    out << "how much of the winner is luck (" << s["trials"] << " members, validation bars "
        << s["window"]["first_bar"] << ".." << s["window"]["last_bar"] << "):\n"
        << "  the winner's validation Sharpe "
        << io::format_fixed(io::number_of(w["validation_sharpe"]), 3);
    if (!w["test_sharpe"].is_null())
      out << ", on the unseen test window " << io::format_fixed(io::number_of(w["test_sharpe"]), 3);
    out << "\n  the best of " << s["trials"] << " members without skill would show "
        << io::format_fixed(io::number_of(s["expected_max_sharpe_annualised"]), 3)
        << "; deflated Sharpe ratio " << io::format_fixed(io::number_of(s["deflated_sharpe"]), 3)
        << " (" << (io::number_of(s["deflated_sharpe"]) > 0.95 ? "above" : "not above")
        << " 0.95: the edge "
        << (io::number_of(s["deflated_sharpe"]) > 0.95 ? "survives" : "does not survive")
        << " the number of members)\n";
    if (s.contains("pbo_note")) {
      out << "  probability of backtest overfitting not measured: "
          << s["pbo_note"].get<std::string>();
    } else {
      out << "  probability of backtest overfitting "
          << io::format_fixed(io::number_of(s["pbo"]), 3) << " over " << s["splits"]
          << " splits of " << s["blocks"] << " blocks (probability of loss "
          << io::format_fixed(io::number_of(s["probability_of_loss"]), 3) << ")";
    }
    out << "; measured in " << io::format_fixed(selection_seconds, 2) << " s\n";
  }
  out << "leaderboards: " << plan.directory << "/leaderboard.csv and " << plan.directory
      << "/leaderboard.json\n";
}

}  // namespace

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
                "memory holds, at most 64)")
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
      plan = sweep::read_plan(options->resume);
      // The data must be what the sweep was planned on: one leaderboard, one dataset.
      if (!plan.data_fingerprint.empty()) {
        const train::RunData data = train::load_run_data(sweep::member_config(plan, 0));
        const std::string now = train::fingerprint_text(data.fingerprint);
        const std::string test =
            data.has_test() ? train::fingerprint_text(data.test_fingerprint) : std::string();
        if (now != plan.data_fingerprint || test != plan.test_fingerprint) {
          throw InputError(options->resume + "/sweep.json", 0, 0,
                           "the data differ from the data the sweep was planned on (" +
                               (now != plan.data_fingerprint
                                    ? "training and validation bars: fingerprint " +
                                          plan.data_fingerprint + " recorded, " + now + " now"
                                    : "test window: fingerprint " + plan.test_fingerprint +
                                          " recorded, " + test + " now") +
                               "); put the sweep's data back, or start a new sweep");
        }
      }
      // Finished members whose files were lost or changed: their populations run again.
      for (const std::string& line : sweep::reopen_damaged_populations(plan))
        std::cerr << "dqntrader sweep: " << line << "\n";
    } else {
      train::TrainConfig& base = options->config;
      if (!options->config_file.empty())
        train::apply_settings_json(base, options->config_file);
      sweep::SearchSpace space;
      if (!options->space_file.empty()) {
        space = sweep::read_space(options->space_file);
        train::apply_settings(base, space.base, options->space_file + " (base)");
      }
      options->flags.apply(base);
      refuse_test_fraction_beside_test_data(*c, base);
      for (const std::string& text : options->sets)
        space.axes.push_back(sweep::parse_axis(text));
      if (c->get_option("--seeds")->count() > 0)
        space.seeds = sweep::parse_seeds(options->seeds);
      if (c->get_option("--random")->count() > 0) {
        if (options->random == 0)
          throw InputError(
              "--random 0: give the number of draws, or leave --random out for the grid");
        space.random = options->random;
      }
      if (c->get_option("--random-seed")->count() > 0)
        space.random_seed = options->random_seed;
      if (base.data.empty()) {
        throw InputError(
            "a sweep needs --data: on the built-in market the seed would choose the market too "
            "(write it with dqntrader synth and give the file)");
      }
      if (c->get_option("--out")->count() == 0 && options->config_file.empty())
        throw InputError("a sweep needs --out DIR, the sweep's directory");
      if (std::filesystem::exists(base.out) && !std::filesystem::is_directory(base.out))
        throw InputError("--out " + base.out + " is a file, not a directory");
      train::validate(base);
      sweep::check(space, base);
      if (std::filesystem::exists(base.out + "/sweep.json")) {
        throw InputError(base.out + " holds a sweep already: continue it with --resume " +
                         base.out + ", or choose another --out");
      }
      if (train::held_run(base.out) == "a training run") {
        throw InputError("--out " + base.out +
                         " holds a training run; a sweep needs a directory of its own");
      }
      // The data once, for its features (and to fail early on a bad file).
      const train::RunData data = train::load_run_data(base);
      data::FeatureConfig features;
      features.return_window = base.return_window;
      features.volatility_window = base.volatility_window;
      features.ofi_window = base.ofi_window;
      const std::size_t count = data::resolve_features(features, data.bars).count();
      std::size_t most = options->population;
      if (c->get_option("--population")->count() > 0 && most == 0)
        throw InputError("--population 0: a population has at least one member");
      if (most == 0) {
        const std::size_t bytes = train::member_bytes(base, count);
        most = std::clamp<std::size_t>(
            exec::free_memory() / 10 * 8 / std::max<std::size_t>(bytes, 1), 1, kMostMembers);
      }
      if (options->pbo_blocks < 2 || options->pbo_blocks > 24 || options->pbo_blocks % 2 != 0) {
        throw InputError("--pbo-blocks " + std::to_string(options->pbo_blocks) +
                         ": an even number from 2 to 24");
      }
      sweep::ScheduleSettings& schedule = options->schedule;
      if (c->get_option("--pbt-perturb")->count() > 0) {
        std::tie(schedule.perturb_down, schedule.perturb_up) =
            sweep::parse_perturb(options->perturb);
      }
      schedule.seed = space.random_seed;
      sweep::check(schedule);
      for (const char* flag :
           {"--pbt-interval", "--pbt-fraction", "--pbt-perturb", "--pbt-resample", "--pbt-burn-in",
            "--halving-rate", "--halving-interval"}) {
        const std::string kind = std::string(flag).rfind("--pbt", 0) == 0 ? "pbt" : "halving";
        if (c->get_option(flag)->count() > 0 && schedule.kind != kind)
          throw InputError(std::string(flag) + " applies to --schedule " + kind);
      }
      plan = sweep::make_plan(base, space, base.out, most);
      plan.pbo_blocks = options->pbo_blocks;
      plan.schedule = schedule;
      for (const sweep::PopulationPlan& p : plan.populations)
        sweep::check_decides(schedule, sweep::member_config(plan, p.members.front()).epochs);
      if (schedule.kind != "none" &&
          std::all_of(plan.populations.begin(), plan.populations.end(),
                      [](const sweep::PopulationPlan& p) { return p.members.size() < 2; })) {
        throw InputError("--schedule " + schedule.kind +
                         " decides between the members of a population, and every population "
                         "here has one member (give more seeds or per-member settings, or a "
                         "larger --population)");
      }
      plan.data_fingerprint = train::fingerprint_text(data.fingerprint);
      if (data.has_test())
        plan.test_fingerprint = train::fingerprint_text(data.test_fingerprint);
    }
    // Every rank has planned the same sweep (under MPI; one rank otherwise): rank 0's plan is
    // kept, and only rank 0 writes it.
    // Rank 0 holds the directory's lock for the sweep's life: a second process on the same
    // directory (a second start, a --resume while this one runs) is refused.
    const bool resuming = !options->resume.empty();
    std::optional<sweep::SweepLock> lock;
    plan = dist::share_plan(plan, [resuming, &lock](const sweep::SweepPlan& first) {
      if (resuming) {
        lock.emplace(first.directory);
        std::cerr << "dqntrader sweep: continuing " << first.directory << "\n";
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
        throw InputError(first.directory + " holds a sweep already: continue it with --resume " +
                         first.directory + ", or choose another --out");
      }
      sweep::write_plan(first);
      const std::size_t seeds = first.space.seeds.empty() ? 1 : first.space.seeds.size();
      std::cerr << "dqntrader sweep: " << first.members.size() << " members ("
                << first.combinations.size() << " combinations x " << seeds << " seeds) in "
                << first.populations.size() << " populations of at most " << first.most
                << " members"
                << (first.schedule.kind == "pbt"       ? ", population based training in each"
                    : first.schedule.kind == "halving" ? ", successive halving in each"
                                                       : "")
                << "; " << first.directory << "\n";
    });
    dist::run_sweep(space, plan, std::cerr);
    if (dist::ranks().rank == 0) {
      // Every population has finished: how much of the winner is luck, measured once.
      const auto start = std::chrono::steady_clock::now();
      plan.selection = sweep::selection_json(space, plan);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      sweep::write_plan(plan);
      sweep::write_leaderboards(plan);
      print_leaders(plan, seconds, std::cerr);
      if (std::all_of(plan.members.begin(), plan.members.end(),
                      [](const sweep::MemberPlan& m) { return m.result.status == "failed"; })) {
        throw Error("no member of the sweep finished: every one of its " +
                    std::to_string(plan.members.size()) +
                    " members failed (sweep.json gives each one's failure)");
      }
    }
  };
  return command;
}

}  // namespace dqntrader::cli

#include "dqntrader/core/error.hpp"
#include "dqntrader/dist/dist.hpp"
#include "dqntrader/request/requests.hpp"
#include "dqntrader/request/tables.hpp"
#include "dqntrader/sweep/search_space.hpp"

namespace dqntrader::request {

Table sweep_table() {
  const sweep::ScheduleSettings s;
  Table t;
  t.command = "sweep";
  t.summary =
      "train every combination of a search space's settings with every seed, members that "
      "share their shapes trained together as populations on the device, and rank them (built "
      "with MPI, under mpirun or srun: across ranks, one per GPU)";
  Option set = option("set", Kind::text,
                      "a setting to vary: NAME=V1,V2,... (the grid takes every value; a list "
                      "setting's items separated by '/', e.g. hidden=64/64,128/128) or "
                      "NAME=LO:HI[:log] (with " +
                          field("random") + ")",
                      "gamma");
  set.repeatable = true;
  Option random = option("random", Kind::whole,
                         "N random draws of the settings instead of the grid (ranges uniform or "
                         "log-uniform, lists uniform)",
                         "100001", "0");
  random.most = sweep::kMostDraws;
  Option population = option("population", Kind::whole,
                             "members trained together at most (default: as many as the "
                             "device's free memory holds, at most 256, and under MPI enough "
                             "populations for every rank)",
                             "0");
  Option schedule = option(
      "schedule", Kind::choice,
      "what each population does between epochs: none (every member trains its whole budget), "
      "pbt (population based training: the worst copy the best and perturb the settings " +
          field("set") + " varies per member) or halving (successive halving: the worst stop)",
      "x", s.kind);
  schedule.choices = {"none", "pbt", "halving"};
  t.options = {
      set,
      option("seeds", Kind::list,
             "the seeds every combination is trained with: 1-8, 1,3,5 (default: " + field("seed") +
                 ")",
             "x"),
      random,
      option("random-seed", Kind::whole, "seed of the random draws", "-1", "1"),
      option("space", Kind::text,
             "the search space as a JSON file (seeds, random, random_seed, set, base); " +
                 field("set") + ", " + field("seeds") + " and " + field("random") + " add to it",
             "{dir}"),
      population,
      option("pbo-blocks", Kind::whole,
             "row blocks of the validation window into which the probability of backtest "
             "overfitting cuts the members' returns (even, 2 to 24)",
             "3", "16"),
      schedule,
      option("pbt-interval", Kind::whole, "pbt: epochs between decisions", "0",
             std::to_string(s.interval)),
      option("pbt-fraction", Kind::number,
             "pbt: the bottom quantile that copies the top quantile (at most 0.5)", "0.75",
             train::number_text(s.fraction)),
      option("pbt-perturb", Kind::list,
             "pbt: the two factors a perturbed number is multiplied by (a list's value moves to "
             "its neighbour)",
             "1.2,0.8",
             train::number_text(s.perturb_down) + "," + train::number_text(s.perturb_up)),
      option("pbt-resample", Kind::number,
             "pbt: probability that a setting is drawn afresh from the space instead", "2",
             train::number_text(s.resample)),
      option("pbt-burn-in", Kind::whole, "pbt: no decision before the end of this epoch", "x",
             std::to_string(s.burn_in)),
      option("halving-rate", Kind::number,
             "halving: 1 / rate of the running members go on at each rung", "1",
             train::number_text(s.halving_rate)),
      option("halving-interval", Kind::whole, "halving: epochs between rungs", "0",
             std::to_string(s.halving_interval)),
      option("config", Kind::text, "JSON file of shared settings (keys as the settings' names)",
             "{dir}"),
      option("resume", Kind::text,
             "continue the sweep in this directory as it was planned: populations that "
             "finished are not run again, one that was interrupted continues from its newest "
             "checkpoint",
             "{file}"),
  };
  train::TrainConfig defaults;
  defaults.out = "runs/sweep";
  for (Option& o : setting_options(defaults, [](const train::Setting& s) {
         const train::Scope scope = train::setting_scope(s.name);
         const std::string varies =
             s.name == "seed"            ? " [" + field("seeds") + " gives each member's]"
             : train::own_setting(scope) ? " [" + field("set") + " may vary it per member]"
             : scope == train::Scope::population
                 ? " [" + field("set") + " may list values: a population of each]"
                 : std::string(" [every member shares it]");
         return (s.name == "out" ? std::string("the sweep's directory") : s.help) + varies;
       }))
    t.options.push_back(std::move(o));
  t.exclusions = {{"resume", "*", "continues the sweep as it was planned"},
                  test_fraction_beside_test_data()};
  return t;
}

SweepRequest sweep_request(const Given& given) {
  const Table& t = table("sweep");
  check(t, given);
  SweepRequest r;
  if (given.has("resume")) {
    r.resume = given.text("resume");
    return r;
  }
  sweep::SweepRequest& p = r.plan;
  train::TrainConfig& base = p.base;
  base.out = "runs/sweep";
  if (given.has("config")) {
    check_input("config", given.text("config"));
    train::apply_settings_json(base, given.text("config"));
  }
  if (given.has("space")) {
    check_input("space", given.text("space"));
    p.space = sweep::read_space(given.text("space"));
    train::apply_settings(base, p.space.base, given.text("space") + " (base)");
  }
  apply_given_settings(t, given, base);
  refuse_test_fraction_beside_test_data(given, base);
  check_directory("out", base.out);
  p.out_given = given.has("out") || given.has("config");
  p.sets = given.values("set");
  if (given.has("seeds"))
    p.seeds = given.text("seeds");
  if (given.has("random"))
    p.random = whole(given.text("random"));
  if (given.has("random-seed"))
    p.random_seed = whole(given.text("random-seed"));
  if (given.has("population"))
    p.population = whole(given.text("population"));
  if (given.has("pbo-blocks"))
    p.pbo_blocks = whole(given.text("pbo-blocks"));
  sweep::ScheduleSettings& s = p.schedule;
  s.kind = given.text("schedule", s.kind);
  for (const char* name : {"pbt-interval", "pbt-fraction", "pbt-perturb", "pbt-resample",
                           "pbt-burn-in", "halving-rate", "halving-interval"}) {
    if (given.has(name))
      p.schedule_options.emplace_back(name);
  }
  if (given.has("pbt-interval"))
    s.interval = whole(given.text("pbt-interval"));
  if (given.has("pbt-fraction"))
    s.fraction = number(given.text("pbt-fraction"));
  if (given.has("pbt-perturb"))
    p.perturb = given.text("pbt-perturb");
  if (given.has("pbt-resample"))
    s.resample = number(given.text("pbt-resample"));
  if (given.has("pbt-burn-in"))
    s.burn_in = whole(given.text("pbt-burn-in"));
  if (given.has("halving-rate"))
    s.halving_rate = number(given.text("halving-rate"));
  if (given.has("halving-interval"))
    s.halving_interval = whole(given.text("halving-interval"));
  p.ranks = static_cast<std::size_t>(dist::ranks().size);
  return r;
}

}  // namespace dqntrader::request

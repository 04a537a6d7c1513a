#include "dqntrader/sweep/sweep_start.hpp"

#include <algorithm>
#include <filesystem>
#include <ostream>
#include <tuple>

#include "backends/execution.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/data/features.hpp"
#include "dqntrader/io/json_values.hpp"
#include "dqntrader/sweep/leaderboard.hpp"
#include "dqntrader/train/run_data.hpp"
#include "dqntrader/train/training_run.hpp"

namespace dqntrader::sweep {

namespace {

// The most members a population takes by itself: the learning step is faster per member up
// to 256 at least (docs/BENCHMARKS.md, "The fused learning step"), and a population's fixed
// costs (its set-up, baselines, test window) are shared by more members.
constexpr std::size_t kMostMembers = 256;

}  // namespace

SweepPlan plan_sweep(SweepRequest request) {
  train::TrainConfig& base = request.base;
  SearchSpace& space = request.space;
  for (const std::string& text : request.sets)
    space.axes.push_back(parse_axis(text));
  if (request.seeds)
    space.seeds = parse_seeds(*request.seeds);
  if (request.random) {
    if (*request.random == 0)
      throw InputError(field("random") + " 0: give the number of draws, or leave " +
                       field("random") + " out for the grid");
    space.random = *request.random;
  }
  if (request.random_seed)
    space.random_seed = *request.random_seed;
  if (base.data.empty()) {
    throw InputError("a sweep needs " + field("data") +
                     ": on the built-in market the seed would choose the market too (write it with "
                     "dqntrader synth and give the file)");
  }
  if (!request.out_given)
    throw InputError("a sweep needs " + field("out") + ", the sweep's directory");
  if (std::filesystem::exists(base.out) && !std::filesystem::is_directory(base.out))
    throw InputError(field("out") + " " + base.out + " is a file, not a directory");
  train::validate(base);
  check(space, base);
  if (std::filesystem::exists(base.out + "/sweep.json")) {
    throw InputError(base.out + " holds a sweep already: continue it with " + field("resume") +
                     " " + base.out + ", or choose another " + field("out"));
  }
  if (train::held_run(base.out) == "a training run") {
    throw InputError(field("out") + " " + base.out +
                     " holds a training run; a sweep needs a directory of its own");
  }
  train::refuse_inputs_among_outputs(base, base.out, [](const std::filesystem::path& inside) {
    const std::string first = inside.begin()->string();
    for (const char* written : {"sweep.json", "sweep.lock", "leaderboard.json", "leaderboard.csv",
                                "report.html", "members", "populations"}) {
      if (first == written)
        return true;
    }
    return false;
  });
  // The data once, for its features (and to fail early on a bad file).
  const train::RunData data = train::load_run_data(base);
  const data::FeatureSpec features = data::resolve_features(train::feature_config(base), data.bars);
  const std::size_t count = features.count();
  std::size_t most = request.population.value_or(0);
  if (request.population && most == 0)
    throw InputError(field("population") + " 0: a population has at least one member");
  const bool sized_by_memory = most == 0;
  if (sized_by_memory) {
    const train::RunWindows windows =
        train::split_windows(base, data.bars.size(), data.validation.size(), features.warmup());
    const std::size_t bytes = train::member_bytes(base, count, windows.val_end - windows.val_begin);
    most = std::clamp<std::size_t>(exec::free_memory() / 10 * 8 / std::max<std::size_t>(bytes, 1),
                                   1, kMostMembers);
  }
  if (request.pbo_blocks < 2 || request.pbo_blocks > 24 || request.pbo_blocks % 2 != 0) {
    throw InputError(field("pbo-blocks") + " " + std::to_string(request.pbo_blocks) +
                     ": an even number from 2 to 24");
  }
  ScheduleSettings& schedule = request.schedule;
  if (request.perturb)
    std::tie(schedule.perturb_down, schedule.perturb_up) = parse_perturb(*request.perturb);
  schedule.seed = space.random_seed;
  check(schedule);
  for (const std::string& option : request.schedule_options) {
    const std::string kind = option.rfind("pbt", 0) == 0 ? "pbt" : "halving";
    if (schedule.kind != kind)
      throw InputError(field(option) + " applies to " + field("schedule") + " " + kind);
  }
  SweepPlan plan = make_plan(base, space, base.out, most);
  if (sized_by_memory && request.ranks > 1) {
    // Populations enough for every rank to take one.
    const std::size_t share = (plan.members.size() + request.ranks - 1) / request.ranks;
    if (share < most)
      plan = make_plan(base, space, base.out, std::max<std::size_t>(share, 1));
  }
  plan.pbo_blocks = request.pbo_blocks;
  plan.schedule = schedule;
  for (const PopulationPlan& p : plan.populations)
    check_decides(schedule, member_config(plan, p.members.front()).epochs);
  if (schedule.kind != "none" &&
      std::all_of(plan.populations.begin(), plan.populations.end(),
                  [](const PopulationPlan& p) { return p.members.size() < 2; })) {
    throw InputError(field("schedule") + " " + schedule.kind +
                     " decides between the members of a population, and every population "
                     "here has one member (give more seeds or per-member settings, or a "
                     "larger " +
                     field("population") + ")");
  }
  plan.data_fingerprint = train::fingerprint_text(data.fingerprint);
  if (data.has_test())
    plan.test_fingerprint = train::fingerprint_text(data.test_fingerprint);
  return plan;
}

SweepPlan reopen_sweep(const std::string& directory, std::ostream& log) {
  SweepPlan plan = read_plan(directory);
  // The data must be what the sweep was planned on: one leaderboard, one dataset.
  if (!plan.data_fingerprint.empty()) {
    const train::RunData data = train::load_run_data(member_config(plan, 0));
    const std::string now = train::fingerprint_text(data.fingerprint);
    const std::string test =
        data.has_test() ? train::fingerprint_text(data.test_fingerprint) : std::string();
    if (now != plan.data_fingerprint || test != plan.test_fingerprint) {
      throw InputError(directory + "/sweep.json", 0, 0,
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
  for (const std::string& line : reopen_damaged_populations(plan))
    log << "dqntrader sweep: " << line << "\n";
  return plan;
}

// The best rows of the leaderboards and the selection statistics (measured in
// selection_seconds), for the sweep's last lines.
void print_leaders(const SweepPlan& plan, double selection_seconds, std::ostream& out) {
  const nlohmann::json board = leaderboard_json(plan);
  auto settings = [](const nlohmann::json& s) {
    std::string text;
    for (const auto& item : s.items()) {
      if (!text.empty())
        text += ' ';
      text += item.key() + "=" + item.value().get<std::string>();
    }
    return text.empty() ? std::string("(base settings)") : text;
  };
  const bool tested = std::any_of(plan.members.begin(), plan.members.end(),
                                  [](const MemberPlan& m) { return !m.result.test.empty(); });
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

}  // namespace dqntrader::sweep

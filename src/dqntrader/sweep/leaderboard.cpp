#include "dqntrader/sweep/leaderboard.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <sstream>
#include <vector>

#include "dqntrader/core/error.hpp"
#include "dqntrader/eval/metrics_json.hpp"
#include "dqntrader/io/atomic_file.hpp"
#include "dqntrader/io/csv_field.hpp"
#include "dqntrader/io/json_values.hpp"

namespace dqntrader::sweep {

namespace {

// Best first; what has no Sharpe (not run) last, in member order.
bool better(double a, double b) {
  const bool a_ok = std::isfinite(a), b_ok = std::isfinite(b);
  if (a_ok != b_ok)
    return a_ok;
  return a_ok && a > b;
}

// A member that failed has no result to rank: after every other, whatever its Sharpe ratio
// before it failed.
bool failed(const MemberPlan& m) {
  return m.result.status == "failed";
}

nlohmann::json settings_of(const Combination& c) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, value] : c.values)
    j[name] = value;
  return j;
}

std::string csv_value(const nlohmann::json& v) {
  if (v.is_null())
    return "";
  if (v.is_string())
    return v.get<std::string>();
  return v.dump();
}

}  // namespace

nlohmann::json leaderboard_json(const SweepPlan& plan) {
  // Members.
  std::vector<std::size_t> order(plan.members.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const MemberPlan &x = plan.members[a], &y = plan.members[b];
    if (failed(x) != failed(y))
      return failed(y);
    return better(x.result.validation_sharpe, y.result.validation_sharpe);
  });
  nlohmann::json members = nlohmann::json::array();
  for (std::size_t rank = 0; rank < order.size(); ++rank) {
    const MemberPlan& m = plan.members[order[rank]];
    members.push_back({{"rank", rank + 1},
                       {"member", m.id},
                       {"combination", m.combination},
                       {"seed", m.seed},
                       {"status", m.result.status},
                       {"settings", settings_of(plan.combinations[m.combination])},
                       {"best_epoch", m.result.best_epoch},
                       {"validation_sharpe", io::json_number(m.result.validation_sharpe)},
                       {"last_sharpe", io::json_number(m.result.last_sharpe)},
                       {"validation", m.result.best},
                       {"test_sharpe", io::json_number(m.result.test.contains("sharpe")
                                                           ? io::number_of(m.result.test["sharpe"])
                                                           : std::nan(""))},
                       {"test", m.result.test},
                       {"run", m.run}});
  }
  // Combinations, over their seeds' best validation Sharpe.
  struct Aggregate {
    std::size_t combination, members = 0, finished = 0;
    double mean = 0, stdev = 0, minimum = 0;
  };
  std::vector<Aggregate> aggregates;
  for (std::size_t c = 0; c < plan.combinations.size(); ++c) {
    Aggregate a;
    a.combination = c;
    std::vector<double> sharpes;
    for (const MemberPlan& m : plan.members) {
      if (m.combination != c)
        continue;
      ++a.members;
      if (!failed(m) && std::isfinite(m.result.validation_sharpe))
        sharpes.push_back(m.result.validation_sharpe);
    }
    a.finished = sharpes.size();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    a.mean = a.stdev = a.minimum = nan;
    if (!sharpes.empty()) {
      double sum = 0.0;
      for (double s : sharpes)
        sum += s;
      a.mean = sum / static_cast<double>(sharpes.size());
      double squares = 0.0;
      for (double s : sharpes)
        squares += (s - a.mean) * (s - a.mean);
      a.stdev =
          sharpes.size() > 1 ? std::sqrt(squares / static_cast<double>(sharpes.size() - 1)) : nan;
      a.minimum = *std::min_element(sharpes.begin(), sharpes.end());
    }
    aggregates.push_back(a);
  }
  std::stable_sort(aggregates.begin(), aggregates.end(),
                   [](const Aggregate& a, const Aggregate& b) { return better(a.mean, b.mean); });
  nlohmann::json combinations = nlohmann::json::array();
  for (std::size_t rank = 0; rank < aggregates.size(); ++rank) {
    const Aggregate& a = aggregates[rank];
    combinations.push_back({{"rank", rank + 1},
                            {"combination", a.combination},
                            {"settings", settings_of(plan.combinations[a.combination])},
                            {"members", a.members},
                            {"finished", a.finished},
                            {"validation_sharpe_mean", io::json_number(a.mean)},
                            {"validation_sharpe_std", io::json_number(a.stdev)},
                            {"validation_sharpe_min", io::json_number(a.minimum)}});
  }
  nlohmann::json board = {{"members", members}, {"combinations", combinations}};
  if (!plan.selection.is_null())
    board["selection"] = plan.selection;
  return board;
}

std::string leaderboard_csv(const SweepPlan& plan) {
  const nlohmann::json board = leaderboard_json(plan);
  std::vector<std::string> axes;
  for (const Axis& a : plan.space.axes)
    axes.push_back(a.setting);
  std::size_t count = 0;
  const eval::MetricDefinition* definitions = eval::metric_definitions(count);
  std::ostringstream out;
  out << "row,rank,member,combination,seed,status";
  for (const std::string& a : axes)
    out << "," << io::csv_field(a);
  out << ",best_epoch,validation_sharpe,last_sharpe,members,finished,validation_sharpe_mean,"
         "validation_sharpe_std,validation_sharpe_min";
  for (std::size_t i = 0; i < count; ++i)
    out << "," << definitions[i].key;
  for (std::size_t i = 0; i < count; ++i)
    out << ",test_" << definitions[i].key;
  out << ",run\n";
  for (const auto& m : board["members"]) {
    out << "member," << m["rank"] << "," << m["member"] << "," << m["combination"] << ","
        << m["seed"] << "," << io::csv_field(m["status"].get<std::string>());
    for (const std::string& a : axes)
      out << "," << io::csv_field(csv_value(m["settings"][a]));
    out << "," << m["best_epoch"] << "," << csv_value(m["validation_sharpe"]) << ","
        << csv_value(m["last_sharpe"]) << ",,,,,";
    for (const char* window : {"validation", "test"}) {
      for (std::size_t i = 0; i < count; ++i) {
        const auto found = m[window].find(definitions[i].key);
        out << "," << (found == m[window].end() ? "" : csv_value(*found));
      }
    }
    out << "," << io::csv_field(m["run"].get<std::string>()) << "\n";
  }
  for (const auto& c : board["combinations"]) {
    out << "combination," << c["rank"] << ",," << c["combination"] << ",,";
    for (const std::string& a : axes)
      out << "," << io::csv_field(csv_value(c["settings"][a]));
    out << ",,,," << c["members"] << "," << c["finished"] << ","
        << csv_value(c["validation_sharpe_mean"]) << "," << csv_value(c["validation_sharpe_std"])
        << "," << csv_value(c["validation_sharpe_min"]);
    for (std::size_t i = 0; i < 2 * count; ++i)
      out << ",";
    out << ",\n";
  }
  return out.str();
}

std::string policy_path(const std::string& path) {
  if (!std::filesystem::is_directory(path))
    return path;
  if (std::filesystem::exists(path + "/sweep.json")) {
    const SweepPlan plan = read_plan(path);
    const nlohmann::json board = leaderboard_json(plan);
    if (board["members"].empty())
      throw InputError(path + "/sweep.json lists no members, so the sweep has no winner");
    const nlohmann::json& first = board["members"].front();
    if (first["status"] != "finished" && first["status"] != "stopped early") {
      throw InputError(path + ": no member of the sweep finished (its leaderboard's first is " +
                       first["status"].get<std::string>() + "), so it has no winner");
    }
    return path + "/" + first["run"].get<std::string>() + "/best.dqnpolicy";
  }
  if (std::filesystem::exists(path + "/best.dqnpolicy"))
    return path + "/best.dqnpolicy";
  throw InputError(path +
                   " is a directory that holds neither a sweep (sweep.json) nor a "
                   "training run (best.dqnpolicy)");
}

void write_leaderboards(const SweepPlan& plan) {
  io::write_file_atomically(plan.directory + "/leaderboard.json",
                            leaderboard_json(plan).dump(2) + "\n");
  io::write_file_atomically(plan.directory + "/leaderboard.csv", leaderboard_csv(plan));
}

}  // namespace dqntrader::sweep

#include "dqntrader/report/sweep_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "dqntrader/core/error.hpp"
#include "dqntrader/io/json_values.hpp"
#include "dqntrader/report/report_parts.hpp"
#include "dqntrader/report/svg_chart.hpp"
#include "dqntrader/sweep/leaderboard.hpp"
#include "dqntrader/sweep/sweep_plan.hpp"

namespace dqntrader::report {

namespace {

constexpr double nan = std::numeric_limits<double>::quiet_NaN();

std::vector<std::pair<std::string, std::string>> settings_of(const nlohmann::json& settings,
                                                             const std::vector<sweep::Axis>& axes) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const sweep::Axis& a : axes) {
    const auto found = settings.find(a.setting);
    out.emplace_back(a.setting, found == settings.end() ? "" : found->get<std::string>());
  }
  return out;
}

}  // namespace

SweepReport collect_sweep_report(const ExecSpace& space, const std::string& dir,
                                 const std::string& data_override) {
  const sweep::SweepPlan plan = sweep::read_plan(dir);
  SweepReport report;
  report.directory = dir;
  report.axes = plan.space.axes;
  report.populations = plan.populations.size();
  report.schedule = plan.schedule.kind;
  std::map<std::string, const sweep::MemberPlan*> by_run;
  for (const sweep::MemberPlan& m : plan.members)
    by_run[m.run] = &m;
  const nlohmann::json board = sweep::leaderboard_json(plan);
  for (const nlohmann::json& m : board["members"]) {
    SweepMemberRow row;
    row.rank = m["rank"].get<std::size_t>();
    row.member = m["run"].get<std::string>();
    row.member = row.member.substr(row.member.find_last_of('/') + 1);
    row.seed = m["seed"].get<std::uint64_t>();
    row.settings = settings_of(m["settings"], report.axes);
    row.status = m["status"].get<std::string>();
    row.best_epoch = m["best_epoch"].get<std::size_t>();
    row.validation_sharpe = io::number_of(m["validation_sharpe"]);
    const nlohmann::json& best = m["validation"];
    row.total_return = best.contains("total_return") ? io::number_of(best["total_return"]) : nan;
    row.max_drawdown = best.contains("max_drawdown") ? io::number_of(best["max_drawdown"]) : nan;
    row.test_sharpe = io::number_of(m["test_sharpe"]);
    if (row.status != "pending" && row.status != "failed")
      row.epochs = read_epochs(dir + "/" + m["run"].get<std::string>());
    row.schedule = by_run.at(m["run"].get<std::string>())->result.schedule;
    report.members.push_back(std::move(row));
  }
  for (const nlohmann::json& c : board["combinations"]) {
    SweepCombinationRow row;
    row.rank = c["rank"].get<std::size_t>();
    row.members = c["members"].get<std::size_t>();
    row.finished = c["finished"].get<std::size_t>();
    row.settings = settings_of(c["settings"], report.axes);
    row.mean = io::number_of(c["validation_sharpe_mean"]);
    row.stdev = io::number_of(c["validation_sharpe_std"]);
    row.minimum = io::number_of(c["validation_sharpe_min"]);
    report.combinations.push_back(std::move(row));
  }
  report.selection = plan.selection;
  // The best member: the leaderboard's first, unless no member finished (failed members rank
  // last).
  if (!report.members.empty() && report.members.front().status != "failed" &&
      std::isfinite(report.members.front().validation_sharpe)) {
    report.has_best = true;
    report.best = collect_run_report(
        space, dir + "/" + board["members"][0]["run"].get<std::string>(), data_override);
  }
  return report;
}

namespace {

std::string member_name(const std::string& run) {
  return run.substr(run.find_last_of('/') + 1);
}

}  // namespace

std::vector<AncestorEpoch> winner_ancestry(const SweepReport& r) {
  std::map<std::string, const SweepMemberRow*> rows;
  for (const SweepMemberRow& m : r.members)
    rows[m.member] = &m;
  std::vector<AncestorEpoch> out;
  if (r.members.empty() || r.members.front().epochs.empty())
    return out;
  // The copy member m made at the end of epoch e, if any.
  auto copy_at = [&](const SweepMemberRow& m, std::size_t e) -> const nlohmann::json* {
    for (const nlohmann::json& step : m.schedule) {
      if (step.contains("copied") && step["epoch"].get<std::size_t>() == e)
        return &step;
    }
    return nullptr;
  };
  // Member m's settings during epoch e: those of its last copy before e, else its own.
  auto settings_during = [&](const SweepMemberRow& m, std::size_t e) {
    std::vector<std::pair<std::string, std::string>> settings = m.settings;
    for (const nlohmann::json& step : m.schedule) {
      if (!step.contains("copied") || step["epoch"].get<std::size_t>() >= e)
        continue;
      for (auto& [name, value] : settings) {
        if (step["settings"].contains(name))
          value = step["settings"][name].get<std::string>();
      }
    }
    return settings;
  };
  const SweepMemberRow* at = &r.members.front();
  for (std::size_t e = at->epochs.back().epoch; e >= 1; --e) {
    out.push_back({e, at->member, settings_during(*at, e)});
    if (const nlohmann::json* copy = copy_at(*at, e - 1))
      at = rows.at(member_name((*copy)["copied"].get<std::string>()));
  }
  std::reverse(out.begin(), out.end());
  return out;
}

namespace {

constexpr const char* other_colour = "#aab3c2";

std::string cell(double v) {
  return escape_html(io::format_metric(v));
}

// A point per member (x[i], y[i], in the leaderboard's order): the others in grey, the best
// in blue, drawn last.
std::vector<Series> member_points(const std::vector<double>& x, const std::vector<double>& y) {
  Series best{"best", policy_colour, {}, {}, false, true};
  Series others{"members", other_colour, {}, {}, false, true};
  for (std::size_t i = 0; i < x.size(); ++i) {
    Series& s = i == 0 ? best : others;
    s.x.push_back(x[i]);
    s.y.push_back(y[i]);
  }
  return {others, best};
}

// Each swept setting against the members' best validation Sharpe: numbers on a linear axis
// (a log axis for a log-uniform range, or values spanning more than a factor of 100 and all
// positive), anything else (lists, words, network shapes) on a categorical axis in the order
// the values first appear in the space.
std::string setting_chart(const SweepReport& r, std::size_t a) {
  const sweep::Axis& axis = r.axes[a];
  LineChart chart;
  chart.id = "setting-" + axis.setting;
  chart.title = axis.setting + " against the best validation Sharpe of each member";
  chart.x.label = axis.setting;
  chart.y.label = "best validation Sharpe";
  chart.legend = false;
  std::vector<std::string> values;
  for (const SweepMemberRow& m : r.members)
    values.push_back(m.settings[a].second);
  bool numeric = true;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  std::vector<double> x;
  for (const std::string& v : values) {
    std::size_t used = 0;
    double d = nan;
    try {
      d = std::stod(v, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != v.size() || v.empty() || !std::isfinite(d)) {
      numeric = false;
      break;
    }
    x.push_back(d);
    lo = std::min(lo, d);
    hi = std::max(hi, d);
  }
  if (numeric) {
    chart.x.log = lo > 0 && (axis.log || hi > 100 * lo);
    if (chart.x.log)
      chart.x.label += " (log scale)";
  } else {
    // The categories in the order of the space's list (or of first appearance).
    std::vector<std::string> categories = axis.values;
    for (const std::string& v : values) {
      if (std::find(categories.begin(), categories.end(), v) == categories.end())
        categories.push_back(v);
    }
    x.clear();
    for (const std::string& v : values) {
      x.push_back(static_cast<double>(std::find(categories.begin(), categories.end(), v) -
                                      categories.begin()));
    }
    chart.x.categories = categories;
  }
  std::vector<double> y;
  for (const SweepMemberRow& m : r.members)
    y.push_back(m.validation_sharpe);
  chart.series = member_points(x, y);
  return render(chart);
}

// "How much of the winner is luck": the winner's validation and test Sharpe ratios, the
// expected maximum of the members without skill, the deflated Sharpe ratio and PBO, the
// histogram of the splits' logits and every member's validation against test Sharpe.
std::string luck_section(const SweepReport& r) {
  const nlohmann::json& s = r.selection;
  if (s.is_null())
    return "";
  std::ostringstream out;
  out << "<h2 id=\"luck\">How much of the winner is luck</h2>\n";
  if (s.contains("note")) {
    out << "<p class=\"meta\">" << escape_html(s["note"].get<std::string>()) << ".</p>\n";
    return out.str();
  }
  const nlohmann::json& w = s["winner"];
  const double dsr = io::number_of(s["deflated_sharpe"]), pbo = io::number_of(s["pbo"]);
  out << "<table id=\"selection\">\n"
      << "<tr><td>the winner's validation Sharpe (the window that chose it)</td><td "
         "class=\"value\">"
      << cell(io::number_of(w["validation_sharpe"])) << "</td></tr>\n"
      << "<tr><td>the winner's Sharpe on the unseen test window</td><td class=\"value\">"
      << cell(io::number_of(w["test_sharpe"])) << "</td></tr>\n"
      << "<tr><td>expected best of " << s["trials"]
      << " members without skill (annualised)</td><td class=\"value\">"
      << cell(io::number_of(s["expected_max_sharpe_annualised"])) << "</td></tr>\n"
      << "<tr><td>deflated Sharpe ratio (above 0.95: the edge survives the number of "
         "members)</td><td class=\"value\">"
      << cell(dsr) << "</td></tr>\n"
      << "<tr><td>probability of backtest overfitting (" << s["splits"] << " splits of "
      << s["blocks"] << " blocks; about 0.5 without an edge)</td><td class=\"value\">" << cell(pbo)
      << "</td></tr>\n"
      << "<tr><td>probability of loss out of sample</td><td class=\"value\">"
      << cell(io::number_of(s["probability_of_loss"])) << "</td></tr>\n"
      << "<tr><td>slope of out-of-sample on in-sample Sharpe</td><td class=\"value\">"
      << cell(io::number_of(s["slope"])) << "</td></tr>\n</table>\n"
      << "<p class=\"meta\">"
      << (dsr > 0.95 && pbo < 0.5
              ? "The winner's edge survives the number of members it was chosen from."
              : "The winner's validation Sharpe is within what chance among this many members "
                "explains: expect its test Sharpe, not its validation Sharpe.")
      << " Definitions: docs/METRICS.md, Selection statistics.</p>\n";
  if (s.contains("pbo_note"))
    out << "<p class=\"meta\">PBO: " << escape_html(s["pbo_note"].get<std::string>()) << ".</p>\n";
  if (!s["logit_histogram"].empty()) {
    Histogram h;
    h.id = "pbo-logits";
    h.title =
        "Logit of the in-sample best's out-of-sample rank, one per split (PBO: the share "
        "at or below 0)";
    h.x.label = "logit of the relative rank";
    for (const nlohmann::json& l : s["logit_histogram"]) {
      h.values.push_back(io::number_of(l["logit"]));
      h.weights.push_back(l["splits"].get<double>());
    }
    h.bins = 20;
    h.counted = "splits";
    h.colour = policy_colour;
    out << render(h);
  }
  {
    LineChart chart;
    chart.id = "validation-test";
    chart.title = "Each member's validation Sharpe against its test Sharpe (the winner in blue)";
    chart.x.label = "validation Sharpe (best epoch)";
    chart.y.label = "test Sharpe (the same policy)";
    chart.legend = false;
    chart.zero_line = true;
    std::vector<double> x, y;
    for (const SweepMemberRow& m : r.members) {
      x.push_back(m.validation_sharpe);
      y.push_back(m.test_sharpe);
    }
    chart.series = member_points(x, y);
    out << render(chart);
  }
  return out.str();
}

// What the schedule did. PBT: the lineage (a row per member over its epochs, a line from the
// member copied at epoch E to the member that copied it at E + 1, the winner's ancestry in
// blue) and the winner's settings epoch by epoch as its weights lived them. Halving: its rungs.
std::string schedule_section(const SweepReport& r) {
  std::ostringstream out;
  if (r.schedule == "halving") {
    out << "<h2 id=\"schedule\">Successive halving</h2>\n<table id=\"rungs\">\n"
        << "<tr><th>after epoch</th><th>members stopped</th></tr>\n";
    std::map<std::size_t, std::vector<std::string>> rungs;
    for (const SweepMemberRow& m : r.members) {
      for (const nlohmann::json& step : m.schedule)
        rungs[step["epoch"].get<std::size_t>()].push_back(m.member);
    }
    for (auto& [epoch, stopped] : rungs) {
      std::sort(stopped.begin(), stopped.end());
      out << "<tr><td class=\"value\">" << epoch << "</td><td>";
      for (const std::string& m : stopped)
        out << (&m == &stopped.front() ? "" : " ") << escape_html(m);
      out << "</td></tr>\n";
    }
    out << "</table>\n";
    return out.str();
  }
  if (r.schedule != "pbt")
    return "";
  out << "<h2 id=\"schedule\">Population based training</h2>\n<p class=\"meta\">After each "
         "decision the worst members copied the networks, optimizer state and settings of the "
         "best and perturbed the settings; their replay and environments stayed their own. "
         "The selection statistics count every member trained.</p>\n";
  std::vector<std::string> names;
  for (const SweepMemberRow& m : r.members)
    names.push_back(m.member);
  std::sort(names.begin(), names.end());
  auto row_of = [&](const std::string& name) {
    return static_cast<double>(std::lower_bound(names.begin(), names.end(), name) - names.begin());
  };
  const std::vector<AncestorEpoch> ancestry = winner_ancestry(r);
  std::set<std::pair<std::size_t, std::string>> winning;  // (epoch, member) of the ancestry
  for (const AncestorEpoch& a : ancestry)
    winning.insert({a.epoch, a.member});
  {
    LineChart chart;
    chart.id = "lineage";
    chart.title =
        "Lineage: a row per member over its epochs; a line from member A at epoch E to member B "
        "at E + 1 where B copied A after epoch E (the winner's ancestry in blue)";
    chart.x.label = "epoch";
    chart.y.label = "member (in the order of their names)";
    chart.legend = false;
    std::vector<Series> copies, ancestors;
    for (const SweepMemberRow& m : r.members) {
      if (m.epochs.empty())
        continue;
      const double y = row_of(m.member);
      chart.series.push_back(
          {m.member, other_colour, {1.0, static_cast<double>(m.epochs.back().epoch)}, {y, y}});
      for (const nlohmann::json& step : m.schedule) {
        if (!step.contains("copied"))
          continue;
        const std::size_t e = step["epoch"].get<std::size_t>();
        const std::string from = member_name(step["copied"].get<std::string>());
        const bool ancestral = winning.count({e, from}) > 0 && winning.count({e + 1, m.member}) > 0;
        Series edge{from + " > " + m.member,
                    ancestral ? policy_colour : "#56627a",
                    {static_cast<double>(e), static_cast<double>(e + 1)},
                    {row_of(from), y}};
        (ancestral ? ancestors : copies).push_back(edge);
      }
    }
    chart.series.insert(chart.series.end(), copies.begin(), copies.end());
    chart.series.insert(chart.series.end(), ancestors.begin(), ancestors.end());
    out << render(chart);
  }
  if (ancestry.empty())
    return out.str();
  out << "<p class=\"meta\">The winner's settings epoch by epoch, as its weights lived them "
         "(the member whose slot trained them then).</p>\n<table id=\"winner-schedule\">\n"
      << "<tr><th>epoch</th><th>trained in</th>";
  for (const auto& setting : ancestry.front().settings)
    out << "<th>" << escape_html(setting.first) << "</th>";
  out << "</tr>\n";
  for (const AncestorEpoch& a : ancestry) {
    out << "<tr><td class=\"value\">" << a.epoch << "</td><td>" << escape_html(a.member) << "</td>";
    for (const auto& setting : a.settings)
      out << "<td>" << escape_html(setting.second) << "</td>";
    out << "</tr>\n";
  }
  out << "</table>\n";
  for (std::size_t i = 0; i < r.axes.size(); ++i) {
    const sweep::Axis& axis = r.axes[i];
    Series values{axis.setting, policy_colour};
    values.steps = true;
    bool numeric = true;
    for (const AncestorEpoch& a : ancestry) {
      const std::string& text = a.settings[i].second;
      char* end = nullptr;
      const double v = std::strtod(text.c_str(), &end);
      numeric = numeric && end != text.c_str() && *end == '\0';
      values.x.push_back(static_cast<double>(a.epoch));
      values.y.push_back(v);
    }
    if (!numeric)
      continue;
    LineChart chart;
    chart.id = "schedule-" + axis.setting;
    chart.title = "The winner's " + axis.setting + " by epoch";
    chart.x.label = "epoch";
    chart.y.label = axis.setting;
    chart.y.log = axis.log;
    chart.legend = false;
    chart.series.push_back(values);
    out << render(chart);
  }
  return out.str();
}

}  // namespace

std::string render_html(const SweepReport& r) {
  std::ostringstream out;
  out << document_head("dqntrader sweep report: " + r.directory);
  std::size_t finished = 0;
  for (const SweepMemberRow& m : r.members)
    finished += std::isfinite(m.validation_sharpe) ? 1 : 0;
  out << "<h1>dqntrader sweep report</h1>\n<p class=\"meta\">Sweep <code>"
      << escape_html(r.directory) << "</code>: " << r.members.size() << " members ("
      << r.combinations.size() << " combinations of settings times their seeds) in "
      << r.populations << " populations; " << finished << " with results.";
  if (!r.axes.empty()) {
    out << " Swept:";
    for (const sweep::Axis& a : r.axes) {
      out << (&a == &r.axes.front() ? " " : "; ") << "<code>" << escape_html(a.setting)
          << "</code>";
    }
    out << ".";
  }
  out << "</p>\n";

  out << "<h2>Validation Sharpe of every member over its epochs</h2>\n";
  {
    LineChart chart;
    chart.id = "member-sharpe";
    chart.title = "Validation Sharpe per epoch: the best member in blue, the others in grey";
    chart.x.label = "epoch";
    chart.y.label = "validation Sharpe";
    chart.legend = false;
    // The others first, so that the best is drawn on top.
    for (std::size_t i = r.members.size(); i-- > 0;) {
      const SweepMemberRow& m = r.members[i];
      if (m.epochs.empty())
        continue;
      Series s{m.member, i == 0 ? policy_colour : other_colour};
      for (const EpochPoint& p : m.epochs) {
        s.x.push_back(p.epoch);
        s.y.push_back(p.validation_sharpe);
      }
      chart.series.push_back(std::move(s));
    }
    out << render(chart);
  }

  if (!r.axes.empty()) {
    out << "<h2>Each swept setting against the validation Sharpe</h2>\n";
    for (std::size_t a = 0; a < r.axes.size(); ++a)
      out << setting_chart(r, a);
  }

  if (r.has_best) {
    const SweepMemberRow& m = r.members.front();
    out << "<h2>The best member on the validation window</h2>\n<p class=\"meta\">Member <code>"
        << escape_html(m.member) << "</code> (seed " << m.seed;
    for (const auto& [name, value] : m.settings)
      out << ", " << escape_html(name) << " " << escape_html(value);
    out << "), best policy from epoch " << r.best.best_epoch << "; network "
        << escape_html(r.best.network) << "; validation bars " << r.best.validation.first_bar
        << " .. " << r.best.validation.last_bar << ".</p>\n";
    std::vector<double> time(r.best.validation.timestamps_ms.begin(),
                             r.best.validation.timestamps_ms.end());
    std::vector<EquityCurve> curves = {{"best member", policy_colour, &r.best.validation.policy}};
    for (const BaselineCurve& b : r.best.validation.baselines) {
      if (b.policy == "buy-and-hold")
        curves.push_back({b.policy, baseline_colour(b.policy), &b.path});
    }
    out << equity_chart("best-equity", "Equity (E_0 = 1): the best member against buy-and-hold",
                        curves, time);
  }

  out << schedule_section(r);
  out << luck_section(r);

  out << "<h2>Leaderboard: members</h2>\n<p class=\"meta\">Ranked by the validation Sharpe of "
         "each member's best epoch (leaderboard.csv and leaderboard.json hold every metric).</p>\n"
      << "<table id=\"leaderboard\">\n<tr><th>rank</th><th>member</th><th>seed</th>";
  for (const sweep::Axis& a : r.axes)
    out << "<th>" << escape_html(a.setting) << "</th>";
  out << "<th>status</th><th>best epoch</th><th>validation Sharpe</th><th>total return</th>"
         "<th>max drawdown</th><th>test Sharpe</th></tr>\n";
  for (const SweepMemberRow& m : r.members) {
    out << "<tr data-member=\"" << escape_html(m.member) << "\"><td class=\"value\">" << m.rank
        << "</td><td>" << escape_html(m.member) << "</td><td class=\"value\">" << m.seed << "</td>";
    for (const auto& setting : m.settings)
      out << "<td>" << escape_html(setting.second) << "</td>";
    out << "<td>" << escape_html(m.status) << "</td><td class=\"value\">" << m.best_epoch
        << "</td><td class=\"value\">" << cell(m.validation_sharpe) << "</td><td class=\"value\">"
        << escape_html(io::format_percent(m.total_return)) << "</td><td class=\"value\">"
        << escape_html(io::format_percent(m.max_drawdown)) << "</td><td class=\"value\">"
        << cell(m.test_sharpe) << "</td></tr>\n";
  }
  out << "</table>\n";

  out << "<h2>Leaderboard: settings over their seeds</h2>\n<table id=\"combinations\">\n"
      << "<tr><th>rank</th>";
  for (const sweep::Axis& a : r.axes)
    out << "<th>" << escape_html(a.setting) << "</th>";
  out << "<th>members</th><th>mean Sharpe</th><th>std</th><th>min</th></tr>\n";
  for (const SweepCombinationRow& c : r.combinations) {
    out << "<tr data-rank=\"" << c.rank << "\"><td class=\"value\">" << c.rank << "</td>";
    for (const auto& setting : c.settings)
      out << "<td>" << escape_html(setting.second) << "</td>";
    out << "<td class=\"value\">" << c.finished << " of " << c.members
        << "</td><td class=\"value\">" << cell(c.mean) << "</td><td class=\"value\">"
        << cell(c.stdev) << "</td><td class=\"value\">" << cell(c.minimum) << "</td></tr>\n";
  }
  out << "</table>\n</body>\n</html>\n";
  return out.str();
}

}  // namespace dqntrader::report

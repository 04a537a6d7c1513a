// The run report: chart thinning and ticks against their definitions, and a report of a real
// run checked against what the run itself recorded (final_metrics.json), against the closes
// (buy-and-hold without costs) and against the equity curve it draws. The page as a browser
// renders it is checked by tests/browser/check_report.py.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>

#include "backends/execution.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/data/csv_reader.hpp"
#include "dqntrader/data/synthetic.hpp"
#include "dqntrader/eval/metrics_json.hpp"
#include "dqntrader/io/json_values.hpp"
#include "dqntrader/report/run_report.hpp"
#include "dqntrader/report/svg_chart.hpp"
#include "dqntrader/train/training_run.hpp"
#include "test_support.hpp"

namespace dqntrader {
namespace {

namespace fs = std::filesystem;
constexpr double nan = std::numeric_limits<double>::quiet_NaN();

// Metrics go to JSON as numbers, null for NaN and "inf"/"-inf" for infinities (no JSON number
// holds them); reading them back gives the same values, and NaN for what is no metric.
TEST(MetricJson, NumbersReadBackAsWritten) {
  const double inf = std::numeric_limits<double>::infinity();
  for (double v : {0.0, -1.5, 1e300, 4.9e-324, inf, -inf}) {
    const nlohmann::json written = io::json_number(v);
    EXPECT_EQ(io::number_of(nlohmann::json::parse(written.dump())), v) << written.dump();
  }
  EXPECT_EQ(io::json_number(inf), "inf");
  EXPECT_TRUE(io::json_number(nan).is_null());
  EXPECT_TRUE(std::isnan(io::number_of(io::json_number(nan))));
  EXPECT_TRUE(std::isnan(io::number_of(nlohmann::json())));
  EXPECT_TRUE(std::isnan(io::number_of(nlohmann::json("infinite"))));
}

TEST(ChartThinning, KeepsShortSeriesWhole) {
  const std::vector<double> y = {3, 1, 4, 1, 5};
  EXPECT_EQ(report::thin(y, 2), (std::vector<std::size_t>{0, 1, 2, 3, 4}));
}

TEST(ChartThinning, KeepsEndsExtremesAndGapsOfALongSeries) {
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE(testing::seed_note(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> step(0.0, 1.0);
  std::vector<double> y(200000);
  double level = 0;
  for (double& v : y)
    v = level += step(rng);
  const std::size_t gap = 1000 + rng() % 150000;
  for (std::size_t i = gap; i < gap + 500; ++i)
    y[i] = nan;
  const std::size_t buckets = 100;
  const std::vector<std::size_t> kept = report::thin(y, buckets);
  ASSERT_FALSE(kept.empty());
  EXPECT_TRUE(std::is_sorted(kept.begin(), kept.end()));
  EXPECT_EQ(std::adjacent_find(kept.begin(), kept.end()), kept.end()) << "an index twice";
  EXPECT_LE(kept.size(), 4 * buckets + 8);
  EXPECT_EQ(kept.front(), 0u);
  EXPECT_EQ(kept.back(), y.size() - 1);
  // The extremes of every bucket (so the global ones) are drawn.
  for (std::size_t b = 0; b < buckets; ++b) {
    const std::size_t begin = y.size() * b / buckets, end = y.size() * (b + 1) / buckets;
    std::size_t lo = end, hi = end;
    for (std::size_t i = begin; i < end; ++i) {
      if (std::isnan(y[i]))
        continue;
      if (lo == end || y[i] < y[lo])
        lo = i;
      if (hi == end || y[i] > y[hi])
        hi = i;
    }
    if (lo == end)
      continue;
    EXPECT_TRUE(std::binary_search(kept.begin(), kept.end(), lo)) << "bucket " << b;
    EXPECT_TRUE(std::binary_search(kept.begin(), kept.end(), hi)) << "bucket " << b;
  }
  // The gap stays a gap: exactly one NaN drawn, with the points on both sides of it.
  std::size_t gaps = 0;
  for (std::size_t i : kept)
    gaps += std::isnan(y[i]) ? 1 : 0;
  EXPECT_EQ(gaps, 1u);
  EXPECT_TRUE(std::binary_search(kept.begin(), kept.end(), gap - 1));
  EXPECT_TRUE(std::binary_search(kept.begin(), kept.end(), gap + 500));
}

TEST(ChartTicks, AreRoundStepsCoveringTheRange) {
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE(testing::seed_note(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> exponent(-6, 6), unit(-1, 1);
  for (int trial = 0; trial < 200; ++trial) {
    const double scale = std::pow(10.0, exponent(rng));
    double lo = unit(rng) * scale, hi = unit(rng) * scale;
    if (lo > hi)
      std::swap(lo, hi);
    if (!(lo < hi))
      continue;
    const std::vector<double> ticks = report::nice_ticks(lo, hi, 5);
    ASSERT_GE(ticks.size(), 2u) << lo << " .. " << hi;
    EXPECT_LE(ticks.size(), 11u);
    // The step as the ticks show it (their difference, which carries the rounding of their
    // magnitude: far from zero, a narrow range's ticks are many steps from it), then the round
    // step it must be.
    const double shown = ticks[1] - ticks[0];
    const double power = std::pow(10.0, std::floor(std::log10(shown) + 1e-9));
    const double mantissa = shown / power;
    EXPECT_TRUE(std::fabs(mantissa - 1) < 1e-6 || std::fabs(mantissa - 2) < 1e-6 ||
                std::fabs(mantissa - 5) < 1e-6)
        << "step " << shown;
    const double step = std::round(mantissa) * power;
    for (double t : ticks) {
      EXPECT_GE(t, lo - 1e-9 * step);
      EXPECT_LE(t, hi + 1e-9 * step);
      EXPECT_LT(std::fabs(t / step - std::round(t / step)), 1e-6) << t << " is not on the step";
    }
    EXPECT_LT(ticks.front() - lo, step * (1 + 1e-9));
    EXPECT_LT(hi - ticks.back(), step * (1 + 1e-9));
  }
}

TEST(ChartMarkup, EscapesTextAndDrawsGapsAsNewSubpaths) {
  report::LineChart chart;
  chart.id = "x";
  chart.title = "a <b> & \"c\"";
  chart.series.push_back({"s", "#000", {0, 1, 2, 3}, {1, 2, nan, 4}});
  const std::string svg = report::render(chart);
  EXPECT_NE(svg.find("a &lt;b&gt; &amp; &quot;c&quot;"), std::string::npos);
  EXPECT_EQ(svg.find("<b>"), std::string::npos);
  const std::size_t d = svg.find(" d=\"");
  ASSERT_NE(d, std::string::npos);
  const std::string path = svg.substr(d + 4, svg.find('"', d + 4) - d - 4);
  EXPECT_EQ(std::count(path.begin(), path.end(), 'M'), 2) << path;
  EXPECT_EQ(std::count(path.begin(), path.end(), 'L'), 1) << path;
}

TEST(ChartMarkup, ALogAxisSpacesDecadesEvenlyAndLeavesOutNonPositiveValues) {
  report::LineChart chart;
  chart.id = "log";
  chart.y.log = true;
  chart.series.push_back({"s", "#000", {0, 1, 2, 3}, {1, 10, 100, -5}});
  const std::string svg = report::render(chart);
  const std::size_t d = svg.find(" d=\"");
  ASSERT_NE(d, std::string::npos);
  std::istringstream path(svg.substr(d + 4, svg.find('"', d + 4) - d - 4));
  std::vector<double> ys;
  std::string command;
  double x = 0, y = 0;
  while (path >> command >> y) {  // "M<x> <y>" / "L<x> <y>"
    x = std::stod(command.substr(1));
    ys.push_back(y);
  }
  ASSERT_EQ(ys.size(), 3u) << "the value -5 has no place on a log axis";
  EXPECT_NEAR(ys[0] - ys[1], ys[1] - ys[2], 0.02);
  EXPECT_GT(ys[0], ys[2]) << "larger values are drawn higher";
  EXPECT_GT(x, 0);
}

// A policy whose equity passes the largest double (+inf) is drawn from its logarithm: log10
// of equity on a linear axis, every point of every series a finite coordinate, and a
// drawdown that the log gives where the quotient of infinities would not.
TEST(RunReportPage, DrawsEquityPastTheLargestDoubleFromItsLogarithm) {
  report::RunReport r;
  r.run_directory = "run";
  r.epochs.push_back(report::EpochPoint{1, 0.5, 0.1, 0.05, 1.0, 2.0});
  const std::size_t n = 4;
  r.validation.timestamps_ms = {0, 60000, 120000, 180000, 240000};
  const double ln10 = std::log(10.0);
  // log10 E: 0, 200, 400, 380 (a drawdown of 1 - 1e-20), 500.
  r.validation.policy.log_equity = {0, 200 * ln10, 400 * ln10, 380 * ln10, 500 * ln10};
  const double inf = std::numeric_limits<double>::infinity();
  r.validation.policy.equity = {1, 1e200, inf, inf, inf};
  r.validation.policy.positions = {1, 1, 1, 1};
  r.validation.policy.returns = {1e200, 1e200, -1, 1e120};
  report::BaselineCurve hold{"buy-and-hold", {}, {}};
  hold.path.equity = {1, 2, 4, 2, 3};
  hold.path.log_equity = {0, std::log(2.0), std::log(4.0), std::log(2.0), std::log(3.0)};
  hold.path.positions = {1, 1, 1, 1};
  hold.path.returns = {1, 1, -0.5, 0.5};
  r.validation.baselines.push_back(hold);
  r.validation.policy_metrics.bars = static_cast<std::int64_t>(n);
  const std::string html = report::render_html(r);
  const std::size_t figure = html.find("id=\"chart-equity\"");
  ASSERT_NE(figure, std::string::npos);
  const std::string equity = html.substr(figure, html.find("</figure>", figure) - figure);
  EXPECT_NE(equity.find("log10 equity"), std::string::npos);
  for (const char* bad : {"nan", "inf"})
    EXPECT_EQ(equity.find(std::string(" ") + bad), std::string::npos) << bad;
  std::size_t paths = 0;
  for (std::size_t at = equity.find(" d=\""); at != std::string::npos;
       at = equity.find(" d=\"", at + 1)) {
    const std::string d = equity.substr(at + 4, equity.find('"', at + 4) - at - 4);
    EXPECT_EQ(std::count(d.begin(), d.end(), 'M') + std::count(d.begin(), d.end(), 'L'), 5) << d;
    ++paths;
  }
  EXPECT_EQ(paths, 2u);
}

class RunReport : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir =
        fs::temp_directory_path() / ("dqntrader-report-" + std::to_string(testing::test_seed()));
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }

  // A short run on a CSV file, without costs (test_fraction of its bars held out).
  std::string train_run(double test_fraction = 0.2) {
    data::SynthConfig synth;
    synth.bars = 2500;
    synth.seed = 5;
    data::write_bars_csv((m_dir / "bars.csv").string(), data::generate_bars(synth));
    train::TrainConfig config;
    config.data = (m_dir / "bars.csv").string();
    config.cost = 0;
    config.epochs = 3;
    config.steps_per_epoch = 40;
    config.learning_starts = 256;
    config.hidden = {16};
    config.test_fraction = test_fraction;
    config.out = (m_dir / "run").string();
    std::ostringstream log;
    train::run_training(m_stream.space(), config, log);
    return config.out;
  }

  fs::path m_dir;
  exec::StreamSpace m_stream;
};

double json_double(const nlohmann::json& v) {
  return v.is_null() ? nan : v.get<double>();
}

TEST_F(RunReport, AgreesWithTheRunTheClosesAndItsOwnCurves) {
  const std::string run = train_run();
  const report::RunReport r = report::collect_run_report(m_stream.space(), run);

  // The metrics are those the run recorded for its best policy.
  nlohmann::json recorded;
  std::ifstream(run + "/final_metrics.json") >> recorded;
  const nlohmann::json now = eval::to_json(r.validation.policy_metrics);
  for (const auto& item : recorded.items()) {
    if (item.key() == "baselines" || item.key() == "validation_window" || item.key() == "test")
      continue;  // the built-in policies' metrics and the test window, below, and the window
    if (item.value().is_number_integer()) {
      EXPECT_EQ(now.at(item.key()), item.value()) << item.key();
    } else if (item.value().is_number()) {
      EXPECT_NEAR(json_double(now.at(item.key())), item.value().get<double>(),
                  1e-12 * (1 + std::fabs(item.value().get<double>())))
          << item.key();
    } else {
      EXPECT_EQ(now.at(item.key()), item.value()) << item.key();
    }
  }
  // The curves drawn are the metrics' curves.
  const std::size_t n = r.validation.policy.returns.size();
  ASSERT_EQ(r.validation.policy.equity.size(), n + 1);
  ASSERT_EQ(r.validation.timestamps_ms.size(), n + 1);
  EXPECT_EQ(static_cast<std::int64_t>(n), r.validation.policy_metrics.bars);
  EXPECT_NEAR(r.validation.policy.equity.back() - 1, r.validation.policy_metrics.total_return,
              1e-9);
  double peak = r.validation.policy.equity.front(), deepest = 0;
  for (double e : r.validation.policy.equity) {
    peak = std::max(peak, e);
    deepest = std::min(deepest, e / peak - 1);
  }
  EXPECT_NEAR(deepest, r.validation.policy_metrics.max_drawdown, 1e-9);
  // The built-in policies: buy-and-hold without costs ends at the last close over the first of
  // the window, flat stays at 1, and each is drawn with the metrics the run recorded for it.
  const data::Bars bars = data::read_bars_csv((m_dir / "bars.csv").string());
  std::vector<std::string> names;
  for (const report::BaselineCurve& b : r.validation.baselines)
    names.push_back(b.policy);
  ASSERT_EQ(names, (std::vector<std::string>{"buy-and-hold", "flat", "sign-of-ofi"}));
  EXPECT_NEAR(r.validation.baselines[0].path.equity.back(),
              bars.close[r.validation.last_bar] / bars.close[r.validation.first_bar], 1e-9);
  for (double e : r.validation.baselines[1].path.equity)
    ASSERT_EQ(e, 1.0);
  for (const report::BaselineCurve& b : r.validation.baselines) {
    ASSERT_EQ(b.path.equity.size(), n + 1) << b.policy;
    EXPECT_NEAR(b.path.equity.back() - 1, b.metrics.total_return, 1e-9) << b.policy;
    // What the run recorded for it, key by key (flat's Sharpe is NaN: recorded as null).
    EXPECT_EQ(recorded.at("baselines").at(b.policy), eval::to_json(b.metrics)) << b.policy;
  }
  EXPECT_EQ(r.validation.timestamps_ms.front(), bars.timestamp_ms[r.validation.first_bar]);
  EXPECT_EQ(
      recorded.at("validation_window"),
      (nlohmann::json{{"first_bar", r.validation.first_bar}, {"last_bar", r.validation.last_bar}}));
  EXPECT_EQ(r.epochs.size(), 3u);
  for (const report::EpochPoint& p : r.epochs)
    EXPECT_GT(p.seconds, 0) << "epoch " << p.epoch;

  // The test window (the last fifth of the bars, by default): the report's evaluation of the
  // best policy and of the built-in policies there is what the run recorded at its end, and
  // its bars are the last ones, after the validation window's.
  ASSERT_TRUE(r.test.has_value());
  const nlohmann::json& test = recorded.at("test");
  EXPECT_EQ(test.at("window").at("first_bar"), r.test->first_bar);
  EXPECT_EQ(test.at("window").at("last_bar"), r.test->last_bar);
  EXPECT_EQ(r.test->last_bar, bars.size() - 1);
  EXPECT_EQ(r.test->first_bar, bars.size() - 500);  // 2,500 bars x 0.2
  EXPECT_EQ(r.validation.last_bar, r.test->first_bar - 1);
  EXPECT_EQ(test.at("best"), eval::to_json(r.test->policy_metrics));
  EXPECT_NEAR(r.test->policy.equity.back() - 1, r.test->policy_metrics.total_return, 1e-9);
  EXPECT_EQ(r.test->baselines.size(), 3u);
  for (const report::BaselineCurve& b : r.test->baselines)
    EXPECT_EQ(test.at("baselines").at(b.policy), eval::to_json(b.metrics)) << b.policy;
  EXPECT_NEAR(r.test->baselines[0].path.equity.back(),
              bars.close[r.test->last_bar] / bars.close[r.test->first_bar], 1e-9);

  // The page: every chart, one table row per metric, nothing fetched from elsewhere.
  const std::string html = report::render_html(r);
  for (const char* id :
       {"equity", "drawdown", "position", "returns", "test-equity", "test-drawdown", "loss",
        "mean-q", "epsilon", "validation-sharpe", "epoch-seconds"}) {
    EXPECT_NE(html.find(std::string("id=\"chart-") + id + "\""), std::string::npos) << id;
  }
  std::size_t definitions = 0;
  eval::metric_definitions(definitions);
  std::size_t rows = 0;
  for (std::size_t at = html.find("<tr data-metric="); at != std::string::npos;
       at = html.find("<tr data-metric=", at + 1))
    ++rows;
  EXPECT_EQ(rows, definitions);
  for (const char* outside : {"http:", "https:", "<script", "url(", " src=", "<link", "@import"})
    EXPECT_EQ(html.find(outside), std::string::npos) << outside;
}

TEST_F(RunReport, FindsMovedDataButRefusesOtherData) {
  const std::string run = train_run();
  fs::rename(m_dir / "bars.csv", m_dir / "moved.csv");
  EXPECT_THROW(report::collect_run_report(m_stream.space(), run), InputError);
  EXPECT_NO_THROW(
      report::collect_run_report(m_stream.space(), run, (m_dir / "moved.csv").string()));
  data::SynthConfig other;
  other.bars = 2500;
  other.seed = 6;
  data::write_bars_csv((m_dir / "other.csv").string(), data::generate_bars(other));
  try {
    report::collect_run_report(m_stream.space(), run, (m_dir / "other.csv").string());
    ADD_FAILURE() << "other data accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("differ"), std::string::npos) << e.what();
  }
}

// A run directory from before test windows (its config.json has no test-fraction) held none
// out: its report reads the data as the run did.
TEST_F(RunReport, ARunFromBeforeTestWindowsReportsItsData) {
  const std::string run = train_run(0);
  nlohmann::json settings;
  std::ifstream(run + "/config.json") >> settings;
  settings.erase("test-fraction");
  settings.erase("test-data");
  std::ofstream(run + "/config.json") << settings.dump(2);
  const report::RunReport r = report::collect_run_report(m_stream.space(), run);
  EXPECT_FALSE(r.test.has_value());
  EXPECT_EQ(r.validation.last_bar, 2499u);
}

TEST_F(RunReport, NamesTheFileAndLineOfABrokenRecord) {
  const std::string run = train_run();
  std::ofstream(run + "/metrics.jsonl", std::ios::app) << "{\"epoch\": 4, \"loss\": }\n";
  try {
    report::collect_run_report(m_stream.space(), run);
    ADD_FAILURE() << "a broken metrics.jsonl accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("metrics.jsonl:4:"), std::string::npos) << e.what();
  }
  fs::remove(run + "/metrics.jsonl");
  try {
    report::collect_run_report(m_stream.space(), run);
    ADD_FAILURE() << "a missing metrics.jsonl accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("metrics.jsonl"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dqntrader

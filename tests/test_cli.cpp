// The dqntrader command as a user runs it: exit codes, messages, and no output files left
// behind on failure.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dqntrader/data/csv_reader.hpp"
#include "dqntrader/data/features.hpp"
#include "dqntrader/data/synthetic.hpp"
#include "dqntrader/data/timestamp.hpp"
#include "dqntrader/eval/policy_file.hpp"
#include "dqntrader/nn/network_spec.hpp"
#include "test_support.hpp"

namespace dqntrader {
namespace {

using testing::json_file;

namespace fs = std::filesystem;

struct Result {
  int code;
  std::string out, err;
};

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() / ("dqntrader-cli-" + std::to_string(testing::test_seed()));
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }

  std::string path(const std::string& name) const { return (m_dir / name).string(); }

  // environment: a prefix such as "env -u NAME NAME2=value" for the command.
  Result run(const std::string& arguments, const std::string& environment = "") const {
    const std::string out = path("stdout.txt"), err = path("stderr.txt");
    const std::string command = environment + " " + std::string(DQNTRADER_CLI_PATH) + " " +
                                arguments + " >" + out + " 2>" + err;
    const int status = std::system(command.c_str());
    return Result{WIFEXITED(status) ? WEXITSTATUS(status) : -1, testing::slurp(out),
                  testing::slurp(err)};
  }

  fs::path m_dir;
};

TEST_F(Cli, BacktestOfABuiltinPolicyWritesExactlyTheMetricKeys) {
  ASSERT_EQ(run("synth --bars 800 --seed 3 --out " + path("bars.csv")).code, 0);
  const Result r =
      run("backtest --data " + path("bars.csv") + " --policy sign-of-ofi --json " + path("m.json"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("sharpe"), std::string::npos);
  std::ifstream in(path("m.json"));
  const nlohmann::json all = nlohmann::json::parse(in);
  ASSERT_TRUE(all.is_array());
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0]["policy"], "sign-of-ofi");
  EXPECT_EQ(all[0]["window"], (nlohmann::json{{"first_bar", 0}, {"last_bar", 799}}));
  const nlohmann::json& j = all[0]["metrics"];
  const std::vector<std::string> keys = {
      "annual_volatility", "bars",          "cagr",          "calmar",  "expectancy", "exposure",
      "log_return",        "max_drawdown",  "profit_factor", "sharpe",  "sortino",    "total_cost",
      "total_return",      "trades_closed", "turnover",      "win_rate"};
  std::vector<std::string> got;
  for (const auto& item : j.items())
    got.push_back(item.key());
  EXPECT_EQ(got, keys);
  EXPECT_EQ(j["bars"], 799);
}

#if defined(DQNTRADER_BACKEND_OPENMP)
// dqntrader info names the host BLAS and the core it runs: the machine's OPENBLAS_CORETYPE
// wherever it is set, and otherwise never kernels below what this CPU has (the command routes
// OpenBLAS off such a core).
TEST_F(Cli, InfoNamesTheHostBlasAndTheCoreItRuns) {
  const std::string unset = "env -u OPENBLAS_CORETYPE -u DQNTRADER_OPENBLAS_ROUTED_FROM ";
  const Result own = run("info");
  ASSERT_EQ(own.code, 0) << own.err;
  ASSERT_NE(own.out.find("matrix products: "), std::string::npos) << own.out;
  if (own.out.find("matrix products: OpenBLAS") == std::string::npos)
    GTEST_SKIP() << "the host BLAS is not OpenBLAS:\n" << own.out;
  const Result chosen = run("info", unset + "OPENBLAS_CORETYPE=Haswell");
  ASSERT_EQ(chosen.code, 0) << chosen.err;
  EXPECT_NE(chosen.out.find("core Haswell: chosen by OPENBLAS_CORETYPE=Haswell"), std::string::npos)
      << chosen.out;
  const Result fresh = run("info", unset);
  ASSERT_EQ(fresh.code, 0) << fresh.err;
  const bool avx512_cpu = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
                          __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  const bool avx512_core = fresh.out.find("core SkylakeX") != std::string::npos ||
                           fresh.out.find("core Cooperlake") != std::string::npos ||
                           fresh.out.find("core SapphireRapids") != std::string::npos;
  if (avx512_cpu) {
    EXPECT_TRUE(avx512_core) << "this CPU has AVX-512:\n" << fresh.out;
  }
}
#endif

TEST_F(Cli, BacktestOfAPolicyFile) {
  data::SynthConfig synth;
  synth.bars = 600;
  const data::Bars bars = data::generate_bars(synth);
  data::write_bars_csv(path("bars.csv"), bars);
  eval::PolicyFile policy;
  policy.features = data::resolve_features(data::FeatureConfig{}, bars);
  policy.network.features = policy.features.count();
  policy.network.hidden = {16};
  policy.stats.mean.assign(policy.features.count(), 0.0);
  policy.stats.stdev.assign(policy.features.count(), 0.01);
  policy.positions = {-1.0, 0.0, 1.0};
  policy.parameters = nn::initial_parameters(nn::ParameterLayout(policy.network), 5);
  eval::write_policy(path("p.dqnpolicy"), policy);
  const Result r = run("backtest --data " + path("bars.csv") + " --weights " + path("p.dqnpolicy") +
                       " --json -");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"bars\": " + std::to_string(600 - policy.features.warmup() - 1)),
            std::string::npos)
      << r.out;
}

// Several policies in one call (two trained networks, evaluated in one pass, and two built-in
// policies beside them) give each the metrics it gets alone, on a window chosen by bar index
// or by timestamp, and walk-forward windows give each part's metrics.
// --returns writes the numbers the metrics are made from: each policy's Sharpe ratio, total
// return and exposure computed plainly from the file are the metrics --json gives, window by
// window, and every row's bar and time are the data's.
TEST_F(Cli, BacktestReturnsAreTheNumbersOfItsMetrics) {
  ASSERT_EQ(run("synth --bars 1500 --seed 6 --out " + path("bars.csv")).code, 0);
  ASSERT_EQ(
      run("train --data " + path("bars.csv") +
          " --epochs 1 --steps-per-epoch 30 --learning-starts 256 --hidden 16 --out " + path("run"))
          .code,
      0);
  const Result r =
      run("backtest --data " + path("bars.csv") + " --weights " + path("run/best.dqnpolicy") +
          " --policy buy-and-hold --policy sign-of-ofi --windows 2 --bars-per-year "
          "252 --json " +
          path("metrics.json") + " --returns " + path("returns.csv"));
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json metrics = nlohmann::json::parse(testing::slurp(path("metrics.json")));
  std::ifstream csv(path("returns.csv"));
  std::string line;
  std::getline(csv, line);
  std::vector<std::string> header;
  for (std::stringstream cells(line); std::getline(cells, line, ',');)
    header.push_back(line);
  const std::vector<std::string> policies = {path("run/best.dqnpolicy"), "buy-and-hold",
                                             "sign-of-ofi"};
  ASSERT_EQ(header.size(), 3 + 3 * policies.size());
  EXPECT_EQ(header[3], policies[0] + ":position");
  EXPECT_EQ(header[7], "buy-and-hold:return");
  // [window][policy] -> the returns, the equity and the positions of its rows.
  std::vector<std::vector<std::vector<double>>> returns(2), equity(2), positions(2);
  for (auto* v : {&returns, &equity, &positions})
    for (auto& w : *v)
      w.resize(policies.size());
  const data::Bars bars = data::read_bars_csv(path("bars.csv"));
  while (std::getline(csv, line)) {
    std::vector<std::string> cells;
    std::stringstream in(line);
    for (std::string cell; std::getline(in, cell, ',');)
      cells.push_back(cell);
    ASSERT_EQ(cells.size(), header.size()) << line;
    const std::size_t w = std::stoul(cells[0]) - 1, bar = std::stoul(cells[1]);
    ASSERT_LT(w, 2u);
    EXPECT_EQ(cells[2], data::format_iso8601_ms(bars.timestamp_ms[bar]));
    for (std::size_t k = 0; k < policies.size(); ++k) {
      positions[w][k].push_back(std::stod(cells[3 + 3 * k]));
      returns[w][k].push_back(std::stod(cells[4 + 3 * k]));
      equity[w][k].push_back(std::stod(cells[5 + 3 * k]));
    }
  }
  ASSERT_EQ(metrics.size(), 2 * policies.size());
  for (const nlohmann::json& entry : metrics) {
    const std::size_t w = entry["window"]["first_bar"] == metrics[0]["window"]["first_bar"] ? 0 : 1;
    const std::size_t k =
        std::find(policies.begin(), policies.end(), entry["policy"].get<std::string>()) -
        policies.begin();
    ASSERT_LT(k, policies.size());
    const std::vector<double>& x = returns[w][k];
    ASSERT_EQ(static_cast<std::int64_t>(x.size()), entry["metrics"]["bars"].get<std::int64_t>());
    double mean = 0, squares = 0, exposed = 0;
    for (double v : x)
      mean += v / static_cast<double>(x.size());
    for (double v : x)
      squares += (v - mean) * (v - mean);
    for (double p : positions[w][k])
      exposed += p != 0 ? 1 : 0;
    const double sharpe =
        mean / std::sqrt(squares / static_cast<double>(x.size() - 1)) * std::sqrt(252.0);
    EXPECT_NEAR(sharpe, entry["metrics"]["sharpe"].get<double>(), 1e-9) << entry["policy"];
    EXPECT_NEAR(equity[w][k].back() - 1, entry["metrics"]["total_return"].get<double>(),
                1e-9 * (1 + std::fabs(equity[w][k].back())))
        << entry["policy"];
    EXPECT_NEAR(exposed / static_cast<double>(x.size()), entry["metrics"]["exposure"].get<double>(),
                1e-12)
        << entry["policy"];
  }
}

TEST_F(Cli, BacktestsSeveralPoliciesTogetherOnAChosenWindowAndItsParts) {
  ASSERT_EQ(run("synth --bars 2600 --seed 4 --out " + path("bars.csv")).code, 0);
  for (const char* seed : {"1", "2"}) {
    ASSERT_EQ(run(std::string("train --data ") + path("bars.csv") +
                  " --epochs 1 --steps-per-epoch 30 --learning-starts 256 --hidden 16 --seed " +
                  seed + " --out " + path(std::string("run") + seed))
                  .code,
              0);
  }
  const std::string data = "backtest --data " + path("bars.csv") + " ";
  const std::string a = path("run1/best.dqnpolicy"), b = path("run2/best.dqnpolicy");
  const Result together = run(data + "--weights " + a + " --weights " + b +
                              " --policy buy-and-hold --policy sign-of-ofi --start 1200 --end 2399 "
                              "--json " +
                              path("together.json"));
  ASSERT_EQ(together.code, 0) << together.err;
  const nlohmann::json all = json_file(path("together.json"));
  ASSERT_EQ(all.size(), 4u);
  const std::vector<std::string> alone = {"--weights " + a, "--weights " + b,
                                          "--policy buy-and-hold", "--policy sign-of-ofi"};
  for (std::size_t k = 0; k < alone.size(); ++k) {
    SCOPED_TRACE(alone[k]);
    ASSERT_EQ(run(data + alone[k] + " --start 1200 --end 2399 --json " + path("alone.json")).code,
              0);
    const nlohmann::json one = json_file(path("alone.json"));
    ASSERT_EQ(one.size(), 1u);
    EXPECT_EQ(all[k], one[0]);
    EXPECT_EQ(all[k]["window"], (nlohmann::json{{"first_bar", 1200}, {"last_bar", 2399}}));
    EXPECT_EQ(all[k]["metrics"]["bars"], 1199);
  }
  // The same window by its timestamps (the synthetic market has a bar a day from 2000-01-01).
  const data::Bars bars = data::read_bars_csv(path("bars.csv"));
  const std::string from = data::format_iso8601_ms(bars.timestamp_ms[1200]).substr(0, 10);
  const std::string to = data::format_iso8601_ms(bars.timestamp_ms[2399]).substr(0, 10);
  ASSERT_EQ(run(data + "--policy sign-of-ofi --start " + from + " --end " + to + "T12:00 --json " +
                path("dates.json"))
                .code,
            0);
  EXPECT_EQ(json_file(path("dates.json"))[0], all[3]);
  // Three walk-forward windows: bars 1200-1599, 1600-1999, 2000-2399, each as if alone.
  ASSERT_EQ(run(data + "--weights " + a +
                " --policy sign-of-ofi --start 1200 --end 2399 "
                "--windows 3 --json " +
                path("parts.json"))
                .code,
            0);
  const nlohmann::json parts = json_file(path("parts.json"));
  ASSERT_EQ(parts.size(), 6u);
  for (int w = 0; w < 3; ++w) {
    const std::string first = std::to_string(1200 + 400 * w), last = std::to_string(1599 + 400 * w);
    ASSERT_EQ(run(data + "--weights " + a + " --policy sign-of-ofi --start " + first + " --end " +
                  last + " --json " + path("part.json"))
                  .code,
              0);
    const nlohmann::json part = json_file(path("part.json"));
    EXPECT_EQ(parts[2 * w], part[0]) << "window " << w;
    EXPECT_EQ(parts[2 * w + 1], part[1]) << "window " << w;
  }
}

// A universe file backtests every instrument on its own bars: each instrument's metrics and
// per-bar returns are the backtest of its symbol alone (the window cut at the same timestamps),
// marked with its symbol. The instruments keep calendars of their own.
TEST_F(Cli, BacktestOfAUniverseIsEachInstrumentsBacktestAlone) {
  data::SynthConfig config;
  config.bars = 900;
  config.seed = testing::test_seed();
  config.symbols = 3;
  data::SynthPanel universe = data::synth_panel(config);
  // S02 misses every seventh day; S03 ends 300 days early.
  auto keep = [](const data::Bars& b, auto&& kept) {
    data::Bars out;
    for (std::size_t t = 0; t < b.size(); ++t) {
      if (!kept(t))
        continue;
      out.timestamp_ms.push_back(b.timestamp_ms[t]);
      out.open.push_back(b.open[t]);
      out.high.push_back(b.high[t]);
      out.low.push_back(b.low[t]);
      out.close.push_back(b.close[t]);
      out.volume.push_back(b.volume[t]);
      out.ofi.push_back(b.ofi[t]);
    }
    return out;
  };
  universe.bars[1] = keep(universe.bars[1], [](std::size_t t) { return t % 7 != 3; });
  universe.bars[2] = data::first_bars(universe.bars[2], 600);
  data::write_bars_csv(path("universe.csv"), universe.bars, universe.symbols);
  const data::Bars& first = universe.bars[0];
  const std::string start = data::format_iso8601_ms(first.timestamp_ms[100]).substr(0, 10);
  const std::string end = data::format_iso8601_ms(first.timestamp_ms[580]).substr(0, 10);
  const std::string backtest = "backtest --data " + path("universe.csv") +
                               " --policy buy-and-hold --policy sign-of-ofi --start " + start +
                               " --end " + end + " --windows 2";
  const Result all =
      run(backtest + " --json " + path("all.json") + " --returns " + path("all.csv"));
  ASSERT_EQ(all.code, 0) << all.err;
  EXPECT_NE(all.out.find("3 instruments"), std::string::npos) << all.out;
  EXPECT_NE(all.out.find("instrument S02, window 2 of 2"), std::string::npos) << all.out;
  const nlohmann::json objects = json_file(path("all.json"));
  ASSERT_EQ(objects.size(), 3u * 2 * 2);  // instruments x windows x policies
  std::vector<std::string> rows;
  {
    std::ifstream csv(path("all.csv"));
    for (std::string line; std::getline(csv, line);)
      rows.push_back(line);
  }
  ASSERT_FALSE(rows.empty());
  std::size_t object = 0, row = 1;
  for (const std::string& symbol : universe.symbols) {
    SCOPED_TRACE(symbol);
    const Result alone = run(backtest + " --symbol " + symbol + " --json " + path("one.json") +
                             " --returns " + path("one.csv"));
    ASSERT_EQ(alone.code, 0) << alone.err;
    const nlohmann::json one = json_file(path("one.json"));
    for (nlohmann::json expected : one) {
      ASSERT_LT(object, objects.size());
      expected["symbol"] = symbol;
      EXPECT_EQ(objects[object++], expected);
    }
    std::ifstream csv(path("one.csv"));
    std::string line;
    std::getline(csv, line);
    EXPECT_EQ(rows[0], "symbol," + line);
    while (std::getline(csv, line)) {
      ASSERT_LT(row, rows.size());
      EXPECT_EQ(rows[row++], symbol + "," + line);
    }
  }
  EXPECT_EQ(object, objects.size());
  EXPECT_EQ(row, rows.size());
  // The same days fall on other bars of S02 (its missing days): its windows start elsewhere.
  EXPECT_NE(objects[0]["window"], objects[4]["window"]);
  // A file an instrument, each named by its file's stem, make the same universe.
  std::string files;
  for (std::size_t s = 0; s < universe.symbols.size(); ++s) {
    data::write_bars_csv(path(universe.symbols[s] + ".csv"), universe.bars[s]);
    files += " --data " + path(universe.symbols[s] + ".csv");
  }
  const std::string windows = " --policy buy-and-hold --policy sign-of-ofi --start " + start +
                              " --end " + end + " --windows 2 --json " + path("files.json");
  const Result several = run("backtest" + files + windows);
  ASSERT_EQ(several.code, 0) << several.err;
  EXPECT_EQ(json_file(path("files.json")), objects);
  // A symbol two files hold, instruments whose columns differ, a symbol none holds: exit 2.
  data::Bars without_ofi = universe.bars[0];
  without_ofi.ofi.clear();
  data::write_bars_csv(path("S09.csv"), without_ofi);
  const std::pair<std::string, std::string> refused[] = {
      {" --data " + path("universe.csv") + " --data " + path("S02.csv"),
       path("S02.csv") + ": symbol 'S02' is " + path("universe.csv") + "'s too"},
      {files + " --data " + path("S09.csv"), path("S09.csv") +
                                                 ": its columns (volume) differ from those of " +
                                                 path("S01.csv") + " (volume, ofi)"},
      {files + " --symbol S07", "--symbol S07: no instrument of the files ('S01', 'S02', 'S03')"}};
  // Its cache holds the same universe.
  ASSERT_EQ(run("cache --data " + path("universe.csv") + " --out " + path("universe.dqnbars")).code,
            0);
  const Result cached = run("backtest --data " + path("universe.dqnbars") + windows);
  ASSERT_EQ(cached.code, 0) << cached.err;
  EXPECT_EQ(json_file(path("files.json")), objects);
  fs::remove(path("files.json"));
  for (const auto& [arguments, message] : refused) {
    const Result r = run("backtest" + arguments + windows);
    EXPECT_EQ(r.code, 2) << arguments;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(path("files.json"))) << arguments;
  }
  // A window that one instrument cannot hold exits 2 naming it, and writes nothing.
  const std::string late = data::format_iso8601_ms(first.timestamp_ms[700]).substr(0, 10);
  const Result bad = run("backtest --data " + path("universe.csv") + " --policy flat --start " +
                         late + " --json " + path("bad.json"));
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find(path("universe.csv") + "[S03]: --start " + late), std::string::npos)
      << bad.err;
  EXPECT_FALSE(fs::exists(path("bad.json")));
}

// A window that is empty, reversed or outside the data exits with 2, names the argument and
// writes nothing.
TEST_F(Cli, BadBacktestWindowsExitWithTwoNamingTheArgument) {
  ASSERT_EQ(run("synth --bars 500 --seed 4 --out " + path("bars.csv")).code, 0);
  ASSERT_EQ(
      run("train --data " + path("bars.csv") +
          " --epochs 1 --steps-per-epoch 10 --learning-starts 128 --hidden 8 --out " + path("run"))
          .code,
      0);
  const std::string data = "backtest --data " + path("bars.csv") + " --json " + path("m.json");
  const std::pair<std::string, std::string> cases[] = {
      {" --policy flat --start 100 --end 100", "--start/--end: bars 100 .. 100 hold 1 bar(s)"},
      {" --policy flat --start 300 --end 200", "--start 300 (bar 300) comes after --end 200"},
      {" --policy flat --start 500", "--start 500: the data has bars 0 .. 499"},
      {" --policy flat --end 1999-01-01", "--end 1999-01-01 comes before the data's first bar"},
      {" --policy flat --start 2100-01-01", "--start 2100-01-01 comes after the data's last bar"},
      {" --policy flat --start yesterday", "--start 'yesterday': expected a bar index"},
      {" --policy flat --start 400 --windows 60", "--windows 60: bars 400 .. 499 hold 100"},
      {" --weights " + path("run/best.dqnpolicy") + " --start 3",
       "--start 3 selects bar 3, before bar "},
  };
  for (const auto& [arguments, message] : cases) {
    SCOPED_TRACE(arguments);
    const Result r = run(data + arguments);
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(path("m.json")));
  }
}

TEST_F(Cli, BadInputExitsWithTwoNamesTheSpotAndWritesNothing) {
  std::ofstream(path("bad.csv"))
      << "timestamp,open,high,low,close\n2024-01-02,10,11,9,10\n2024-01-03,10,9,11,10\n";
  const Result r =
      run("backtest --data " + path("bad.csv") + " --policy flat --json " + path("m.json"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find(path("bad.csv") + ":3:15: high 9 is below low 11"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(path("m.json")));
  for (const auto& entry : fs::directory_iterator(m_dir)) {
    EXPECT_EQ(entry.path().string().find(".tmp-"), std::string::npos)
        << "left behind: " << entry.path();
  }
}

// A flag given alone is true, and given a value takes it; never is a bare flag read as false.
TEST_F(Cli, AFlagAloneIsTrue) {
  const std::string train =
      "train --epochs 1 --steps-per-epoch 5 --learning-starts 64 "
      "--environments 8 --batch-size 16 --replay-capacity 2048 "
      "--hidden 8 --val-fraction 0.5 --test-fraction 0 --out ";
  ASSERT_EQ(run("synth --bars 600 --out " + path("bars.csv")).code, 0);
  for (const auto& [flag, expected] : {std::pair<std::string, bool>{"--dueling", true},
                                       {"--dueling=true", true},
                                       {"--dueling=false", false},
                                       {"", false}}) {
    SCOPED_TRACE(flag);
    const std::string out = path("run" + std::to_string(expected) + std::to_string(flag.size()));
    const Result r = run(train + out + " --data " + path("bars.csv") + " " + flag);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(testing::json_file(out + "/config.json")["dueling"], expected);
  }
  const Result bad = run(train + path("bad") + " --data " + path("bars.csv") + " --dueling=maybe");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("expected true or false, got 'maybe'"), std::string::npos) << bad.err;
}

// A run's bars are never among the files it writes or removes in its directory.
TEST_F(Cli, ARunNeverWritesOverItsBars) {
  fs::create_directories(path("run"));
  ASSERT_EQ(run("synth --bars 600 --out " + path("run/metrics.jsonl")).code, 0);
  const std::string before = testing::slurp(path("run/metrics.jsonl"));
  // --force would remove the run's files first, the bars among them.
  const Result r = run("train --epochs 1 --data " + path("run/metrics.jsonl") + " --out " +
                       path("run") + " --force");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--data " + path("run/metrics.jsonl") + " is "), std::string::npos) << r.err;
  EXPECT_EQ(testing::slurp(path("run/metrics.jsonl")), before);
  fs::create_directories(path("sweep"));
  ASSERT_EQ(run("synth --bars 600 --out " + path("sweep/leaderboard.csv")).code, 0);
  const Result sweep = run("sweep --epochs 1 --data " + path("sweep/leaderboard.csv") + " --out " +
                           path("sweep") + " --seeds 1-2");
  EXPECT_EQ(sweep.code, 2);
  EXPECT_NE(sweep.err.find("a file the run in"), std::string::npos) << sweep.err;
}

TEST_F(Cli, UsageErrorsExitWithTwo) {
  EXPECT_EQ(run("").code, 2);
  EXPECT_EQ(run("backtest --policy flat").code, 2);  // no --data
  ASSERT_EQ(run("synth --bars 50 --out " + path("b.csv")).code, 0);
  const Result unknown = run("backtest --data " + path("b.csv") + " --policy martingale");
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(
      unknown.err.find("--policy 'martingale' is not one of buy-and-hold, flat or sign-of-ofi"),
      std::string::npos)
      << unknown.err;
  EXPECT_EQ(run("backtest --data " + path("b.csv")).code, 2);  // no policy
  EXPECT_EQ(run("backtest --data " + path("b.csv") + " --policy flat --weights x").code, 2);
  EXPECT_EQ(run("backtest --data " + path("missing.csv") + " --policy flat").code, 2);
  const Result huge = run("backtest --data " + path("b.csv") +
                          " --policy flat --start "
                          "99999999999999999999999");
  EXPECT_EQ(huge.code, 2);
  EXPECT_NE(huge.err.find("--start 99999999999999999999999"), std::string::npos) << huge.err;
  // An infinite value of a setting that must be a finite number: named, and nothing written.
  for (const char* setting :
       {"learning-rate", "reward-scale", "huber-delta", "guard-limit", "clip-norm"}) {
    const Result r = run(std::string("train --synth-bars 2500 --epochs 1 --") + setting +
                         " inf --out " + path("inf"));
    EXPECT_EQ(r.code, 2) << setting;
    EXPECT_NE(r.err.find(std::string(setting) + " must be a finite number"), std::string::npos)
        << r.err;
    EXPECT_FALSE(fs::exists(path("inf"))) << setting;
  }
  // Settings the trainer refuses when it is built: nothing is written either.
  for (const char* refused : {"--bars-per-year 0", "--chunk-bars 0", "--return-window 0"}) {
    const Result r = run(std::string("train --synth-bars 2500 --epochs 1 ") + refused + " --out " +
                         path("refused"));
    EXPECT_EQ(r.code, 2) << refused << ": " << r.err;
    EXPECT_FALSE(fs::exists(path("refused"))) << refused;
  }
  std::ofstream(path("a-file")) << "x";
  const Result file_out = run("train --synth-bars 2500 --epochs 1 --out " + path("a-file"));
  EXPECT_EQ(file_out.code, 2);
  EXPECT_NE(file_out.err.find("is a file, not a directory"), std::string::npos) << file_out.err;
  EXPECT_EQ(run("--help").code, 0);
}

// An output whose directory does not exist is bad input, refused before any work (a write
// that fails later is a runtime failure: tests/test_reliability.cpp).
TEST_F(Cli, AnOutputWhoseDirectoryIsMissingExitsTwoBeforeTheWork) {
  ASSERT_EQ(run("synth --bars 50 --out " + path("b.csv")).code, 0);
  const Result r = run("backtest --data " + path("b.csv") + " --policy flat --json " +
                       path("no/such/dir/m.json"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--json " + path("no/such/dir/m.json") + ": its directory"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_FALSE(fs::exists(path("no")));
}

// An output path is written as what it is: a symbolic link's target is replaced atomically
// (the link stays a link), a character device behind a link is written through (it stays
// that device: the link here points at the system's null device, which is never replaced), a
// FIFO is written through to its reader; a directory or a socket exits 2 naming the option,
// with nothing written.
TEST_F(Cli, OutputsAreWrittenAsWhatTheirPathsAre) {
  ASSERT_EQ(run("synth --bars 300 --seed 2 --out " + path("b.csv")).code, 0);
  const std::string backtest = "backtest --data " + path("b.csv") + " --policy buy-and-hold ";
  const Result plain = run(backtest + "--returns " + path("plain.csv"));
  ASSERT_EQ(plain.code, 0) << plain.err;
  const std::string expected = testing::slurp(path("plain.csv"));
  ASSERT_FALSE(expected.empty());

  fs::create_symlink("target.csv", path("link.csv"));
  ASSERT_EQ(run(backtest + "--returns " + path("link.csv")).code, 0);
  EXPECT_TRUE(fs::is_symlink(path("link.csv")));
  EXPECT_EQ(testing::slurp(path("target.csv")), expected);

  fs::create_symlink("/dev/null", path("null"));
  const Result null = run(backtest + "--returns " + path("null") + " --json " + path("null"));
  ASSERT_EQ(null.code, 0) << null.err;
  EXPECT_TRUE(fs::is_symlink(path("null")));
  EXPECT_TRUE(fs::is_character_file(path("null")));  // the link still ends at a device

  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  const Result fifo = run(backtest + "--returns " + path("fifo"),
                          "(cat " + path("fifo") + " >" + path("from-fifo.csv") + " &);");
  ASSERT_EQ(fifo.code, 0) << fifo.err;
  for (int i = 0; i < 500 && testing::slurp(path("from-fifo.csv")) != expected; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(testing::slurp(path("from-fifo.csv")), expected);
  EXPECT_EQ(fs::status(path("fifo")).type(), fs::file_type::fifo);

  fs::create_directories(path("dir"));
  const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string socket_path = path("socket");
  ASSERT_LT(socket_path.size(), sizeof address.sun_path);
  std::strcpy(address.sun_path, socket_path.c_str());
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  for (const auto& [option, what] :
       {std::pair<std::string, std::string>{"--returns", "dir"}, {"--json", "socket"}}) {
    const Result r = run(backtest + option + " " + path(what));
    EXPECT_EQ(r.code, 2) << option << " " << what;
    EXPECT_NE(
        r.err.find(option + " " + path(what) + " is a " + (what == "dir" ? "directory" : "socket")),
        std::string::npos)
        << r.err;
  }
  ::close(s);
  EXPECT_TRUE(fs::is_empty(path("dir")));
  const Result report_dir = run("synth --bars 300 --out " + path("dir"));
  EXPECT_EQ(report_dir.code, 2);
  EXPECT_NE(report_dir.err.find("--out " + path("dir") + " is a directory"), std::string::npos)
      << report_dir.err;
}

// With an output on standard output (-), standard output holds the data alone: the JSON
// parses whole, the CSV starts with its header; the table goes to standard error.
TEST_F(Cli, AnOutputOnStandardOutputIsTheDataAlone) {
  ASSERT_EQ(run("synth --bars 300 --seed 2 --out " + path("b.csv")).code, 0);
  const std::string backtest = "backtest --data " + path("b.csv") + " --policy buy-and-hold ";
  const Result json = run(backtest + "--json -");
  ASSERT_EQ(json.code, 0) << json.err;
  EXPECT_EQ(nlohmann::json::parse(json.out).size(), 1u);
  EXPECT_NE(json.err.find("sharpe"), std::string::npos) << json.err;
  const Result csv = run(backtest + "--returns -");
  ASSERT_EQ(csv.code, 0) << csv.err;
  EXPECT_EQ(csv.out.rfind("window,bar,timestamp,buy-and-hold:position,", 0), 0u) << csv.out;
  const Result both = run(backtest + "--returns - --json -");
  EXPECT_EQ(both.code, 2);
  EXPECT_NE(both.err.find("would both write to standard output"), std::string::npos) << both.err;
}

// Returns that are all equal do not vary: a flat policy beside a risk-free rate has volatility
// 0 and no Sharpe ratio (not the rounding of r - rf blown up to -1e14), and the returns file
// writes its zeros as 0, never -0.
TEST_F(Cli, ConstantReturnsHaveNoVolatilityAndNoSharpeRatio) {
  ASSERT_EQ(run("synth --bars 400 --seed 5 --out " + path("b.csv")).code, 0);
  const Result r =
      run("backtest --data " + path("b.csv") + " --policy flat --risk-free 0.0001 --json " +
          path("m.json") + " --returns " + path("r.csv"));
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json m = json_file(path("m.json"))[0]["metrics"];
  EXPECT_EQ(m["annual_volatility"], 0.0);
  EXPECT_TRUE(m["sharpe"].is_null()) << m.dump();
  const std::string csv = testing::slurp(path("r.csv"));
  EXPECT_EQ(csv.find(",-0,"), std::string::npos);
  EXPECT_EQ(csv.find(",-0\n"), std::string::npos);
}

// A directory given where a file is read exits 2 naming the option and the path (not a
// stream library's message).
TEST_F(Cli, ADirectoryGivenAsAFileExitsTwoNamingTheOption) {
  ASSERT_EQ(run("synth --bars 300 --seed 2 --out " + path("b.csv")).code, 0);
  fs::create_directories(path("dir"));
  const std::string dir = path("dir");
  const std::pair<std::string, std::string> cases[] = {
      {"backtest --policy flat --data " + dir, "--data " + dir + " is a directory"},
      {"backtest --data " + path("b.csv") + " --weights " + dir,
       "--weights " + dir + " is a directory"},
      {"train --epochs 1 --out " + path("run") + " --data " + dir,
       "--data " + dir + " is a directory"},
      {"train --epochs 1 --out " + path("run") + " --data " + path("b.csv") + " --val-data " + dir,
       "--val-data " + dir + " is a directory"},
      {"train --epochs 1 --out " + path("run") + " --config " + dir,
       "--config " + dir + " is a directory"},
      {"cache --data " + dir + " --out " + path("c.dqnbars"), "--data " + dir + " is a directory"},
  };
  for (const auto& [arguments, message] : cases) {
    SCOPED_TRACE(arguments);
    const Result r = run(arguments);
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("basic_filebuf"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(path("run")));
  }
}

// Numbers past what an option holds exit 2 echoing what was typed (never clamped to 2^64 - 1,
// never a limit printed as 1.79e308); a --config value out of the range of a double or a list
// where one number belongs exits 2 naming the file and the key.
TEST_F(Cli, NumbersOutOfRangeExitTwoEchoingWhatWasTyped) {
  ASSERT_EQ(run("synth --bars 300 --seed 2 --out " + path("b.csv")).code, 0);
  const Result windows = run("backtest --data " + path("b.csv") + " --policy flat --windows 0");
  EXPECT_EQ(windows.code, 2);
  EXPECT_NE(windows.err.find("--windows '0' is below 1"), std::string::npos) << windows.err;
  EXPECT_EQ(windows.err.find("1.79"), std::string::npos) << windows.err;
  const Result epochs = run("train --epochs 18446744073709551616 --out " + path("run"));
  EXPECT_EQ(epochs.code, 2);
  EXPECT_NE(epochs.err.find("'18446744073709551616' is out of the range"), std::string::npos)
      << epochs.err;
  const Result threads = run("--threads 99999999999999999999 info");
  EXPECT_EQ(threads.code, 2);
  EXPECT_NE(threads.err.find("'99999999999999999999' is larger than"), std::string::npos)
      << threads.err;
  std::ofstream(path("overflow.json")) << "{\"epochs\": 2, \"learning-rate\": 1e999}";
  const Result overflow = run("train --config " + path("overflow.json") + " --out " + path("run"));
  EXPECT_EQ(overflow.code, 2);
  EXPECT_NE(overflow.err.find(path("overflow.json") + ": key 'learning-rate': the number '1e999'"),
            std::string::npos)
      << overflow.err;
  std::ofstream(path("list.json")) << "{\"gamma\": [0.2]}";
  const Result list = run("train --config " + path("list.json") + " --out " + path("run"));
  EXPECT_EQ(list.code, 2);
  EXPECT_NE(list.err.find(path("list.json") + ": --gamma: expected a number, not [0.2]"),
            std::string::npos)
      << list.err;
  EXPECT_FALSE(fs::exists(path("run")));
}

// A test fraction that leaves too few bars says how many it left of how many, and why.
TEST_F(Cli, ATestFractionThatLeavesTooFewBarsSaysSo) {
  ASSERT_EQ(run("synth --bars 3000 --seed 2 --out " + path("b.csv")).code, 0);
  const Result r =
      run("train --data " + path("b.csv") + " --test-fraction 0.994 --out " + path("run"));
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("test-fraction 0.994 holds out the last 2982 bars of the 3000 bars in " +
                       path("b.csv") + " for the test window, leaving 18 bars"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(path("run")));
}

// A run directory holds one run: training into it again needs --resume, or --force, which
// removes the old run's files first (its last checkpoints too); a sweep's directory and a
// run's are not each other's.
TEST_F(Cli, AnOutputDirectoryHoldsOneRun) {
  const std::string train =
      "train --synth-bars 2500 --steps-per-epoch 20 --learning-starts 256 --hidden 8 ";
  ASSERT_EQ(run(train + "--epochs 2 --out " + path("run")).code, 0);
  const std::string metrics = testing::slurp(path("run/metrics.jsonl"));
  const Result again = run(train + "--epochs 1 --out " + path("run"));
  EXPECT_EQ(again.code, 2);
  EXPECT_NE(again.err.find("holds a training run already: continue it with --resume"),
            std::string::npos)
      << again.err;
  EXPECT_EQ(testing::slurp(path("run/metrics.jsonl")), metrics);
  const Result forced = run(train + "--epochs 1 --force --out " + path("run"));
  ASSERT_EQ(forced.code, 0) << forced.err;
  EXPECT_EQ(testing::jsonl_records(path("run/metrics.jsonl")).size(), 1u);
  EXPECT_FALSE(fs::exists(path("run/checkpoint-2.dqnckpt")));
  EXPECT_TRUE(fs::exists(path("run/checkpoint-1.dqnckpt")));
  ASSERT_EQ(run("synth --bars 2500 --seed 1 --out " + path("b.dqnbars")).code, 0);
  const Result sweep = run("sweep --data " + path("b.dqnbars") + " --out " + path("run") +
                           " --seeds 1,2 --epochs 1");
  EXPECT_EQ(sweep.code, 2);
  EXPECT_NE(sweep.err.find("holds a training run; a sweep needs a directory of its own"),
            std::string::npos)
      << sweep.err;
  EXPECT_FALSE(fs::exists(path("run/sweep.json")));
  fs::create_directories(path("sweep"));
  std::ofstream(path("sweep/sweep.json")) << "{}";
  const Result into_sweep = run(train + "--epochs 1 --force --out " + path("sweep"));
  EXPECT_EQ(into_sweep.code, 2);
  EXPECT_NE(into_sweep.err.find("holds a sweep"), std::string::npos) << into_sweep.err;
}

// A run's last timings line says where its wall time went: each phase once, none negative,
// their sum within the wall (they are consecutive stretches of it), the wait for the writer a
// part of the checkpoints'; the log's last line says the same.
TEST_F(Cli, ARunSaysWhereItsWallTimeWent) {
  const Result trained = run(
      "train --synth-bars 2500 --steps-per-epoch 20 --learning-starts 256 --hidden 8 --epochs 3 "
      "--out " +
      path("run"));
  ASSERT_EQ(trained.code, 0) << trained.err;
  const std::vector<nlohmann::json> lines = testing::jsonl_records(path("run/timings.jsonl"));
  ASSERT_EQ(lines.size(), 4u);
  for (std::size_t e = 0; e < 3; ++e)
    EXPECT_EQ(lines[e]["epoch"], e + 1) << lines[e];
  const nlohmann::json& phases = lines.back().at("run");
  const std::vector<std::string> parts = {
      "data_seconds",       "setup_seconds",   "baselines_seconds",  "learning_seconds",
      "validation_seconds", "records_seconds", "checkpoint_seconds", "schedule_seconds",
      "test_seconds",       "files_seconds"};
  EXPECT_EQ(phases.size(), parts.size() + 2) << phases;  // and checkpoint_wait, wall
  double sum = 0.0;
  for (const std::string& part : parts) {
    ASSERT_TRUE(phases.contains(part)) << part;
    EXPECT_GE(phases[part].get<double>(), 0.0) << part;
    sum += phases[part].get<double>();
  }
  double learning = 0.0;
  for (std::size_t e = 0; e < 3; ++e)
    learning += lines[e]["train_seconds"].get<double>();
  EXPECT_DOUBLE_EQ(phases["learning_seconds"].get<double>(), learning);
  EXPECT_GE(phases["checkpoint_wait_seconds"].get<double>(), 0.0);
  EXPECT_LE(phases["checkpoint_wait_seconds"].get<double>(),
            phases["checkpoint_seconds"].get<double>());
  EXPECT_LE(sum, phases["wall_seconds"].get<double>() * (1 + 1e-12)) << phases;
  EXPECT_NE(trained.err.find("learning and validation "), std::string::npos) << trained.err;
  EXPECT_NE(trained.err.find("(waiting for the writer "), std::string::npos) << trained.err;
}

TEST_F(Cli, SynthWritesTheBinaryCacheToo) {
  ASSERT_EQ(run("synth --bars 300 --seed 9 --out " + path("b.dqnbars")).code, 0);
  ASSERT_EQ(run("synth --bars 300 --seed 9 --out " + path("b.csv")).code, 0);
  const Result a = run("backtest --data " + path("b.dqnbars") + " --policy buy-and-hold --json -");
  const Result b = run("backtest --data " + path("b.csv") + " --policy buy-and-hold --json -");
  ASSERT_EQ(a.code, 0) << a.err;
  const auto json_a = nlohmann::json::parse(a.out.substr(a.out.find('[')));
  const auto json_b = nlohmann::json::parse(b.out.substr(b.out.find('[')));
  EXPECT_EQ(json_a, json_b);  // the CSV keeps 17 digits: the same prices, the same metrics
  ASSERT_EQ(run("cache --data " + path("b.csv") + " --out " + path("c.dqnbars")).code, 0);
  // A universe: synth's cache is the cache of its CSV file, byte for byte.
  ASSERT_EQ(run("synth --bars 300 --seed 9 --symbols 3 --out " + path("u.dqnbars")).code, 0);
  ASSERT_EQ(run("synth --bars 300 --seed 9 --symbols 3 --out " + path("u.csv")).code, 0);
  ASSERT_EQ(run("cache --data " + path("u.csv") + " --out " + path("uc.dqnbars")).code, 0);
  EXPECT_EQ(testing::slurp(path("u.dqnbars")), testing::slurp(path("uc.dqnbars")));
}

}  // namespace
}  // namespace dqntrader

namespace dqntrader {
namespace {

TEST_F(Cli, ReadmeHoldsTheSettingsMetricsAndOptionsTablesTheCodeGenerates) {
  std::ifstream in(std::string(DQNTRADER_SOURCE_DIR) + "/README.md");
  std::stringstream readme;
  readme << in.rdbuf();
  const std::string text = readme.str();
  std::vector<std::pair<std::string, std::string>> tables = {{"settings", "settings"},
                                                             {"settings --metrics", "metrics"}};
  for (const char* command : {"train", "sweep", "backtest", "act", "synth", "report"})
    tables.push_back(
        {std::string("settings --options ") + command, std::string("options:") + command});
#if defined(DQNTRADER_WITH_ONNX)
  tables.push_back({"settings --options export", "options:export"});
#endif
  for (const auto& [arguments, name] : tables) {
    const Result r = run(arguments);
    ASSERT_EQ(r.code, 0);
    const std::string begin = "<!-- " + name + ":begin -->\n", end = "<!-- " + name + ":end -->";
    const auto a = text.find(begin), b = text.find(end);
    ASSERT_NE(a, std::string::npos) << begin;
    ASSERT_NE(b, std::string::npos) << end;
    EXPECT_EQ(text.substr(a + begin.size(), b - a - begin.size()), r.out)
        << "README.md is out of date: paste the output of 'dqntrader " << arguments
        << "' between the " << name << " markers";
  }
}

TEST_F(Cli, TrainsOnTheBuiltInMarketAndTheBacktestReadsTheResult) {
  const Result r =
      run("train --synth-bars 2500 --epochs 1 --steps-per-epoch 40 --learning-starts 256 --hidden "
          "16 --out " +
          path("run"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("epoch 1/1"), std::string::npos) << r.err;
  ASSERT_EQ(run("synth --bars 2500 --seed 1 --out " + path("bars.csv")).code, 0);
  const Result b =
      run("backtest --data " + path("bars.csv") + " --weights " + path("run/best.dqnpolicy"));
  EXPECT_EQ(b.code, 0) << b.err;
  const Result bad = run("train --gamma 2 --out " + path("bad"));
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("gamma"), std::string::npos) << bad.err;
}

TEST_F(Cli, ReportsARunAndRefusesADirectoryThatIsNone) {
  ASSERT_EQ(run("train --synth-bars 2500 --epochs 2 --steps-per-epoch 40 --learning-starts 256 "
                "--hidden 16 --out " +
                path("run"))
                .code,
            0);
  const Result r = run("report " + path("run"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(path("run/report.html")));
  EXPECT_NE(r.err.find("wrote"), std::string::npos) << r.err;
  const Result to_stdout = run("report " + path("run") + " --out -");
  ASSERT_EQ(to_stdout.code, 0) << to_stdout.err;
  EXPECT_EQ(to_stdout.out.rfind("<!DOCTYPE html>", 0), 0u);

  fs::create_directories(path("empty"));
  const Result empty = run("report " + path("empty") + " --out " + path("empty.html"));
  EXPECT_EQ(empty.code, 2);
  EXPECT_NE(empty.err.find("config.json"), std::string::npos) << empty.err;
  EXPECT_FALSE(fs::exists(path("empty.html")));
  EXPECT_EQ(run("report " + path("missing")).code, 2);
}

}  // namespace
}  // namespace dqntrader

// `dqntrader act` as a user runs it, against tests/oracles/policy_reference.py, a reader of
// policy files written from docs/POLICY.md and docs/FEATURES.md alone: the decisions over
// 5,000 bars of policies of every shape agree with it (positions exactly, Q-values to 1e-5 of
// each row's largest); a window's positions are the backtest's; --follow answers a stream as
// the window does; bad input exits 2 saying what.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dqntrader/data/csv_reader.hpp"
#include "dqntrader/eval/policy_file.hpp"
#include "policy_fixtures.hpp"
#include "test_support.hpp"

namespace dqntrader {
namespace {

namespace fs = std::filesystem;
using testing::slurp;

using Result = testing::CommandResult;
using testing::json_lines;

class Act : public testing::CommandTest {
 protected:
  Act() : CommandTest("act") {}

  Result oracle(const std::string& arguments) const {
    return shell(std::string(DQNTRADER_ORACLE_PYTHON3) + " " + DQNTRADER_POLICY_ORACLE + " " +
                 arguments);
  }
};

// Over 5,000 bars, policies of every shape take the reference reader's decisions, and a
// trained run's best policy too; the file's latest bar alone is the window's last decision
// when it comes in with the window's position there. In float32 products (--precision fp32,
// OpenMP's default): CUDA's default, bf16, differs from float32 by bf16's rounding
// (docs/POLICY.md), beyond these float bounds.
TEST_F(Act, DecisionsAreTheReferenceReadersOverEveryShape) {
  SCOPED_TRACE(testing::seed_note(m_seed));
  const data::Bars bars = testing::fixture_bars(5200, m_seed % 1000 + 1);
  const std::vector<std::string> policies =
      write_policies(bars,
                     "--feature-columns f_x --epochs 1 --steps-per-epoch 60 --learning-starts 256 "
                     "--hidden 16,16 --dueling");
  ASSERT_FALSE(HasFailure());
  for (const std::string& policy : policies) {
    SCOPED_TRACE(policy);
    const std::string window = " --precision fp32 --from 150 --to 5199 --position short";
    const Result act =
        cli("act --json --weights " + policy + " --data " + path("bars.csv") + window);
    ASSERT_EQ(act.code, 0) << act.err;
    const Result reference =
        oracle(policy + " " + path("bars.csv") + " --from 150 --to 5199 --position -1");
    ASSERT_EQ(reference.code, 0) << reference.err;
    const std::vector<nlohmann::json> got = json_lines(act.out),
                                      expected = json_lines(reference.out);
    ASSERT_EQ(got.size(), 5050u);
    EXPECT_GE(testing::expect_same_decisions(got, expected, policy), 1000u);
    EXPECT_EQ(got.front()["incoming"], -1.0);
    // The policy that follows returns changes its position: the carry is exercised (a drawn
    // or briefly trained policy may hold one position throughout).
    std::size_t changes = 0;
    for (const nlohmann::json& d : got)
      changes += d["position"] != d["incoming"] ? 1 : 0;
    if (policy == path("plain-1-ofi.dqnpolicy")) {
      EXPECT_GT(changes, 1000u);
    }
    // The latest bar alone, coming in with the position the window held there (one row's
    // products may add in another order than a chunk's: the same decision to float rounding).
    const std::string held = got[got.size() - 2]["position"].dump();
    const Result latest = cli("act --json --precision fp32 --weights " + policy + " --data " +
                              path("bars.csv") + " --position " + held);
    ASSERT_EQ(latest.code, 0) << latest.err;
    const std::vector<nlohmann::json> one = json_lines(latest.out);
    ASSERT_EQ(one.size(), 1u);
    testing::expect_same_decisions(one, {got.back()}, policy + " latest");
    EXPECT_EQ(one[0]["timestamp"], got.back()["timestamp"]);
    EXPECT_EQ(one[0]["incoming"], got.back()["incoming"]);
  }
}

// A window's positions are the backtest's: act's decision at bar t is the position the
// backtest's returns file holds over (t, t + 1], on the row of bar t + 1.
TEST_F(Act, AWindowsPositionsAreTheBacktests) {
  const data::Bars bars = testing::fixture_bars(3000, m_seed % 1000 + 7);
  data::write_bars_csv(path("bars.csv"), bars);
  const testing::FixturePolicy p = testing::fixture_policies(bars, m_seed)[2];
  eval::write_policy(path("p.dqnpolicy"), p.file);
  const Result act = cli("act --json --weights " + path("p.dqnpolicy") + " --data " +
                         path("bars.csv") + " --from 500 --to 2999");
  ASSERT_EQ(act.code, 0) << act.err;
  const Result backtest =
      cli("backtest --weights " + path("p.dqnpolicy") + " --data " + path("bars.csv") +
          " --from 500 --to 2999 --returns " + path("returns.csv"));
  ASSERT_EQ(backtest.code, 0) << backtest.err;
  const std::vector<nlohmann::json> decisions = json_lines(act.out);
  ASSERT_EQ(decisions.size(), 2500u);
  std::ifstream csv(path("returns.csv"));
  std::string line;
  std::getline(csv, line);
  std::size_t rows = 0;
  while (std::getline(csv, line)) {
    std::vector<std::string> cells;
    std::stringstream in(line);
    for (std::string cell; std::getline(in, cell, ',');)
      cells.push_back(cell);
    const std::size_t bar = std::stoul(cells[1]);
    ASSERT_EQ(decisions[bar - 1 - 500]["bar"], bar - 1);
    EXPECT_EQ(decisions[bar - 1 - 500]["position"].get<double>(), std::stod(cells[3]))
        << "bar " << bar - 1;
    ++rows;
  }
  EXPECT_EQ(rows, 2499u);
}

// --follow answers rows as they come, carrying the position: on standard input (it ends with
// the input) and on a file it follows (a row appended later is answered, and SIGTERM ends it
// with exit 0); the same decisions as the window.
TEST_F(Act, FollowAnswersEachRowAsTheWindowDoes) {
  const data::Bars bars = testing::fixture_bars(400, m_seed % 1000 + 3);
  data::write_bars_csv(path("bars.csv"), bars);
  const testing::FixturePolicy p = testing::fixture_policies(bars, m_seed)[1];
  eval::write_policy(path("p.dqnpolicy"), p.file);
  const std::size_t warmup = p.file.features.warmup();
  const Result window = cli("act --json --weights " + path("p.dqnpolicy") + " --data " +
                            path("bars.csv") + " --to 399");
  ASSERT_EQ(window.code, 0) << window.err;
  const std::vector<nlohmann::json> expected = json_lines(window.out);
  ASSERT_EQ(expected.size(), 400 - warmup);
  ASSERT_EQ(expected.front()["bar"], warmup);

  const Result streamed = cli("act --follow --weights " + path("p.dqnpolicy") + " --data -",
                              "cat " + path("bars.csv") + " | ");
  ASSERT_EQ(streamed.code, 0) << streamed.err;
  // A row at a time, the products may add in another order than a window's chunk: the same
  // decisions to float rounding.
  EXPECT_EQ(testing::expect_same_decisions(json_lines(streamed.out), expected, "stream"),
            expected.size());

  // A file followed: its first 300 bars now, the rest appended while it runs.
  const std::string text = slurp(path("bars.csv"));
  std::size_t cut = 0;
  for (int lines = 0; lines < 301; ++lines)
    cut = text.find('\n', cut) + 1;
  std::ofstream(path("live.csv")) << text.substr(0, cut);
  const pid_t child = testing::spawn_quiet(
      "exec " + std::string(DQNTRADER_CLI_PATH) + " act --follow --weights " + path("p.dqnpolicy") +
      " --data " + path("live.csv") + " --position " +
      expected[299 - warmup - 1]["position"].dump() + " >" + path("live.jsonl"));
  auto lines_written = [&] { return json_lines(slurp(path("live.jsonl"))).size(); };
  for (int i = 0; i < 3000 && lines_written() < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::ofstream(path("live.csv"), std::ios::app) << text.substr(cut);
  for (int i = 0; i < 3000 && lines_written() < 101; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  kill(child, SIGTERM);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const std::vector<nlohmann::json> live = json_lines(slurp(path("live.jsonl")));
  ASSERT_EQ(live.size(), 101u);
  EXPECT_EQ(
      testing::expect_same_decisions(
          live, std::vector<nlohmann::json>(expected.begin() + (299 - warmup), expected.end()),
          "followed file"),
      101u);
}

// Bad input exits 2 saying what, and a stream's decisions printed before a bad row stand.
TEST_F(Act, BadInputExitsTwoSayingWhat) {
  const data::Bars bars = testing::fixture_bars(300, m_seed % 1000 + 5);
  data::write_bars_csv(path("bars.csv"), bars);
  const testing::FixturePolicy p = testing::fixture_policies(bars, m_seed)[2];  // ofi, f_x, f_y
  eval::write_policy(path("p.dqnpolicy"), p.file);
  const std::string policy = " --weights " + path("p.dqnpolicy");
  data::Bars no_extra = bars;
  no_extra.extra.pop_back();
  data::write_bars_csv(path("no-f_y.csv"), no_extra);
  data::write_bars_csv(path("short.csv"), data::first_bars(bars, 10));
  const std::string file = slurp(path("p.dqnpolicy"));
  std::ofstream(path("truncated.dqnpolicy"), std::ios::binary) << file.substr(0, file.size() / 2);
  std::string flipped = file;
  flipped[flipped.size() / 2] ^= 0x10;
  std::ofstream(path("flipped.dqnpolicy"), std::ios::binary) << flipped;
  const std::pair<std::string, std::string> cases[] = {
      {"act" + policy + " --data " + path("no-f_y.csv"), "'f_y'"},
      {"act" + policy + " --data " + path("short.csv"),
       "10 bars; the policy's first decision needs " +
           std::to_string(p.file.features.warmup() + 1)},
      {"act" + policy + " --data " + path("bars.csv") + " --position 2",
       "--position 2: the policy's positions are -1, 0, 1"},
      {"act" + policy + " --data " + path("bars.csv") + " --position sideways", "--position"},
      {"act --weights " + path("truncated.dqnpolicy") + " --data " + path("bars.csv"),
       "truncated.dqnpolicy"},
      {"act --weights " + path("flipped.dqnpolicy") + " --data " + path("bars.csv"),
       "checksum mismatch"},
      {"act" + policy + " --data " + path("bars.csv") + " --from 3", "--from 3 selects bar 3"},
      {"act" + policy + " --data " + path("bars.csv") + " --follow --to 200", "--follow"},
  };
  for (const auto& [arguments, message] : cases) {
    SCOPED_TRACE(arguments);
    const Result r = cli(arguments);
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  // A stream with a NaN close, then one whose timestamps go back: the rows before are
  // answered, the bad row named by its line, exit 2.
  const std::string text = slurp(path("bars.csv"));
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  for (const auto& [bad, message] :
       {std::pair<std::string, std::string>{"nan", "standard input:101:"},
        {"earlier", "standard input:101:"}}) {
    std::string stream;
    for (std::size_t i = 0; i < 100; ++i)
      stream += lines[i] + "\n";
    std::string row = lines[100];
    if (bad == "nan") {
      std::vector<std::string> cells;
      std::stringstream cells_in(row);
      for (std::string cell; std::getline(cells_in, cell, ',');)
        cells.push_back(cell);
      cells[4] = "nan";  // close
      row.clear();
      for (const std::string& c : cells)
        row += (row.empty() ? "" : ",") + c;
    } else {
      row = lines[50];
    }
    stream += row + "\n" + lines[101] + "\n";
    std::ofstream(path("stream.csv")) << stream;
    const Result r =
        cli("act --follow" + policy + " --data -", "cat " + path("stream.csv") + " | ");
    EXPECT_EQ(r.code, 2) << bad;
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_EQ(json_lines(r.out).size(), 99 - p.file.features.warmup()) << bad;
  }
}

// A sweep's directory stands for its winner's best policy, a run's for its best policy.
TEST_F(Act, ADirectoryStandsForItsBestPolicy) {
  ASSERT_EQ(cli("synth --bars 3000 --seed 2 --out " + path("bars.dqnbars")).code, 0);
  ASSERT_EQ(cli("sweep --data " + path("bars.dqnbars") + " --out " + path("sweep") +
                " --epochs 1 --steps-per-epoch 30 --learning-starts 256 --environments 16 "
                "--batch-size 32 --replay-capacity 4096 --probe-batch 32 --hidden 8 --seeds 1-2")
                .code,
            0);
  const nlohmann::json board = testing::json_file(m_dir / "sweep" / "leaderboard.json");
  const std::string winner =
      path("sweep/" + board["members"][0]["run"].get<std::string>() + "/best.dqnpolicy");
  const std::string data = " --data " + path("bars.dqnbars") + " --json";
  const Result by_file = cli("act --weights " + winner + data);
  ASSERT_EQ(by_file.code, 0) << by_file.err;
  EXPECT_EQ(cli("act --weights " + path("sweep") + data).out, by_file.out);
  EXPECT_EQ(cli("act --weights " + fs::path(winner).parent_path().string() + data).out,
            by_file.out);
  const Result neither = cli("act --weights " + m_dir.string() + data);
  EXPECT_EQ(neither.code, 2);
  EXPECT_NE(neither.err.find("holds neither a sweep"), std::string::npos) << neither.err;
}

}  // namespace
}  // namespace dqntrader

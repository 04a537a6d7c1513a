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
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dqntrader/core/hash.hpp"
#include "dqntrader/data/csv_reader.hpp"
#include "dqntrader/data/timestamp.hpp"
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

  // A universe of instruments AAA, BBB and CCC of bars, bars - shorter and bars - 2 shorter
  // fixture bars (from seed on), written to universe.csv, and a fixture policy of the first's
  // features written to p.dqnpolicy.
  std::vector<data::Bars> write_universe(std::size_t bars, std::size_t shorter,
                                         std::uint64_t seed) {
    std::vector<data::Bars> instruments;
    for (std::uint64_t s = 0; s < 3; ++s)
      instruments.push_back(testing::fixture_bars(bars - shorter * s, seed + s));
    data::write_bars_csv(path("universe.csv"), instruments, {"AAA", "BBB", "CCC"});
    eval::write_policy(path("p.dqnpolicy"),
                       testing::fixture_policies(instruments[0], m_seed)[1].file);
    return instruments;
  }

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
    const std::string window = " --precision fp32 --start 150 --end 5199 --position short";
    const Result act =
        cli("act --json --weights " + policy + " --data " + path("bars.csv") + window);
    ASSERT_EQ(act.code, 0) << act.err;
    // The reader at every bar with every incoming position: act's row of each bar is the
    // reader's for the position act came in with, every row compared.
    const Result reference =
        oracle(policy + " " + path("bars.csv") + " --from 150 --to 5199 --every-position");
    ASSERT_EQ(reference.code, 0) << reference.err;
    const std::vector<nlohmann::json> got = json_lines(act.out);
    ASSERT_EQ(got.size(), 5050u);
    const eval::PolicyFile file = eval::read_policy(policy);
    const std::size_t ties =
        testing::expect_rows_agree(json_lines(reference.out), got, file.positions, 150, policy);
    RecordProperty("near_ties", static_cast<int>(ties));
    for (std::size_t i = 1; i < got.size(); ++i)  // the carry: each row came in with the last's
      ASSERT_EQ(got[i]["incoming"], got[i - 1]["position"]) << policy << " row " << i;
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
                         path("bars.csv") + " --start 500 --end 2999");
  ASSERT_EQ(act.code, 0) << act.err;
  const Result backtest =
      cli("backtest --weights " + path("p.dqnpolicy") + " --data " + path("bars.csv") +
          " --start 500 --end 2999 --returns " + path("returns.csv"));
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

// Over a universe file, every instrument's decisions are those of its symbol alone, each
// coming in with the position given, led by its symbol: at the latest bars, over a window cut
// at the same time (the instruments on calendars of their own), in JSON and in the table.
TEST_F(Act, AUniversesDecisionsAreEachSymbolsAlone) {
  const std::vector<data::Bars> instruments = write_universe(900, 100, m_seed % 1000 + 11);
  const std::vector<std::string> symbols = {"AAA", "BBB", "CCC"};
  const std::string act = "act --weights " + path("p.dqnpolicy") + " --data " +
                          path("universe.csv") + " --position long";
  // The same time: the 650th bar of the shortest instrument.
  const std::string from = data::format_iso8601_ms(instruments[2].timestamp_ms[650]);
  for (const std::string& window : {std::string(), " --start " + from}) {
    SCOPED_TRACE(window);
    const Result all = cli(act + window + " --json");
    ASSERT_EQ(all.code, 0) << all.err;
    const std::vector<nlohmann::json> lines = json_lines(all.out);
    std::size_t at = 0;
    for (const std::string& symbol : symbols) {
      const Result alone = cli(act + window + " --json --symbol " + symbol);
      ASSERT_EQ(alone.code, 0) << alone.err;
      for (nlohmann::json expected : json_lines(alone.out)) {
        ASSERT_LT(at, lines.size());
        expected["symbol"] = symbol;
        EXPECT_EQ(lines[at++], expected) << symbol;
      }
    }
    EXPECT_EQ(at, lines.size());
    const Result table = cli(act + window);
    ASSERT_EQ(table.code, 0) << table.err;
    for (const nlohmann::json& line : lines) {
      const std::string row = line["symbol"].get<std::string>();
      EXPECT_NE(table.out.find(row + " "), std::string::npos) << table.out;
    }
  }
  // The first instrument without a bar at the window's start (BBB) exits 2 naming it.
  const std::string late = data::format_iso8601_ms(instruments[0].timestamp_ms[850]);
  const Result bad = cli(act + " --start " + late);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find(path("universe.csv") + "[BBB]: --start " + late), std::string::npos)
      << bad.err;
}

// --follow over rows of several instruments answers each instrument's rows as its window does,
// each carrying its own position, each line naming its symbol; a followed file is first
// answered at every instrument's latest bar.
TEST_F(Act, FollowAnswersEachInstrumentsRowsAsItsWindowDoes) {
  const std::vector<data::Bars> instruments = write_universe(300, 40, m_seed % 1000 + 21);
  const std::vector<std::string> symbols = {"AAA", "BBB", "CCC"};
  const std::string act = "act --weights " + path("p.dqnpolicy") + " --data ";
  const Result streamed =
      cli(act + "- --follow --position short", "cat " + path("universe.csv") + " | ");
  ASSERT_EQ(streamed.code, 0) << streamed.err;
  const std::vector<nlohmann::json> lines = json_lines(streamed.out);
  for (std::size_t s = 0; s < symbols.size(); ++s) {
    SCOPED_TRACE(symbols[s]);
    std::vector<nlohmann::json> mine;
    for (nlohmann::json line : lines) {
      if (line.at("symbol") == symbols[s]) {
        line.erase("symbol");
        mine.push_back(line);
      }
    }
    const Result window = cli(act + path("universe.csv") + " --json --position short --symbol " +
                              symbols[s] + " --end " + std::to_string(instruments[s].size() - 1));
    ASSERT_EQ(window.code, 0) << window.err;
    const std::vector<nlohmann::json> expected = json_lines(window.out);
    ASSERT_FALSE(expected.empty());
    EXPECT_EQ(testing::expect_same_decisions(mine, expected, "stream"), expected.size());
  }
  // A followed file: one decision at each instrument's latest bar first.
  const pid_t child =
      testing::spawn_quiet("exec " + std::string(DQNTRADER_CLI_PATH) + " " + act +
                           path("universe.csv") + " --follow >" + path("live.jsonl"));
  auto written = [&] { return json_lines(slurp(path("live.jsonl"))); };
  for (int i = 0; i < 3000 && written().size() < 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  kill(child, SIGTERM);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const std::vector<nlohmann::json> live = written();
  ASSERT_EQ(live.size(), 3u);
  for (std::size_t s = 0; s < symbols.size(); ++s) {
    EXPECT_EQ(live[s]["symbol"], symbols[s]);
    EXPECT_EQ(live[s]["bar"], instruments[s].size() - 1);
  }
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
                            path("bars.csv") + " --end 399");
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

// Waits (at most a minute: a deadline against a hang, not a measure of speed) until the file
// at path holds at least count JSON lines; returns how many it holds.
std::size_t wait_for_lines(const std::string& path, std::size_t count) {
  std::size_t lines = 0;
  for (int i = 0; i < 6000; ++i) {
    lines = json_lines(slurp(path)).size();
    if (lines >= count)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return lines;
}

// The exit status of a child, waited for.
int exit_status(pid_t child) {
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The first lines of a text file (its header and rows) and the rest.
std::pair<std::string, std::string> first_lines(const std::string& text, int lines) {
  std::size_t cut = 0;
  for (int i = 0; i < lines; ++i)
    cut = text.find('\n', cut) + 1;
  return {text.substr(0, cut), text.substr(cut)};
}

// Standard input that is a file, not a terminal or a pipe, ends too: every row answered, exit
// 0 at its end.
TEST_F(Act, FollowOnStandardInputEndsWithIt) {
  const data::Bars bars = testing::fixture_bars(300, m_seed % 1000 + 19);
  data::write_bars_csv(path("bars.csv"), bars);
  const testing::FixturePolicy p = testing::fixture_policies(bars, m_seed)[0];
  eval::write_policy(path("p.dqnpolicy"), p.file);
  const Result r =
      cli("act --follow --weights " + path("p.dqnpolicy") + " --data - <" + path("bars.csv"),
          "timeout 120 ");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json_lines(r.out).size(), 300 - p.file.features.warmup());
}

// A named pipe is answered row by row as the rows come, not when its writer closes it; its end
// ends act with exit 0; the decisions are the window's.
TEST_F(Act, FollowAnswersAFifoRowByRow) {
  const data::Bars bars = testing::fixture_bars(200, m_seed % 1000 + 23);
  data::write_bars_csv(path("bars.csv"), bars);
  const testing::FixturePolicy p = testing::fixture_policies(bars, m_seed)[1];
  eval::write_policy(path("p.dqnpolicy"), p.file);
  const std::size_t warmup = p.file.features.warmup();
  const Result window = cli("act --json --weights " + path("p.dqnpolicy") + " --data " +
                            path("bars.csv") + " --end 199");
  ASSERT_EQ(window.code, 0) << window.err;
  const std::vector<nlohmann::json> expected = json_lines(window.out);
  ASSERT_EQ(mkfifo(path("feed").c_str(), 0600), 0);
  const pid_t child = testing::spawn_quiet("exec " + std::string(DQNTRADER_CLI_PATH) +
                                           " act --follow --weights " + path("p.dqnpolicy") +
                                           " --data " + path("feed") + " >" + path("out.jsonl"));
  const auto [head, rest] = first_lines(slurp(path("bars.csv")), static_cast<int>(warmup) + 2);
  {
    std::ofstream feed(path("feed"));  // opens once act has opened it for reading
    feed << head << std::flush;        // the header and warmup + 1 rows: one decision
    EXPECT_EQ(wait_for_lines(path("out.jsonl"), 1), 1u) << "no answer before the writer closed";
    const auto [more, unused] = first_lines(rest, 5);
    feed << more << std::flush;
    EXPECT_EQ(wait_for_lines(path("out.jsonl"), 6), 6u);
  }
  EXPECT_EQ(exit_status(child), 0);
  const std::vector<nlohmann::json> got = json_lines(slurp(path("out.jsonl")));
  ASSERT_EQ(got.size(), 6u);
  EXPECT_EQ(testing::expect_same_decisions(
                got, std::vector<nlohmann::json>(expected.begin(), expected.begin() + 6), "fifo"),
            6u);
}

// A followed file that is truncated, or removed or replaced at its path, ends act with exit 2
// saying so (the decisions printed stand); idle, act sleeps on the file rather than waking to
// look (a few wakeups a second at most, where a 1 ms poll makes a thousand).
TEST_F(Act, AFollowedFileThatShrinksOrMovesEndsItAndIdleItSleeps) {
  const data::Bars bars = testing::fixture_bars(200, m_seed % 1000 + 29);
  data::write_bars_csv(path("bars.csv"), bars);
  const testing::FixturePolicy p = testing::fixture_policies(bars, m_seed)[0];
  eval::write_policy(path("p.dqnpolicy"), p.file);
  const std::string text = slurp(path("bars.csv"));
  const auto [head, rest] = first_lines(text, 150);
  for (const std::string change : {"truncate", "rename", "remove", "replace"}) {
    SCOPED_TRACE(change);
    std::ofstream(path("live.csv")) << head;
    fs::remove(path("live.jsonl"));  // the last case's, before this one's act writes its own
    const pid_t child = testing::spawn_quiet("exec " + std::string(DQNTRADER_CLI_PATH) +
                                             " act --follow --weights " + path("p.dqnpolicy") +
                                             " --data " + path("live.csv") + " >" +
                                             path("live.jsonl") + " 2>" + path("live.err"));
    ASSERT_EQ(wait_for_lines(path("live.jsonl"), 1), 1u);
    if (change == "truncate") {
      // Idle first: the main thread's context switches over a second.
      auto switches = [&] {
        std::ifstream status("/proc/" + std::to_string(child) + "/task/" + std::to_string(child) +
                             "/status");
        long total = 0;
        for (std::string line; std::getline(status, line);) {
          if (line.find("ctxt_switches:") != std::string::npos)
            total += std::stol(line.substr(line.find(':') + 1));
        }
        return total;
      };
      const long before = switches();
      std::this_thread::sleep_for(std::chrono::seconds(1));
      EXPECT_LT(switches() - before, 50) << "idle --follow wakes up too often";
      std::ofstream(path("live.csv")) << first_lines(text, 100).first;
    } else if (change == "rename") {
      fs::rename(path("live.csv"), path("moved.csv"));
    } else if (change == "remove") {
      fs::remove(path("live.csv"));
    } else {
      std::ofstream(path("new.csv")) << text;
      fs::rename(path("new.csv"), path("live.csv"));
    }
    EXPECT_EQ(exit_status(child), 2);
    const std::string err = slurp(path("live.err"));
    EXPECT_NE(err.find(change == "truncate" ? "truncated while followed"
                                            : "removed or replaced while followed"),
              std::string::npos)
        << err;
    EXPECT_EQ(json_lines(slurp(path("live.jsonl"))).size(), 1u);
    fs::remove(path("moved.csv"));
  }
}

// Output that cannot be written whole (a file size limit here) is a failure, exit 1 naming
// standard output, for a window's JSON lines, its table and a backtest's returns.
TEST_F(Act, AnOutputCutShortExitsOne) {
  const data::Bars bars = testing::fixture_bars(3000, m_seed % 1000 + 31);
  data::write_bars_csv(path("bars.csv"), bars);
  const testing::FixturePolicy p = testing::fixture_policies(bars, m_seed)[0];
  eval::write_policy(path("p.dqnpolicy"), p.file);
  const std::string policy = " --weights " + path("p.dqnpolicy") + " --data " + path("bars.csv");
  for (const std::string& command : {"act --json --start 100" + policy, "act --start 100" + policy,
                                     "backtest --returns -" + policy}) {
    SCOPED_TRACE(command);
    // 50 blocks of 512 bytes at most; SIGXFSZ ignored, so a write past it fails (EFBIG).
    const Result r = shell("(trap '' XFSZ; ulimit -f 50; exec " + std::string(DQNTRADER_CLI_PATH) +
                           " " + command + " >" + path("big.out") + ")");
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("cannot write to standard output"), std::string::npos) << r.err;
  }
}

// An output that is an input's own file is refused with exit 2, the input left as it was.
TEST_F(Act, NoOutputIsAnInputsFile) {
  const data::Bars bars = testing::fixture_bars(300, m_seed % 1000 + 37);
  data::write_bars_csv(path("bars.csv"), bars);
  eval::write_policy(path("p.dqnpolicy"), testing::fixture_policies(bars, m_seed)[0].file);
  const std::string data = slurp(path("bars.csv")), policy = slurp(path("p.dqnpolicy"));
  const std::string weights = " --weights " + path("p.dqnpolicy");
  const std::pair<std::string, std::string> cases[] = {
      {"act --json" + weights + " --data " + path("bars.csv") + " >>" + path("bars.csv"),
       "standard output (standard output) is the file --data"},
      {"act --json" + weights + " --data " + path("bars.csv") + " >>" + path("p.dqnpolicy"),
       "is the file --weights"},
      {"backtest" + weights + " --data " + path("bars.csv") + " --returns " + path("bars.csv"),
       "--returns " + path("bars.csv") + " is the file --data"},
      {"backtest" + weights + " --data " + path("bars.csv") + " --json " + path("p.dqnpolicy"),
       "--json " + path("p.dqnpolicy") + " is the file --weights"},
  };
  for (const auto& [command, message] : cases) {
    SCOPED_TRACE(command);
    const Result r = shell("(exec " + std::string(DQNTRADER_CLI_PATH) + " " + command + ")");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
  }
  EXPECT_EQ(slurp(path("bars.csv")), data);
  EXPECT_EQ(slurp(path("p.dqnpolicy")), policy);
}

// A policy file whose checksum is right but whose contents are not a policy (sizes that wrap
// 64 bits, windows that are no whole positive number, parameters that are not numbers) is
// refused by act, export and the reference reader alike: exit 2, "damaged policy".
TEST_F(Act, DamagedPoliciesAreRefusedAlike) {
  const data::Bars bars = testing::fixture_bars(300, m_seed % 1000 + 41);
  data::write_bars_csv(path("bars.csv"), bars);
  const testing::FixturePolicy p = testing::fixture_policies(bars, m_seed)[0];
  eval::write_policy(path("good.dqnpolicy"), p.file);
  // The file's metadata and parameters, rewritten with a valid checksum.
  const std::string good = slurp(path("good.dqnpolicy"));
  std::uint64_t meta_size = 0;
  std::memcpy(&meta_size, good.data() + 12, 8);
  const nlohmann::json meta = nlohmann::json::parse(good.substr(20, meta_size));
  std::vector<float> parameters = p.file.parameters;
  auto write = [&](const std::string& name, const nlohmann::json& m,
                   const std::vector<float>& values) {
    const std::string text = m.dump();
    std::string out = good.substr(0, 12);
    const std::uint64_t size = text.size(), count = values.size();
    out.append(reinterpret_cast<const char*>(&size), 8);
    out += text;
    out.append(reinterpret_cast<const char*>(&count), 8);
    out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
    const std::uint64_t hash = hash64(out.data(), out.size());
    out.append(reinterpret_cast<const char*>(&hash), 8);
    std::ofstream(path(name), std::ios::binary) << out;
    return path(name);
  };
  std::vector<std::string> damaged;
  nlohmann::json m = meta;
  m["network"]["hidden"] = {std::uint64_t{1} << 62};
  damaged.push_back(write("wide.dqnpolicy", m, parameters));
  for (const nlohmann::json& window :
       {nlohmann::json(0), nlohmann::json(-3), nlohmann::json(16.5), nlohmann::json(true)}) {
    m = meta;
    m["features"]["return_window"] = window;
    damaged.push_back(
        write("window-" + std::to_string(damaged.size()) + ".dqnpolicy", m, parameters));
  }
  for (const float bad : {std::nanf(""), INFINITY}) {
    std::vector<float> values = parameters;
    values[values.size() / 2] = bad;
    damaged.push_back(
        write("value-" + std::to_string(damaged.size()) + ".dqnpolicy", meta, values));
  }
  ASSERT_EQ(write("same.dqnpolicy", meta, parameters), path("same.dqnpolicy"));
  ASSERT_EQ(slurp(path("same.dqnpolicy")), good);  // the writer above is the file's own
  for (const std::string& file : damaged) {
    SCOPED_TRACE(file);
    const Result act = cli("act --weights " + file + " --data " + path("bars.csv"));
    EXPECT_EQ(act.code, 2);
    EXPECT_NE(act.err.find(file + ": damaged policy: "), std::string::npos) << act.err;
#if defined(DQNTRADER_WITH_ONNX)
    const Result exported = cli("export --onnx " + path("m.onnx") + " --weights " + file);
    EXPECT_EQ(exported.code, 2);
    EXPECT_NE(exported.err.find("damaged policy"), std::string::npos) << exported.err;
    EXPECT_FALSE(fs::exists(path("m.onnx")));
#endif
    EXPECT_EQ(oracle("--check " + file).code, 2);
  }
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
      {"act" + policy + " --data " + path("bars.csv") + " --start 3", "--start 3 selects bar 3"},
      {"act" + policy + " --data " + path("bars.csv") + " --follow --end 200", "--follow"},
      {"act" + policy + " --data " + path("bars.csv") + " --end 5",
       "--end 5 selects bar 5, before"},
      {"act --weights '' --data " + path("bars.csv"), "--weights: an empty path names no file"},
      {"act" + policy + " --data " + path("bars.csv") + " --position 0x1", "--position '0x1'"},
      {"--threads 1000000 act" + policy + " --data " + path("bars.csv"),
       "--threads 1000000: host threads go from 1 to"},
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
  // A sweep whose sweep.json lists no members has no winner.
  nlohmann::json plan = testing::json_file(m_dir / "sweep" / "sweep.json");
  plan["members"] = nlohmann::json::array();
  fs::create_directories(path("empty"));
  std::ofstream(path("empty/sweep.json")) << plan.dump();
  const Result empty = cli("act --weights " + path("empty") + data);
  EXPECT_EQ(empty.code, 2);
  EXPECT_NE(empty.err.find("lists no members"), std::string::npos) << empty.err;
}

}  // namespace
}  // namespace dqntrader

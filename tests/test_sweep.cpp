// dqntrader sweep as a user runs it: a grid of settings times seeds, its populations, its
// leaderboards against the members' own records, a sweep killed inside a population and
// resumed, and bad specifications refused before anything is written.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "dqntrader/io/json_values.hpp"
#include "dqntrader/sweep/search_space.hpp"
#include "dqntrader/train/train_config.hpp"
#include "dqntrader/train/training_run.hpp"
#include "test_support.hpp"

namespace dqntrader {
namespace {

namespace fs = std::filesystem;

using testing::json_file;
using testing::jsonl_records;
using testing::slurp;

struct Result {
  int code;
  std::string err;
};

class Sweep : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() / ("dqntrader-sweep-" + std::to_string(testing::test_seed()));
    fs::create_directories(m_dir);
    EXPECT_EQ(run("synth --bars 3000 --seed 4 --out " + path("bars.dqnbars")).code, 0);
  }
  void TearDown() override { fs::remove_all(m_dir); }

  std::string path(const std::string& name) const { return (m_dir / name).string(); }

  Result run(const std::string& arguments, const std::string& environment = "") const {
    const std::string err = path("stderr.txt");
    const std::string command = environment + " " + std::string(DQNTRADER_CLI_PATH) + " " +
                                arguments + " >/dev/null 2>" + err;
    const int status = std::system(command.c_str());
    return Result{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(err)};
  }

  // A 2 x 2 grid of a member's settings and a population setting, two seeds: eight members in
  // populations of at most three.
  // grid(out) started in a process that stops itself at the rename of population 2's second
  // checkpoint (the first population has finished by then): its id, stopped (status says so;
  // a process that did not stop in time is killed).
  pid_t stopped_sweep(const std::string& out, int& status) const {
    const pid_t child = testing::spawn_quiet(
        "exec env LD_PRELOAD=" + std::string(DQNTRADER_FAILING_IO) +
        " ASAN_OPTIONS=verify_asan_link_order=0 DQNTRADER_STOP_PATH=p-001/checkpoint-"
        " DQNTRADER_STOP_OP=rename DQNTRADER_STOP_AFTER=1 " +
        std::string(DQNTRADER_CLI_PATH) + " " + grid(out));
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (waitpid(child, &status, WUNTRACED | WNOHANG) == 0 &&
           std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (!WIFSTOPPED(status)) {
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
    }
    return child;
  }

  std::string grid(const std::string& out) const {
    return "sweep --data " + path("bars.dqnbars") + " --out " + path(out) +
           " --epochs 3 --steps-per-epoch 60 --learning-starts 256 --environments 16 "
           "--batch-size 32 --replay-capacity 4096 --probe-batch 32 --seeds 1-2 "
           "--set learning-rate=1e-4,1e-3 --set hidden=16,8/8 --population 3";
  }

  fs::path m_dir;
};

// Every member's row in the leaderboards holds what its own run directory recorded, the rows
// are ranked by it, and each combination's row aggregates its seeds' rows.
TEST_F(Sweep, AGridTimesSeedsRanksTheMembersAsTheirRunsRecordedThem) {
  const Result r = run(grid("sweep"));
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json plan = json_file(m_dir / "sweep" / "sweep.json");
  ASSERT_EQ(plan["members"].size(), 8u);
  // Members of one hidden shape share populations: 4 of each shape in populations of 3 and 1.
  ASSERT_EQ(plan["populations"].size(), 4u);
  for (const auto& p : plan["populations"]) {
    EXPECT_TRUE(p["finished"].get<bool>());
    std::set<std::string> shapes;
    for (std::size_t id : p["members"].get<std::vector<std::size_t>>()) {
      const nlohmann::json config = json_file(
          m_dir / "sweep" / plan["members"][id]["run"].get<std::string>() / "config.json");
      shapes.insert(config["hidden"].dump());
    }
    EXPECT_EQ(shapes.size(), 1u) << "a population has one shape";
  }
  const nlohmann::json board = json_file(m_dir / "sweep" / "leaderboard.json");
  ASSERT_EQ(board["members"].size(), 8u);
  double previous = std::numeric_limits<double>::infinity();
  for (const auto& row : board["members"]) {
    const fs::path run_dir = m_dir / "sweep" / row["run"].get<std::string>();
    const nlohmann::json final_metrics = json_file(run_dir / "final_metrics.json");
    const nlohmann::json config = json_file(run_dir / "config.json");
    EXPECT_EQ(row["status"], "finished");
    EXPECT_EQ(config["seed"], row["seed"]);
    for (const auto& [name, value] : row["settings"].items()) {
      train::TrainConfig expected;
      std::vector<train::Setting> all = train::settings(expected);
      for (train::Setting& s : all) {
        if (s.name == name) {
          std::string text = value.get<std::string>();
          std::replace(text.begin(), text.end(), '/', ',');
          s.set(text);
          EXPECT_EQ(nlohmann::json::parse(train::settings_json(expected))[name], config[name])
              << name;
        }
      }
    }
    for (const auto& [key, value] : row["validation"].items())
      EXPECT_EQ(value, final_metrics[key]) << key;
    // The same policy on the test window, as the member's run recorded it at its end.
    EXPECT_EQ(row["test"], final_metrics.at("test").at("best"));
    EXPECT_EQ(row["test_sharpe"], final_metrics["test"]["best"]["sharpe"]);
    // The best epoch's validation Sharpe, as metrics.jsonl recorded it.
    double best = -std::numeric_limits<double>::infinity();
    std::size_t best_epoch = 0;
    for (const nlohmann::json& record : jsonl_records(run_dir / "metrics.jsonl")) {
      if (record["best"].get<bool>()) {
        best = record["validation_sharpe"].get<double>();
        best_epoch = record["epoch"].get<std::size_t>();
      }
    }
    EXPECT_EQ(row["validation_sharpe"].get<double>(), best);
    EXPECT_EQ(row["best_epoch"].get<std::size_t>(), best_epoch);
    EXPECT_LE(best, previous) << "ranked best first";
    previous = best;
  }
  ASSERT_EQ(board["combinations"].size(), 4u);
  for (const auto& c : board["combinations"]) {
    std::vector<double> sharpes;
    for (const auto& row : board["members"]) {
      if (row["combination"] == c["combination"])
        sharpes.push_back(row["validation_sharpe"].get<double>());
    }
    ASSERT_EQ(sharpes.size(), 2u);
    const double mean = (sharpes[0] + sharpes[1]) / 2;
    const double stdev = std::fabs(sharpes[0] - sharpes[1]) / std::sqrt(2.0);
    EXPECT_NEAR(c["validation_sharpe_mean"].get<double>(), mean, 1e-12);
    EXPECT_NEAR(c["validation_sharpe_std"].get<double>(), stdev, 1e-12);
    EXPECT_EQ(c["validation_sharpe_min"].get<double>(), std::min(sharpes[0], sharpes[1]));
  }
  // The CSV holds the same rows: a header, eight members, four combinations.
  std::istringstream csv(slurp(m_dir / "sweep" / "leaderboard.csv"));
  std::string line;
  std::size_t members = 0, combinations = 0;
  std::getline(csv, line);
  EXPECT_EQ(line.rfind("row,rank,member,combination,seed,status,learning-rate,hidden,", 0), 0u)
      << line;
  while (std::getline(csv, line)) {
    members += line.rfind("member,", 0) == 0 ? 1 : 0;
    combinations += line.rfind("combination,", 0) == 0 ? 1 : 0;
  }
  EXPECT_EQ(members, 8u);
  EXPECT_EQ(combinations, 4u);
  // Its report: every member's validation Sharpe over its epochs, a scatter per swept
  // setting (numbers on a numeric axis, network shapes as categories), the best member against
  // buy-and-hold and the leaderboard's rows in its order.
  ASSERT_EQ(run("report " + path("sweep")).code, 0);
  const std::string html = slurp(m_dir / "sweep" / "report.html");
  const auto figure = [&](const std::string& id) {
    const auto a = html.find("<figure class=\"chart\" id=\"chart-" + id + "\">");
    const auto b = html.find("</figure>", a);
    EXPECT_NE(a, std::string::npos) << id;
    return a == std::string::npos ? std::string() : html.substr(a, b - a);
  };
  const auto count = [](const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
      ++n;
    return n;
  };
  const std::string curves = figure("member-sharpe");
  EXPECT_EQ(count(curves, "<path class=\"series\""), 8u);
  for (const auto& row : board["members"]) {
    const std::string member = row["run"].get<std::string>().substr(8);  // members/m-0000
    // Three epochs: a move and two lines.
    const auto at = curves.find("data-series=\"" + member + "\"");
    ASSERT_NE(at, std::string::npos) << member;
    const std::string d = curves.substr(at, curves.find("/>", at) - at);
    EXPECT_EQ(count(d, " L"), 2u) << d;
  }
  const std::string rates = figure("setting-learning-rate");
  EXPECT_EQ(count(rates, "<circle class=\"point\""), 8u);
  const std::string shapes = figure("setting-hidden");
  EXPECT_EQ(count(shapes, "<circle class=\"point\""), 8u);
  EXPECT_NE(shapes.find(">16</text>"), std::string::npos);
  EXPECT_NE(shapes.find(">8/8</text>"), std::string::npos);
  const std::string equity = figure("best-equity");
  EXPECT_NE(equity.find("data-series=\"best member\""), std::string::npos);
  EXPECT_NE(equity.find("data-series=\"buy-and-hold\""), std::string::npos);
  // How much of the winner is luck: the statistics leaderboard.json holds, a histogram of the
  // splits' logits (C(16, 8) of them, in 20 bins) and a point per member's validation and test
  // Sharpe.
  const auto luck = html.find("<h2 id=\"luck\">");
  ASSERT_NE(luck, std::string::npos);
  EXPECT_NE(
      html.find(io::format_metric(io::number_of(board["selection"]["deflated_sharpe"])), luck),
      std::string::npos);
  EXPECT_NE(html.find(io::format_metric(io::number_of(board["selection"]["pbo"])), luck),
            std::string::npos);
  EXPECT_EQ(count(figure("pbo-logits"), "<rect class=\"bar\""), 20u);
  EXPECT_EQ(count(figure("validation-test"), "<circle class=\"point\""), 8u);
  std::size_t previous_row = 0;
  for (const auto& row : board["members"]) {
    const std::string member = row["run"].get<std::string>().substr(8);
    const auto at = html.find("<tr data-member=\"" + member + "\">");
    ASSERT_NE(at, std::string::npos) << member;
    EXPECT_GT(at, previous_row) << "the table keeps the leaderboard's order";
    previous_row = at;
  }
  EXPECT_EQ(count(html, "<tr data-rank="), 4u);
  // A sweep directory is not planned over twice.
  const Result again = run(grid("sweep"));
  EXPECT_EQ(again.code, 2);
  EXPECT_NE(again.err.find("--resume"), std::string::npos) << again.err;
}

// A sweep killed while a population writes a checkpoint, then resumed, ends bitwise where an
// uninterrupted sweep ends; the populations that had finished are not run again.
TEST_F(Sweep, AKilledSweepResumesBitwise) {
  ASSERT_EQ(run(grid("straight")).code, 0);
  int status = 0;
  const pid_t child = stopped_sweep("killed", status);
  ASSERT_TRUE(WIFSTOPPED(status)) << "the sweep did not stop where it was meant to";
  // While it lives it holds the directory: a second start or a resume is refused, and
  // touches nothing.
  const std::string records = slurp(m_dir / "killed" / "members" / "m-0000" / "metrics.jsonl");
  const Result second = run("sweep --resume " + path("killed"));
  EXPECT_EQ(second.code, 2);
  EXPECT_NE(second.err.find("another dqntrader sweep is running in"), std::string::npos)
      << second.err;
  EXPECT_NE(second.err.find("(process " + std::to_string(child) + ")"), std::string::npos)
      << second.err;
  EXPECT_EQ(run(grid("killed")).code, 2);
  EXPECT_EQ(slurp(m_dir / "killed" / "members" / "m-0000" / "metrics.jsonl"), records);
  // Killed, it holds nothing: the kernel released the lock.
  kill(child, SIGKILL);
  waitpid(child, &status, 0);
  const nlohmann::json interrupted = json_file(m_dir / "killed" / "sweep.json");
  ASSERT_TRUE(interrupted["populations"][0]["finished"].get<bool>());
  ASSERT_FALSE(interrupted["populations"][1]["finished"].get<bool>());
  const fs::path first_run = m_dir / "killed" / "members" / "m-0000" / "metrics.jsonl";
  const auto first_written = fs::last_write_time(first_run);
  const Result resumed = run("sweep --resume " + path("killed"));
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_EQ(fs::last_write_time(first_run), first_written)
      << "a population that had finished ran again";
  EXPECT_EQ(json_file(m_dir / "killed" / "leaderboard.json"),
            json_file(m_dir / "straight" / "leaderboard.json"));
  // The settings' columns keep the order of --set through sweep.json.
  EXPECT_EQ(slurp(m_dir / "killed" / "leaderboard.csv"),
            slurp(m_dir / "straight" / "leaderboard.csv"));
  for (std::size_t m = 0; m < 8; ++m) {
    char name[16];
    std::snprintf(name, sizeof name, "m-%04zu", m);
    for (const char* file : {"metrics.jsonl", "best.dqnpolicy", "last.dqnpolicy",
                             "final_metrics.json", "baselines.json"}) {
      EXPECT_EQ(slurp(m_dir / "killed" / "members" / name / file),
                slurp(m_dir / "straight" / "members" / name / file))
          << name << "/" << file;
    }
  }
  // --resume takes nothing else.
  EXPECT_EQ(run("sweep --resume " + path("killed") + " --epochs 4").code, 2);
}

// A sweep of more members than any fixed limit (1,025, past 1,024) ends with its leaderboard
// and its selection statistics over every member: its end is linear in the members (the
// policies evaluated in batches, CSCV's splits in complementary pairs).
TEST_F(Sweep, ASweepOfMoreThan1024MembersEnds) {
  const Result r = run("sweep --data " + path("bars.dqnbars") + " --out " + path("many") +
                       " --seeds 1-1025 --epochs 2 --steps-per-epoch 20 --hidden 8 "
                       "--environments 8 --replay-capacity 10000 --learning-starts 64 "
                       "--batch-size 16 --probe-batch 16");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json board = json_file(m_dir / "many" / "leaderboard.json");
  EXPECT_EQ(board["members"].size(), 1025u);
  const nlohmann::json plan = json_file(m_dir / "many" / "sweep.json");
  const nlohmann::json& selection = plan["selection"];
  EXPECT_EQ(selection["trials"], 1025);
  EXPECT_EQ(selection["members"].size(), 1025u);
  EXPECT_EQ(selection["splits"], 12870);
  EXPECT_TRUE(selection["pbo"].is_number()) << selection.dump();
  EXPECT_TRUE(selection["deflated_sharpe"].is_number()) << selection.dump();
  const nlohmann::json timings = json_file(m_dir / "many" / "timings.json");
  for (const char* key : {"populations_seconds", "files_wait_seconds", "selection_seconds"})
    EXPECT_TRUE(timings[key].is_number()) << key;
}

// Bad specifications exit 2, name the argument, and leave no sweep behind.
// On a terminal (script(1) gives the command one) the sweep's bar and train's epoch line are
// one status line, rewritten in place and cleared before each line of output; written to a
// file, the same commands write no control characters.
TEST_F(Sweep, ShowsItsProgressOnATerminalOnly) {
  if (std::system("command -v script >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "no script(1) here to run the commands on a terminal";
  const std::string cli = DQNTRADER_CLI_PATH;
  auto on_terminal = [&](const std::string& arguments) {
    const std::string seen = path("terminal.txt");
    const std::string command =
        "script -qec '" + cli + " " + arguments + "' /dev/null >" + seen + " 2>&1";
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    return slurp(seen);
  };
  const std::string base =
      " --epochs 2 --steps-per-epoch 40 --learning-starts 256 "
      "--environments 16 --batch-size 32 --replay-capacity 4096 "
      "--probe-batch 32 ";
  const std::string sweep =
      "sweep --data " + path("bars.dqnbars") + base + "--seeds 1-2 --population 1 --out ";
  const std::string shown = on_terminal(sweep + path("terminal-sweep"));
  EXPECT_NE(shown.find("\r\033[K[###############...............] 50%  population 1/2, epoch 2/2"),
            std::string::npos)
      << shown;
  EXPECT_NE(shown.find("epoch 2/2\r\033[Kpopulation 2 of 2 (1 members"), std::string::npos)
      << shown;
  const std::string train = on_terminal("train --data " + path("bars.dqnbars") + base + "--out " +
                                        path("terminal-train"));
  EXPECT_NE(train.find("\r\033[K[epoch 1/2] training and validating..."), std::string::npos)
      << train;
  EXPECT_NE(train.find("\r\033[K[epoch 2/2] training and validating...\r\033[K"), std::string::npos)
      << train;
  const Result redirected = run(sweep + path("file-sweep"));
  ASSERT_EQ(redirected.code, 0) << redirected.err;
  EXPECT_EQ(redirected.err.find('\033'), std::string::npos) << redirected.err;
  EXPECT_EQ(redirected.err.find('\r'), std::string::npos) << redirected.err;
}

TEST_F(Sweep, BadSpecificationsExitWithTwoNamingTheArgument) {
  const std::string base = "sweep --data " + path("bars.dqnbars") + " --out " + path("bad") +
                           " --epochs 1 --steps-per-epoch 10 --learning-starts 128 ";
  const std::pair<std::string, std::string> cases[] = {
      {"--set gamma=0.9,0.99 --set learnig-rate=1e-4", "--set learnig-rate: unknown setting"},
      {"--set hidden=16:64 --random 3", "--set hidden: this setting fixes a population's shapes"},
      {"--set gamma=", "--set 'gamma=': an empty list of values"},
      {"--set gamma=0.9,,0.99", "an empty value in the list"},
      {"--set gamma=0.99:0.9 --random 2", "the range's low end must lie below its high end"},
      {"--set gamma=low:high --random 2", "a range is LO:HI or LO:HI:log"},
      {"--set gamma=0.9:0.99", "--set gamma: a range needs --random N"},
      {"--set gamma=0.9,2", "--set gamma: value 2: --gamma must lie in [0, 1]"},
      {"--set seed=1,2", "--set seed: the seeds are given with --seeds"},
      {"--set cost=0,0.001", "--set cost: every member of a sweep shares this setting"},
      {"--seeds 3-1", "--seeds '3-1'"},
      {"--set probe-interval=10,20", "--probe-interval: members of one population run it"},
      // Counts that must not be negative or absurd: refused before anything is drawn.
      {"--random -3 --set learning-rate=1e-4:1e-2", "--random"},
      {"--random 4000000000 --set learning-rate=1e-4:1e-2", "--random"},
      {"--population -1", "--population"},
      {"--random-seed -1 --random 2 --set learning-rate=1e-4:1e-2", "--random-seed"},
      {"--pbo-blocks 7", "--pbo-blocks 7"},
      // Numbers that do not fit, and infinities where a setting must be a finite number.
      {"--seeds 1-18446744073709551616", "--seeds '1-18446744073709551616'"},
      {"--set learning-rate=1e-4,inf", "learning-rate must be a finite number"},
      {"--reward-scale inf", "reward-scale must be a finite number"},
      // Specifications that made identical members or lists with a missing item.
      {"--seeds 1,1", "seed 1 is given twice"},
      {"--seeds ''", "--seeds ''"},
      {"--random 2", "--random 2: the draws are of the --set settings, and none is given"},
      {"--set hidden=64//64", "an empty item in the list value '64//64'"},
      {"--set hidden=64/", "an empty item in the list value '64/'"},
      {"--set gamma=0.9,9e-1", "--set gamma: values 0.9 and 9e-1 are the same gamma (0.9)"},
      {"--set hidden=16/16,16/16", "--set hidden: values 16/16 and 16/16 are the same hidden"},
      {"--random 3 --set gamma=0.9", "--random 3: draws 1 and 2 are the same settings"},
      // Numbers past 2^64 - 1 are refused as typed, never clamped.
      {"--pbt-interval 99999999999999999999 --schedule pbt --seeds 1-2",
       "--pbt-interval '99999999999999999999' is larger than the largest whole number"},
      {"--halving-interval 18446744073709551616 --schedule halving --seeds 1-2",
       "'18446744073709551616' is larger"},
      // A schedule that would never decide in the epochs given.
      {"--schedule pbt --seeds 1-2",
       "--schedule pbt: --pbt-interval 1 and --pbt-burn-in 0 in runs of 1 epoch never decide"},
      {"--schedule halving --halving-interval 1 --seeds 1-2",
       "--schedule halving: --halving-interval 1 in runs of 1 epoch never decide"},
  };
  for (const auto& [arguments, message] : cases) {
    SCOPED_TRACE(arguments);
    const Result r = run(base + arguments);
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(m_dir / "bad" / "sweep.json"));
  }
  EXPECT_EQ(run("sweep --out " + path("nodata") + " --set gamma=0.9").code, 2);
  std::ofstream(path("space.json")) << "{\"set\": {\"gamma\": []}}";
  const Result empty = run(base + "--space " + path("space.json"));
  EXPECT_EQ(empty.code, 2);
  EXPECT_NE(empty.err.find(path("space.json")), std::string::npos) << empty.err;
  EXPECT_NE(empty.err.find("an empty list"), std::string::npos) << empty.err;
  // A bad setting in a space file names the file; a directory is not a space file; an --out
  // that is a file is refused.
  std::ofstream(path("space.json")) << "{\"set\": {\"gamma\": [0.9, 2]}}";
  const Result bad_value = run(base + "--space " + path("space.json"));
  EXPECT_EQ(bad_value.code, 2);
  EXPECT_NE(bad_value.err.find(path("space.json") + ": setting gamma: value 2"), std::string::npos)
      << bad_value.err;
  const Result directory = run(base + "--space " + m_dir.string());
  EXPECT_EQ(directory.code, 2);
  EXPECT_NE(directory.err.find("--space " + m_dir.string() + " is a directory, not a file"),
            std::string::npos)
      << directory.err;
  std::ofstream(path("a-file")) << "x";
  const Result file_out = run("sweep --data " + path("bars.dqnbars") + " --out " + path("a-file") +
                              " --set gamma=0.9,0.99");
  EXPECT_EQ(file_out.code, 2);
  EXPECT_NE(file_out.err.find("is a file, not a directory"), std::string::npos) << file_out.err;
  std::ofstream(path("space.json")) << "{\"random\": -1, \"set\": {\"gamma\": [0.9]}}";
  const Result negative = run(base + "--space " + path("space.json"));
  EXPECT_EQ(negative.code, 2);
  EXPECT_NE(negative.err.find("\"random\""), std::string::npos) << negative.err;
  EXPECT_FALSE(fs::exists(m_dir / "bad"));
}

// A member its fault budget stopped has no result to rank: it comes after every member that
// did not fail, whatever its Sharpe ratio before it failed, its combination does not count it
// as finished, and the last lines mark it. The selection's deflated Sharpe ratio stands where
// the validation window is too short for PBO's blocks. A sweep in which every member failed
// exits non-zero saying so.
TEST_F(Sweep, FailedMembersRankLastAndASweepWithNoneFinishedFails) {
  // Twins per seed: the same run until epoch 2, where one has every price poisoned.
  const std::string base = "sweep --data " + path("bars.dqnbars") +
                           " --epochs 3 --steps-per-epoch 30 --learning-starts 256 "
                           "--environments 16 --batch-size 32 --replay-capacity 4096 "
                           "--probe-batch 32 --hidden 8 --fault-budget 3 --seeds 1-2 ";
  const Result r = run(base + "--out " + path("s") +
                       " --set inject-fault=price@2,weight@99 --val-fraction 0.02 --pbo-blocks 24");
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json board = json_file(m_dir / "s" / "leaderboard.json");
  std::vector<std::string> statuses;
  for (const nlohmann::json& m : board["members"])
    statuses.push_back(m["status"].get<std::string>());
  ASSERT_EQ(statuses.size(), 4u);
  EXPECT_EQ(std::count(statuses.begin(), statuses.end(), "failed"), 2);
  EXPECT_TRUE(std::is_partitioned(statuses.begin(), statuses.end(), [](const std::string& s) {
    return s != "failed";
  })) << board["members"].dump();
  for (const nlohmann::json& c : board["combinations"]) {
    EXPECT_EQ(c["finished"], c["settings"]["inject-fault"] == "price@2" ? 0 : 2) << c.dump();
  }
  EXPECT_NE(r.err.find("(failed: ranked after every member that did not)"), std::string::npos)
      << r.err;
  const nlohmann::json& selection = board["selection"];
  EXPECT_EQ(selection["trials"], 2);
  EXPECT_TRUE(selection["pbo"].is_null()) << selection.dump();
  EXPECT_NE(selection["pbo_note"].get<std::string>().find("too few for 24 blocks"),
            std::string::npos);
  EXPECT_TRUE(selection["expected_max_sharpe"].is_number()) << selection.dump();
  EXPECT_TRUE(selection.contains("deflated_sharpe")) << selection.dump();
  EXPECT_TRUE(selection["logit_histogram"].empty());

  const Result none = run(base + "--out " + path("none") + " --set inject-fault=price@1,price@2");
  EXPECT_EQ(none.code, 1);
  EXPECT_NE(none.err.find("no member of the sweep finished: every one of its 4 members failed"),
            std::string::npos)
      << none.err;
}

// A population whose every checkpoint is damaged trains again from the start when the sweep
// resumes (saying why), and ends where an uninterrupted sweep ends: never a member failed for
// a state it can recover from.
TEST_F(Sweep, APopulationWhoseCheckpointsAreDamagedTrainsAgain) {
  ASSERT_EQ(run(grid("straight")).code, 0);
  int status = 0;
  const pid_t child = stopped_sweep("damaged", status);
  ASSERT_TRUE(WIFSTOPPED(status)) << "the sweep did not stop where it was meant to";
  kill(child, SIGKILL);
  waitpid(child, &status, 0);
  std::size_t damaged = 0;
  for (const auto& entry : fs::directory_iterator(m_dir / "damaged" / "populations" / "p-001")) {
    std::string bytes = slurp(entry.path());
    bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x40);
    std::ofstream(entry.path(), std::ios::binary) << bytes;
    ++damaged;
  }
  ASSERT_GE(damaged, 1u);
  const Result resumed = run("sweep --resume " + path("damaged"));
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("trained again from the start"), std::string::npos) << resumed.err;
  const nlohmann::json plan = json_file(m_dir / "damaged" / "sweep.json");
  for (std::size_t id : plan["populations"][1]["members"].get<std::vector<std::size_t>>()) {
    EXPECT_EQ(plan["members"][id]["result"]["status"], "finished");
    EXPECT_NE(plan["members"][id]["result"].value("restarted", std::string()).find("checkpoint"),
              std::string::npos);
  }
  EXPECT_EQ(json_file(m_dir / "damaged" / "leaderboard.json"),
            json_file(m_dir / "straight" / "leaderboard.json"));
}

// A finished member's files that were deleted or changed are noticed by --resume: its
// population runs again (from its last checkpoint) and writes them again, byte for byte.
TEST_F(Sweep, AResumeWritesAFinishedMembersLostFilesAgain) {
  ASSERT_EQ(run(grid("lost")).code, 0);
  const fs::path members = m_dir / "lost" / "members";
  std::map<std::string, std::string> before;
  for (const char* file : {"config.json", "metrics.jsonl", "best.dqnpolicy", "last.dqnpolicy",
                           "final_metrics.json", "baselines.json"})
    before[file] = slurp(members / "m-0000" / file);
  const std::string records = slurp(members / "m-0005" / "metrics.jsonl");
  const nlohmann::json board = json_file(m_dir / "lost" / "leaderboard.json");
  fs::remove_all(members / "m-0000");
  std::ofstream(members / "m-0005" / "metrics.jsonl") << records.substr(0, records.size() / 2);
  // And m-0000's population's newest checkpoint is damaged: the resume goes back to the one
  // before it, says so, and trains the last epoch again.
  const nlohmann::json plan = json_file(m_dir / "lost" / "sweep.json");
  const std::size_t population = plan["members"][0]["population"].get<std::size_t>();
  const fs::path newest = m_dir / "lost" /
                          plan["populations"][population]["checkpoints"].get<std::string>() /
                          "checkpoint-3.dqnckpt";
  std::string bytes = slurp(newest);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x40);
  std::ofstream(newest, std::ios::binary) << bytes;
  const Result resumed = run("sweep --resume " + path("lost"));
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("resumed past damaged checkpoints: "), std::string::npos)
      << resumed.err;
  EXPECT_NE(resumed.err.find("checkpoint-3.dqnckpt"), std::string::npos) << resumed.err;
  EXPECT_NE(resumed.err.find("members/m-0000/best.dqnpolicy is missing"), std::string::npos)
      << resumed.err;
  EXPECT_NE(resumed.err.find("members/m-0005/metrics.jsonl has changed"), std::string::npos)
      << resumed.err;
  for (const auto& [file, bytes] : before)
    EXPECT_EQ(slurp(members / "m-0000" / file), bytes) << file;
  EXPECT_EQ(slurp(members / "m-0005" / "metrics.jsonl"), records);
  EXPECT_EQ(json_file(m_dir / "lost" / "leaderboard.json"), board);
  // Intact, a finished sweep's resume runs nothing again: no member's or population's file is
  // written (each keeps its time and bytes, and none is added), and the leaderboard stands.
  std::map<std::string, std::pair<fs::file_time_type, std::string>> files;
  auto written = [&] {
    std::map<std::string, std::pair<fs::file_time_type, std::string>> out;
    for (const char* part : {"members", "populations"}) {
      for (const auto& entry : fs::recursive_directory_iterator(m_dir / "lost" / part)) {
        if (entry.is_regular_file())
          out[entry.path().string()] = {entry.last_write_time(), slurp(entry.path())};
      }
    }
    return out;
  };
  files = written();
  ASSERT_GT(files.size(), 8u * 5);
  const Result again = run("sweep --resume " + path("lost"));
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(again.err.find("runs again"), std::string::npos) << again.err;
  const auto after = written();
  EXPECT_EQ(after.size(), files.size());
  for (const auto& [name, was] : files) {
    const auto now = after.find(name);
    ASSERT_NE(now, after.end()) << name << " is gone";
    EXPECT_EQ(now->second.first, was.first) << name << " was written again";
    EXPECT_EQ(now->second.second, was.second) << name;
  }
  EXPECT_EQ(json_file(m_dir / "lost" / "leaderboard.json"), board);
}

// A resume on data other than the sweep's is refused, saying what differs; on its data, it goes.
TEST_F(Sweep, AResumeOnOtherDataIsRefused) {
  const std::string sweep = "sweep --data " + path("bars.dqnbars") + " --out " + path("data") +
                            " --epochs 1 --steps-per-epoch 10 --learning-starts 128 --hidden 8 "
                            "--seeds 1-2";
  ASSERT_EQ(run(sweep).code, 0);
  fs::rename(path("bars.dqnbars"), path("kept.dqnbars"));
  ASSERT_EQ(run("synth --bars 3000 --seed 5 --out " + path("bars.dqnbars")).code, 0);
  const Result other = run("sweep --resume " + path("data"));
  EXPECT_EQ(other.code, 2);
  EXPECT_NE(other.err.find("the data differ from the data the sweep was planned on"),
            std::string::npos)
      << other.err;
  fs::rename(path("kept.dqnbars"), path("bars.dqnbars"));
  EXPECT_EQ(run("sweep --resume " + path("data")).code, 0);
}

// A sweep planned without --seeds (every member with the base's seed) resumes.
TEST_F(Sweep, ASweepWithoutSeedsResumes) {
  const std::string sweep = "sweep --data " + path("bars.dqnbars") + " --out " + path("noseeds") +
                            " --epochs 1 --steps-per-epoch 10 --learning-starts 128 --hidden 8 "
                            "--set gamma=0.9,0.99";
  ASSERT_EQ(run(sweep).code, 0);
  const Result again = run("sweep --resume " + path("noseeds"));
  EXPECT_EQ(again.code, 0) << again.err;
}

// The same space from a file: a grid and random draws, seeded.
TEST(SearchSpace, AFileGivesTheSameSpaceAndDrawsAreSeeded) {
  const fs::path file = fs::temp_directory_path() /
                        ("dqntrader-space-" + std::to_string(testing::test_seed()) + ".json");
  std::ofstream(file) << R"({"seeds": "1-3", "random": 50, "random_seed": 7,
    "set": {"learning-rate": {"low": 1e-5, "high": 1e-2, "log": true},
            "hidden": [[64, 64], [128]], "n-step": {"low": 1, "high": 5}},
    "base": {"epochs": 2}})";
  const sweep::SearchSpace space = sweep::read_space(file.string());
  fs::remove(file);
  EXPECT_EQ(space.seeds, (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(space.base["epochs"], 2);
  ASSERT_EQ(space.axes.size(), 3u);
  const auto axis = [&](const std::string& name) {
    for (std::size_t i = 0; i < space.axes.size(); ++i) {
      if (space.axes[i].setting == name)
        return i;
    }
    ADD_FAILURE() << "no axis " << name;
    return std::size_t{0};
  };
  EXPECT_EQ(space.axes[axis("hidden")].values, (std::vector<std::string>{"64/64", "128"}));
  EXPECT_TRUE(space.axes[axis("learning-rate")].range && space.axes[axis("learning-rate")].log);
  const std::vector<sweep::Combination> a = sweep::combinations(space);
  const std::vector<sweep::Combination> b = sweep::combinations(space);
  ASSERT_EQ(a.size(), 50u);
  double lowest = 1, highest = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].values, b[i].values) << "the same seed draws the same";
    const double lr = std::stod(a[i].values[axis("learning-rate")].second);
    EXPECT_GE(lr, 1e-5);
    EXPECT_LE(lr, 1e-2);
    lowest = std::min(lowest, lr);
    highest = std::max(highest, lr);
    const train::TrainConfig c = sweep::apply(train::TrainConfig{}, a[i], 1);
    EXPECT_GE(c.n_step, 1);  // a whole number in [1, 5]
    EXPECT_LE(c.n_step, 5);
    EXPECT_TRUE(c.hidden == (std::vector<std::size_t>{64, 64}) ||
                c.hidden == (std::vector<std::size_t>{128}));
  }
  EXPECT_LT(lowest, 1e-4) << "log-uniform: small values are drawn";
  EXPECT_GT(highest, 1e-3);
  EXPECT_NO_THROW(sweep::check(space, train::TrainConfig{}));
}

}  // namespace
}  // namespace dqntrader

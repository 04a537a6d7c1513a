// The test window: bars held out at the end (or a file of their own) that no choice reads.
// Training, validation, the best epoch and the checkpoints do not depend on them; they are
// evaluated once, when the run ends, and what is recorded there is what a backtest of the
// run's policies on those bars gives.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "backends/execution.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/data/csv_reader.hpp"
#include "dqntrader/data/synthetic.hpp"
#include "dqntrader/io/checkpoint_file.hpp"
#include "dqntrader/train/training_run.hpp"
#include "test_support.hpp"

namespace dqntrader {
namespace {

namespace fs = std::filesystem;
using testing::json_file;
using testing::slurp;

class TestWindow : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() /
            ("dqntrader-test-window-" + std::to_string(testing::test_seed()));
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }

  // The first `kept` bars of one market followed by bars kept .. total - 1 of another (the same
  // times, other prices): a market whose end differs.
  static data::Bars spliced(std::size_t kept, std::size_t total, std::uint64_t tail_seed) {
    data::SynthConfig synth;
    synth.bars = total;
    synth.seed = 11;
    data::Bars bars = data::generate_bars(synth);
    synth.seed = tail_seed;
    const data::Bars tail = data::generate_bars(synth);
    // The tail's prices, scaled to continue from the last kept close.
    const double scale = bars.close[kept - 1] / tail.close[kept - 1];
    for (std::size_t t = kept; t < total; ++t) {
      bars.open[t] = tail.open[t] * scale;
      bars.high[t] = tail.high[t] * scale;
      bars.low[t] = tail.low[t] * scale;
      bars.close[t] = tail.close[t] * scale;
      bars.volume[t] = tail.volume[t];
      bars.ofi[t] = tail.ofi[t];
    }
    return bars;
  }

  train::TrainConfig small(const std::string& data, const std::string& name) const {
    train::TrainConfig c;
    c.data = data;
    c.epochs = 3;
    c.steps_per_epoch = 40;
    c.learning_starts = 256;
    c.hidden = {16};
    c.replay_capacity = 4096;
    c.lr_schedule = "constant";
    c.out = (m_dir / name).string();
    return c;
  }

  train::RunResult run(const train::TrainConfig& c, std::string* log_text = nullptr,
                       train::ResumeOptions resume = {}) const {
    std::ostringstream log;
    train::RunResult r = train::run_training(m_stream.space(), c, log, resume);
    if (log_text != nullptr)
      *log_text = log.str();
    return r;
  }

  // Every section of the checkpoint but the wall-clock seconds and the fingerprint of the test
  // window's bars (which binds a resume to them).
  static void expect_same_checkpoint(const fs::path& a_path, const fs::path& b_path) {
    const auto a = io::read_sections(a_path.string());
    const auto b = io::read_sections(b_path.string());
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].name, b[i].name);
      if (a[i].name != "timings.jsonl/0" && a[i].name != "test_fingerprint") {
        EXPECT_EQ(a[i].bytes, b[i].bytes) << "section " << a[i].name;
      }
    }
  }

  // The command at this process's host threads: the sums of the metrics are reductions whose
  // order follows the thread count.
  int cli(const std::string& arguments) const {
    const std::string command =
        "OMP_NUM_THREADS=" + std::to_string(Kokkos::DefaultHostExecutionSpace().concurrency()) +
        " " + DQNTRADER_CLI_PATH + " " + arguments + " >" + (m_dir / "out.txt").string() + " 2>" +
        (m_dir / "err.txt").string();
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  fs::path m_dir;
  exec::StreamSpace m_stream;
};

// Two markets that share their first 6,000 bars and differ in the last 1,500 (a fifth of 7,500,
// the default test fraction): the runs on them are bitwise the same run, and so is a run on
// the first 6,000 bars alone without a test window. Only the test numbers differ.
TEST_F(TestWindow, OtherTestBarsChangeNothingBeforeTheEnd) {
  const std::string data = (m_dir / "bars.csv").string();
  data::write_bars_csv(data, spliced(6000, 7500, 12));
  std::string log;
  const train::RunResult a = run(small(data, "a"), &log);
  data::write_bars_csv(data, spliced(6000, 7500, 13));
  const train::RunResult b = run(small(data, "b"));
  data::write_bars_csv(data, data::first_bars(spliced(6000, 7500, 12), 6000));
  train::TrainConfig untested = small(data, "none");
  untested.test_fraction = 0;
  const train::RunResult none = run(untested);

  for (const char* file : {"metrics.jsonl", "best.dqnpolicy", "last.dqnpolicy", "baselines.json"}) {
    const std::string expected = slurp(m_dir / "a" / file);
    EXPECT_FALSE(expected.empty()) << file;
    EXPECT_EQ(slurp(m_dir / "b" / file), expected) << file;
    EXPECT_EQ(slurp(m_dir / "none" / file), expected) << file;
  }
  EXPECT_EQ(a.best_epoch, b.best_epoch);
  EXPECT_EQ(a.best_epoch, none.best_epoch);
  expect_same_checkpoint(m_dir / "a" / "checkpoint-3.dqnckpt",
                         m_dir / "b" / "checkpoint-3.dqnckpt");

  // The validation part of final_metrics.json is the same; the test part is there only with a
  // test window, on bars 6,000 .. 7,499, and differs where the bars do.
  nlohmann::json fa = json_file(m_dir / "a" / "final_metrics.json");
  nlohmann::json fb = json_file(m_dir / "b" / "final_metrics.json");
  const nlohmann::json fn = json_file(m_dir / "none" / "final_metrics.json");
  EXPECT_FALSE(fn.contains("test"));
  ASSERT_TRUE(fa.contains("test"));
  ASSERT_TRUE(fb.contains("test"));
  EXPECT_EQ(fa["test"]["window"]["first_bar"], 6000);
  EXPECT_EQ(fa["test"]["window"]["last_bar"], 7499);
  EXPECT_NE(fa["test"]["best"], fb["test"]["best"]);
  EXPECT_NE(fa["test"]["window"]["fingerprint"], fb["test"]["window"]["fingerprint"]);
  fa.erase("test");
  fb.erase("test");
  EXPECT_EQ(fa, fn);
  EXPECT_EQ(fb, fn);

  // The last line gives both numbers; without a test window, only the validation one.
  ASSERT_TRUE(a.test.has_value());
  EXPECT_NE(log.find("best validation Sharpe "), std::string::npos) << log;
  EXPECT_NE(log.find("; on the unseen test window "), std::string::npos) << log;
  EXPECT_NE(log.find("test bars 6000..7499"), std::string::npos) << log;
  EXPECT_FALSE(none.test.has_value());
}

// A separate test file: two different ones give the same run and other test numbers.
TEST_F(TestWindow, ASeparateTestFileIsReadOnlyAtTheEnd) {
  const std::string data = (m_dir / "bars.csv").string(), test = (m_dir / "test.csv").string();
  data::write_bars_csv(data, data::first_bars(spliced(6000, 7500, 12), 6000));
  data::SynthConfig synth;
  synth.bars = 1500;
  synth.seed = 21;
  synth.start_ms += 6000 * synth.interval_ms;  // the day after the data's last bar
  data::write_bars_csv(test, data::generate_bars(synth));
  train::TrainConfig c = small(data, "a");
  c.test_data = test;
  run(c);
  synth.seed = 22;
  data::write_bars_csv(test, data::generate_bars(synth));
  c.out = (m_dir / "b").string();
  run(c);
  EXPECT_EQ(slurp(m_dir / "a" / "metrics.jsonl"), slurp(m_dir / "b" / "metrics.jsonl"));
  EXPECT_EQ(slurp(m_dir / "a" / "best.dqnpolicy"), slurp(m_dir / "b" / "best.dqnpolicy"));
  expect_same_checkpoint(m_dir / "a" / "checkpoint-3.dqnckpt",
                         m_dir / "b" / "checkpoint-3.dqnckpt");
  const nlohmann::json ta = json_file(m_dir / "a" / "final_metrics.json").at("test");
  const nlohmann::json tb = json_file(m_dir / "b" / "final_metrics.json").at("test");
  EXPECT_EQ(ta["window"]["data"], test);
  // The whole file after the features' warm-up.
  EXPECT_EQ(ta["window"]["last_bar"], 1499);
  EXPECT_EQ(ta["window"]["first_bar"], tb["window"]["first_bar"]);
  EXPECT_LT(ta["window"]["first_bar"].get<int>(), 40);
  EXPECT_NE(ta["best"], tb["best"]);
}

// What the run recorded for the test window is what `dqntrader backtest` gives for its best and
// last policies and the built-in ones on those bars; resuming the finished run changes nothing.
TEST_F(TestWindow, TheRecordIsWhatABacktestOfThePoliciesGivesAndResumingKeepsIt) {
  const std::string data = (m_dir / "bars.csv").string();
  data::write_bars_csv(data, spliced(6000, 7500, 12));
  const train::TrainConfig c = small(data, "run");
  run(c);
  const fs::path dir = m_dir / "run";
  const std::string recorded = slurp(dir / "final_metrics.json");
  const nlohmann::json test = nlohmann::json::parse(recorded).at("test");
  const std::string json = (m_dir / "backtest.json").string();
  ASSERT_EQ(cli("backtest --data " + data + " --weights " + (dir / "best.dqnpolicy").string() +
                " --weights " + (dir / "last.dqnpolicy").string() +
                " --policy buy-and-hold --policy flat --policy sign-of-ofi --cost 0.0005 "
                "--bars-per-year 252 --start " +
                test["window"]["first_bar"].dump() + " --json " + json),
            0)
      << slurp(m_dir / "err.txt");
  const nlohmann::json backtest = json_file(json);
  ASSERT_EQ(backtest.size(), 5u);
  for (const auto& entry : backtest) {
    EXPECT_EQ(entry["window"]["first_bar"], test["window"]["first_bar"]);
    EXPECT_EQ(entry["window"]["last_bar"], test["window"]["last_bar"]);
  }
  EXPECT_EQ(backtest[0]["metrics"], test["best"]);
  EXPECT_EQ(backtest[1]["metrics"], test["last"]);
  EXPECT_EQ(backtest[2]["metrics"], test["baselines"]["buy-and-hold"]);
  EXPECT_EQ(backtest[3]["metrics"], test["baselines"]["flat"]);
  EXPECT_EQ(backtest[4]["metrics"], test["baselines"]["sign-of-ofi"]);

  train::ResumeOptions resume;
  resume.resume = true;
  run(c, nullptr, resume);
  EXPECT_EQ(slurp(dir / "final_metrics.json"), recorded);
}

// A test file that is not unseen is refused before anything is written, saying which of its
// bars overlap: the training file itself, a file overlapping its end, a file dated earlier;
// and --test-fraction is refused beside --test-data rather than silently ignored.
TEST_F(TestWindow, ATestFileThatIsNotUnseenIsRefused) {
  const std::string data = (m_dir / "bars.csv").string();
  data::write_bars_csv(data, data::first_bars(spliced(6000, 7500, 12), 3000));
  data::SynthConfig synth;
  synth.bars = 800;
  synth.seed = 23;
  synth.start_ms += 2900 * synth.interval_ms;  // its first 100 bars are the data's last 100
  data::write_bars_csv((m_dir / "overlapping.csv").string(), data::generate_bars(synth));
  synth.start_ms -= 2000 * synth.interval_ms;
  data::write_bars_csv((m_dir / "earlier.csv").string(), data::generate_bars(synth));
  const std::pair<std::string, std::string> cases[] = {
      {data, "its bars 0 .. 2999 (2000-01-03T00:00:00.000Z .. "},
      {(m_dir / "overlapping.csv").string(), "its bars 0 .. 99 ("},
      {(m_dir / "earlier.csv").string(), "its bars 0 .. 799 ("},
  };
  for (const auto& [file, message] : cases) {
    SCOPED_TRACE(file);
    ASSERT_EQ(cli("train --data " + data + " --test-data " + file + " --epochs 1 --out " +
                  (m_dir / "run").string()),
              2);
    const std::string err = slurp(m_dir / "err.txt");
    EXPECT_NE(err.find("--test-data " + file + ": " + message), std::string::npos) << err;
    EXPECT_NE(err.find("are not after the bars training and validation see"), std::string::npos)
        << err;
    EXPECT_FALSE(fs::exists(m_dir / "run"));
  }
  synth.start_ms += 3000 * synth.interval_ms;  // after the data: accepted, but not with a fraction
  data::write_bars_csv((m_dir / "later.csv").string(), data::generate_bars(synth));
  ASSERT_EQ(cli("train --data " + data + " --test-data " + (m_dir / "later.csv").string() +
                " --test-fraction 0.1 --epochs 1 --out " + (m_dir / "run").string()),
            2);
  EXPECT_NE(slurp(m_dir / "err.txt")
                .find("--test-fraction cuts the test window off the data, "
                      "and a test-data file is the test window: drop --test-data"),
            std::string::npos)
      << slurp(m_dir / "err.txt");
  EXPECT_FALSE(fs::exists(m_dir / "run"));
}

// Resuming a run whose test window's bars changed is refused, naming the test window (the
// training bars are the same): its final numbers would otherwise be rewritten from other bars.
TEST_F(TestWindow, AResumeOnOtherTestBarsIsRefused) {
  const std::string data = (m_dir / "bars.csv").string();
  data::write_bars_csv(data, spliced(6000, 7500, 12));
  train::TrainConfig c = small(data, "run");
  c.epochs = 1;
  run(c);
  const std::string recorded = slurp(m_dir / "run" / "final_metrics.json");
  data::write_bars_csv(data, spliced(6000, 7500, 13));  // the same first 6,000, another tail
  train::ResumeOptions resume;
  resume.resume = true;
  try {
    run(c, nullptr, resume);
    ADD_FAILURE() << "resumed on other test bars";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("the test window's data differ from the checkpoint's"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(slurp(m_dir / "run" / "final_metrics.json"), recorded);
}

TEST_F(TestWindow, ATooShortTestWindowIsRefusedBeforeTraining) {
  const std::string data = (m_dir / "bars.csv").string();
  data::write_bars_csv(data, data::first_bars(spliced(6000, 7500, 12), 3000));
  train::TrainConfig c = small(data, "run");
  c.test_fraction = 0.0005;  // 1.5 bars
  EXPECT_THROW(run(c), InputError);
  EXPECT_FALSE(fs::exists(m_dir / "run" / "metrics.jsonl"));
  c.test_fraction = 1.0;
  EXPECT_THROW(run(c), InputError);
}

}  // namespace
}  // namespace dqntrader

// Reliability: the same seed gives the same run, a resumed run equals a straight one, a kill
// never leaves a corrupt checkpoint, failing writes are reported and leave the previous
// checkpoint intact, bad data is rejected with its location, and numerical faults are
// skipped or restored, counted, and stop the run once they persist.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backends/execution.hpp"
#include "bad_inputs.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/core/hash.hpp"
#include "dqntrader/eval/metrics_json.hpp"
#include "dqntrader/eval/policy_file.hpp"
#include "dqntrader/io/checkpoint_file.hpp"
#include "dqntrader/io/record.hpp"
#include "dqntrader/io/snapshot.hpp"
#include "dqntrader/train/run_checkpoint.hpp"
#include "dqntrader/train/training_run.hpp"
#include "test_support.hpp"

namespace dqntrader {
namespace {

namespace fs = std::filesystem;

using testing::slurp;

class Reliability : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() /
            ("dqntrader-reliability-" + std::to_string(testing::test_seed()));
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }

  // A short, checkpoint-heavy configuration.
  train::TrainConfig small(const std::string& name, std::size_t epochs) const {
    train::TrainConfig c;
    c.synth_bars = 3000;
    c.epochs = epochs;
    c.steps_per_epoch = 40;
    c.learning_starts = 256;
    c.hidden = {16};
    c.replay_capacity = 4096;
    c.out = (m_dir / name).string();
    return c;
  }

  train::RunResult run(const train::TrainConfig& c, train::ResumeOptions resume = {}) const {
    std::ostringstream log;
    return train::run_training(m_stream.space(), c, log, resume);
  }

  int cli(const std::string& arguments, const std::string& environment = "") const {
    const std::string command = environment + " " + DQNTRADER_CLI_PATH + " " + arguments + " >" +
                                (m_dir / "out.txt").string() + " 2>" + (m_dir / "err.txt").string();
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  std::string err() const { return slurp(m_dir / "err.txt"); }

  fs::path m_dir;
  exec::StreamSpace m_stream;
};

// --- the run's record in a checkpoint ----------------------------------------------------

// A checkpoint of format 1 (tests/fixtures/checkpoint-v1: a run of one epoch written before
// records were kept by field name, its structs their bytes) is read, every field where its
// run's own metrics.jsonl says, and the run continues from it; a format newer than this build
// knows is refused, naming it.
TEST_F(Reliability, ACheckpointOfFormatOneIsReadAndContinued) {
  const fs::path fixture = fs::path(DQNTRADER_SOURCE_DIR) / "tests" / "fixtures" / "checkpoint-v1";
  const std::string path = (fixture / "checkpoint-1.dqnckpt").string();
  std::uint32_t format = 0;
  std::vector<io::Section> sections = io::read_sections(path, &format);
  ASSERT_EQ(format, 1u);
  train::upgrade(sections, format, path);
  const train::RunCheckpoint saved = train::RunCheckpoint::read(sections, path);
  ASSERT_EQ(saved.epoch, 1);
  ASSERT_EQ(saved.members.size(), 1u);
  const nlohmann::json epoch = nlohmann::json::parse(slurp(fixture / "metrics.jsonl"));
  ASSERT_EQ(epoch["epoch"], 1);
  ASSERT_TRUE(epoch["best"].get<bool>());
  // Every metric, by name: the checkpoint's best are the epoch's validation metrics.
  EXPECT_EQ(eval::to_json(saved.members[0].best_metrics), epoch["validation"]);
  const train::MemberState& state = saved.members[0].state;
  EXPECT_EQ(state.best_sharpe, epoch["validation"]["sharpe"].get<double>());
  EXPECT_EQ(state.last_sharpe, state.best_sharpe);
  EXPECT_EQ(state.best_epoch, 1);
  EXPECT_EQ(state.epoch, 1);
  EXPECT_EQ(state.since_best, 0);
  // Written at the epoch's end, before the run ended: neither done nor failed nor stopped.
  EXPECT_EQ(state.done, 0);
  EXPECT_EQ(state.failed, 0);
  EXPECT_EQ(state.stopped_early, 0);
  const io::RecordReader counters(io::find_section(sections, "host_counters", path), path);
  std::int64_t steps = 0;
  counters("steps", steps);
  EXPECT_EQ(steps, epoch["steps"].get<std::int64_t>());
  // The run goes on from it, writing the format of today.
  const fs::path run = m_dir / "v1";
  fs::copy(fixture, run);
  ASSERT_EQ(cli("train --resume " + run.string() + " --epochs 2"), 0) << err();
  EXPECT_NE(err().find("resuming after epoch 1"), std::string::npos) << err();
  ASSERT_NO_THROW(io::read_sections((run / "checkpoint-2.dqnckpt").string(), &format));
  EXPECT_EQ(format, train::kCheckpointFormat);
  EXPECT_EQ(
      nlohmann::json::parse(slurp(run / "metrics.jsonl")
                                .substr(slurp(run / "metrics.jsonl").find('\n') + 1))["epoch"],
      2);
  // A newer format is named, not misread.
  try {
    train::upgrade(sections, train::kCheckpointFormat + 1, path);
    ADD_FAILURE() << "a checkpoint of a newer format was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("format " + std::to_string(train::kCheckpointFormat + 1) +
                                         " is newer than this dqntrader reads"),
              std::string::npos)
        << e.what();
  }
}

// Every field of the run's record comes back from a checkpoint file as it went in; a record
// without the fields older checkpoints lack (the test window's fingerprint, a member's last
// parameters before it finished) reads them as absent.
TEST_F(Reliability, TheRunsCheckpointRecordRoundTripsEveryField) {
  std::mt19937_64 rng(testing::test_seed());
  std::uniform_real_distribution<double> uniform(-3.0, 3.0);
  auto number = [&] { return static_cast<std::int64_t>(rng() % 100000); };
  auto floats = [&](std::size_t n) {
    std::vector<float> v(n);
    for (float& x : v)
      x = static_cast<float>(uniform(rng));
    return v;
  };
  train::RunCheckpoint record;
  record.epoch = number();
  record.data_fingerprint = rng();
  record.test_fingerprint = rng();
  for (std::size_t m = 0; m < 3; ++m) {
    train::RunCheckpoint::Member member;
    member.settings = {{"gamma", uniform(rng)}, {"hidden", {number(), number()}}, {"seed", m}};
    // Every field of the member's state and metrics a value of its own (an infinity and a
    // NaN among them: a record keeps a double's bits).
    auto fill = [&](const char*, auto& field) {
      if constexpr (std::is_floating_point<std::decay_t<decltype(field)>>::value) {
        field = uniform(rng);
      } else {
        field = number();
      }
    };
    train::for_each_field(member.state, fill);
    member.best_parameters = floats(17 + m);
    eval::for_each_field(member.best_metrics, fill);
    member.best_metrics.profit_factor = std::numeric_limits<double>::infinity();
    member.best_metrics.calmar = std::numeric_limits<double>::quiet_NaN();
    if (m != 1)
      member.last_parameters = floats(17 + m);
    member.metrics = "{\"epoch\":" + std::to_string(number()) + "}\n";
    member.timings = "{\"train_seconds\":" + std::to_string(uniform(rng)) + "}\n";
    record.members.push_back(member);
  }
  std::vector<io::Section> sections = {{"trainer_state", "kept apart"}};
  record.append_to(sections);
  const std::string path = (m_dir / "record.dqnckpt").string();
  io::write_sections(path, train::kCheckpointFormat, sections);
  const train::RunCheckpoint back = train::RunCheckpoint::read(io::read_sections(path), path);
  EXPECT_EQ(back.epoch, record.epoch);
  EXPECT_EQ(back.data_fingerprint, record.data_fingerprint);
  EXPECT_EQ(back.test_fingerprint, record.test_fingerprint);
  ASSERT_EQ(back.members.size(), record.members.size());
  for (std::size_t m = 0; m < record.members.size(); ++m) {
    const auto& a = record.members[m];
    const auto& b = back.members[m];
    EXPECT_EQ(b.settings, a.settings);
    // Field by field, by their bits.
    auto bits = [](const auto& record) {
      std::vector<std::pair<std::string, std::uint64_t>> out;
      for_each_field(record, [&out](const char* name, auto value) {
        std::uint64_t b = 0;
        std::memcpy(&b, &value, sizeof value);
        out.push_back({name, b});
      });
      return out;
    };
    EXPECT_EQ(bits(b.state), bits(a.state)) << "member " << m;
    EXPECT_EQ(bits(b.state).size() * 8, sizeof(train::MemberState));  // every field listed
    EXPECT_EQ(b.best_parameters, a.best_parameters);
    EXPECT_EQ(bits(b.best_metrics), bits(a.best_metrics)) << "member " << m;
    EXPECT_EQ(bits(b.best_metrics).size() * 8, sizeof(eval::WindowMetrics));
    EXPECT_EQ(b.last_parameters, a.last_parameters);
    EXPECT_EQ(b.metrics, a.metrics);
    EXPECT_EQ(b.timings, a.timings);
  }
  // As a checkpoint from before the test window's fingerprint was recorded.
  sections.erase(std::remove_if(sections.begin(), sections.end(),
                                [](const io::Section& s) { return s.name == "test_fingerprint"; }),
                 sections.end());
  EXPECT_FALSE(train::RunCheckpoint::read(sections, path).test_fingerprint.has_value());
  // A section missing is named.
  sections.erase(std::remove_if(sections.begin(), sections.end(),
                                [](const io::Section& s) { return s.name == "run/2"; }),
                 sections.end());
  try {
    train::RunCheckpoint::read(sections, path);
    ADD_FAILURE() << "a record without run/2 was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("run/2"), std::string::npos) << e.what();
  }
}

// A checkpoint's file read back byte by byte as io/checkpoint_file.hpp's layout says (magic,
// format, count; per section its name's length, name, size, XXH64, bytes; the XXH64 of all before),
// for sections of every size around the one from which write_sections writes a section from
// where it lies rather than gathered with the headers.
TEST_F(Reliability, ACheckpointFileHoldsItsSectionsInTheDocumentedLayout) {
  std::mt19937_64 rng(testing::test_seed());
  std::vector<io::Section> sections;
  for (const std::size_t size :
       {std::size_t{0}, std::size_t{1}, std::size_t{65535}, std::size_t{65536}, std::size_t{65537},
        std::size_t{7}, std::size_t{300000}, std::size_t{300000}, std::size_t{3}}) {
    io::Section s{"section/" + std::to_string(sections.size()), std::string(size, '\0')};
    for (char& c : s.bytes)
      c = static_cast<char>(rng());
    sections.push_back(std::move(s));
  }
  const std::string path = (m_dir / "layout.dqnckpt").string();
  io::write_sections(path, 77, sections);
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::size_t at = 0;
  auto take = [&](std::size_t n) {
    EXPECT_LE(at + n, file.size());
    const std::string piece = file.substr(at, n);
    at += n;
    return piece;
  };
  auto number = [&](std::size_t n) {
    std::uint64_t v = 0;
    const std::string bytes = take(n);
    for (std::size_t i = 0; i < n; ++i)
      v |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
    return v;
  };
  EXPECT_EQ(take(8), std::string("DQNCKPT\0", 8));
  EXPECT_EQ(number(4), 77u);
  ASSERT_EQ(number(4), sections.size());
  for (const io::Section& s : sections) {
    EXPECT_EQ(take(number(2)), s.name);
    ASSERT_EQ(number(8), s.bytes.size()) << s.name;
    EXPECT_EQ(number(8), hash64(s.bytes.data(), s.bytes.size())) << s.name;
    EXPECT_TRUE(take(s.bytes.size()) == s.bytes) << s.name;
  }
  const std::size_t body = at;
  EXPECT_EQ(number(8), hash64(file.data(), body));
  EXPECT_EQ(at, file.size());
  EXPECT_EQ(io::read_sections(path).size(), sections.size());
}

// Checkpoints' snapshots reuse the pool's pinned buffers: a third snapshot taken while two hold
// the pool's two buffers waits until one goes back, and then gets that one's memory.
TEST_F(Reliability, SnapshotsReuseThePoolsBuffersAndWaitForOneToComeBack) {
  io::SnapshotPool pool(2);
  auto first = std::make_unique<io::Snapshot>(pool);
  io::Snapshot second(pool);
  char* const first_bytes = first->reserve(1000);
  second.reserve(1000);
  std::atomic<bool> given_back{false};
  std::atomic<bool> taken_after_given_back{false};
  char* third_bytes = nullptr;
  std::thread third([&] {
    io::Snapshot snapshot(pool);
    third_bytes = snapshot.reserve(800);
    taken_after_given_back = given_back.load();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  given_back = true;
  first.reset();
  third.join();
  EXPECT_TRUE(taken_after_given_back) << "the third snapshot did not wait for a buffer";
  EXPECT_EQ(third_bytes, first_bytes) << "the buffer that came back was not reused";
}

// --- determinism and exact resume -------------------------------------------------------

TEST_F(Reliability, TheSameSeedGivesTheSameMetrics) {
  run(small("a", 3));
  run(small("b", 3));
  const std::string a = slurp(m_dir / "a" / "metrics.jsonl");
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, slurp(m_dir / "b" / "metrics.jsonl"));
  EXPECT_EQ(slurp(m_dir / "a" / "last.dqnpolicy"), slurp(m_dir / "b" / "last.dqnpolicy"));
}

// A run of 2 epochs extended to 4 equals a run of 4: with a constant learning rate (a
// schedule spans the run's planned steps, so extending a scheduled run changes its later
// rates; an interrupted run resumed with its own settings is bitwise the same whatever its
// schedule: test_sweep.cpp kills and resumes populations on the default cosine).
TEST_F(Reliability, AResumedRunEqualsAStraightOneBitwise) {
  const auto constant = [&](const std::string& name, std::size_t epochs) {
    train::TrainConfig c = small(name, epochs);
    c.lr_schedule = "constant";
    return c;
  };
  run(constant("straight", 4));
  run(constant("halves", 2));
  train::ResumeOptions resume;
  resume.resume = true;
  run(constant("halves", 4), resume);
  EXPECT_EQ(slurp(m_dir / "straight" / "metrics.jsonl"), slurp(m_dir / "halves" / "metrics.jsonl"));
  EXPECT_EQ(slurp(m_dir / "straight" / "last.dqnpolicy"),
            slurp(m_dir / "halves" / "last.dqnpolicy"));
  EXPECT_EQ(slurp(m_dir / "straight" / "final_metrics.json"),
            slurp(m_dir / "halves" / "final_metrics.json"));
  // The whole learner state after the last epoch: weights, Adam, replay, environments, counters.
  const auto a = io::read_sections((m_dir / "straight" / "checkpoint-4.dqnckpt").string());
  const auto b = io::read_sections((m_dir / "halves" / "checkpoint-4.dqnckpt").string());
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    if (a[i].name == "timings.jsonl/0")
      continue;  // wall-clock seconds: the one thing that differs
    EXPECT_EQ(a[i].bytes, b[i].bytes) << "section " << a[i].name;
  }
}

TEST_F(Reliability, ResumeRefusesOtherSettingsUnlessForcedAndSkipsACorruptCheckpoint) {
  run(small("run", 2));
  train::ResumeOptions resume;
  resume.resume = true;
  train::TrainConfig changed = small("run", 3);
  changed.gamma = 0.5;
  try {
    run(changed, resume);
    FAIL() << "resumed with another gamma";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("gamma: checkpoint 0.9, now 0.5"), std::string::npos)
        << e.what();
  }
  resume.force = true;
  EXPECT_EQ(run(changed, resume).epochs, 3u);
  // A corrupted newest checkpoint: the one before it serves.
  std::string bytes = slurp(m_dir / "run" / "checkpoint-3.dqnckpt");
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x40);
  std::ofstream(m_dir / "run" / "checkpoint-3.dqnckpt", std::ios::binary) << bytes;
  std::ostringstream log;
  train::run_training(m_stream.space(), small("run", 3), log, train::ResumeOptions{true, true});
  EXPECT_NE(log.str().find("skipping"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("resuming after epoch 2"), std::string::npos) << log.str();
}

// --- kill anywhere --------------------------------------------------------------------------

// A hundred training runs killed with SIGKILL (seeded), each at a moment chosen by the run's
// own progress, so that what the test proves does not depend on the machine's speed: sixty
// stop themselves (tests/tools/failing_io.c) at a chosen file-system call of a checkpoint
// write after the first (its opening, its one write, its flush or its rename) and are killed
// there; forty are killed at a random delay after their first checkpoint. Afterwards every
// checkpoint in the directory verifies, and every kill inside a write left only its temporary
// file behind.
TEST_F(Reliability, KilledAtRandomMomentsNeverLeavesACorruptCheckpoint) {
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE(testing::seed_note(seed));
  std::mt19937_64 rng(seed);
  const std::string out = (m_dir / "killed").string();
  const std::string arguments =
      "train --synth-bars 2500 --epochs 1000 --steps-per-epoch 5 --learning-starts 128 "
      "--hidden 8 --replay-capacity 2048 --probe-interval 0 --out " +
      out;
  // environment: "NAME=value ..." for the child.
  const auto spawn = [&](const std::string& environment) {
    return testing::spawn_quiet("exec env " + environment + " " + std::string(DQNTRADER_CLI_PATH) +
                                " " + arguments);
  };
  using clock = std::chrono::steady_clock;
  // A safety net for a broken run, never a measurement: a child that neither stops nor writes
  // its first checkpoint within a minute fails the test.
  const auto deadline = [] { return clock::now() + std::chrono::seconds(60); };
  const char* const ops[] = {"open", "write", "fsync", "rename"};
  std::size_t verified = 0, kills = 0, inside_writes = 0, temporaries_left = 0;
  for (int trial = 0; trial < 100; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const bool stops = trial < 60;
    // Call 0 of each kind belongs to checkpoint-1, so a stop at call 1 or later comes after
    // a whole checkpoint; checkpoints (checkpoint-E, best) match ".dqnckpt".
    const char* op = ops[trial % 4];
    const std::uint64_t after = 1 + rng() % 6;
    const std::string environment =
        stops ? std::string("LD_PRELOAD=") + DQNTRADER_FAILING_IO +
                    " ASAN_OPTIONS=verify_asan_link_order=0 DQNTRADER_STOP_PATH=.dqnckpt"
                    " DQNTRADER_STOP_OP=" +
                    op + " DQNTRADER_STOP_AFTER=" + std::to_string(after)
              : std::string();
    const pid_t child = spawn(environment);
    ASSERT_GE(child, 0);
    int status = 0;
    if (stops) {
      const auto until = deadline();
      pid_t waited = 0;
      while ((waited = waitpid(child, &status, WUNTRACED | WNOHANG)) == 0 && clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      if (waited == 0)
        kill(child, SIGKILL);
      ASSERT_TRUE(waited == child && WIFSTOPPED(status))
          << op << " call " << after << ": the run did not stop there";
    } else {
      const auto until = deadline();
      while (train::checkpoint_paths(out).empty() && clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300000));
    }
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    kills += WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL ? 1 : 0;
    std::size_t temporaries = 0;
    for (const auto& entry : fs::directory_iterator(out)) {
      if (entry.path().filename().string().find(".dqnckpt.tmp-") != std::string::npos)
        ++temporaries;
    }
    if (stops) {
      // Killed between creating the temporary file and renaming it over the checkpoint (or,
      // at an open, just before creating it).
      const bool inside = std::string(op) != "open";
      inside_writes += inside ? 1 : 0;
      EXPECT_EQ(temporaries, inside ? 1u : 0u) << op << " call " << after;
    }
    temporaries_left += temporaries;
    const std::vector<std::string> checkpoints = train::checkpoint_paths(out);
    EXPECT_FALSE(checkpoints.empty()) << "the first checkpoint was complete before the kill";
    for (const std::string& path : checkpoints) {
      EXPECT_NO_THROW(io::read_sections(path)) << path;
      ++verified;
    }
    fs::remove_all(out);
  }
  RecordProperty("kills", std::to_string(kills));
  RecordProperty("kills_inside_checkpoint_writes", std::to_string(inside_writes));
  RecordProperty("temporaries_left", std::to_string(temporaries_left));
  RecordProperty("checkpoints_verified", std::to_string(verified));
  EXPECT_GT(kills, 90u) << "most runs were still going when killed";
  EXPECT_GT(verified, 50u) << "the kills land after checkpoints were written";
}

// --- write failures ---------------------------------------------------------------------------

struct WriteFailure {
  const char* op;
  const char* error;
  const char* reason;  // in the message
};

class FailingWrites : public Reliability, public ::testing::WithParamInterface<WriteFailure> {};

TEST_P(FailingWrites, AreReportedAndLeaveThePreviousCheckpointIntact) {
  const WriteFailure& f = GetParam();
  const std::string out = (m_dir / "run").string();
  const std::string environment =
      std::string("LD_PRELOAD=") + DQNTRADER_FAILING_IO +
      " ASAN_OPTIONS=verify_asan_link_order=0 DQNTRADER_FAIL_PATH=checkpoint-2"
      " DQNTRADER_FAIL_OP=" +
      f.op + " DQNTRADER_FAIL_ERRNO=" + f.error;
  const int code = cli(
      "train --synth-bars 2500 --epochs 3 --steps-per-epoch 10 --learning-starts 128 --hidden 8 "
      "--replay-capacity 2048 --out " +
          out,
      environment);
  EXPECT_EQ(code, 1) << err();
  EXPECT_NE(err().find("checkpoint-2"), std::string::npos) << err();
  EXPECT_NE(err().find(f.reason), std::string::npos) << err();
  EXPECT_FALSE(fs::exists(out + "/checkpoint-2.dqnckpt"));
  EXPECT_FALSE(fs::exists(out + "/checkpoint-3.dqnckpt"));
  EXPECT_NO_THROW(io::read_sections(out + "/checkpoint-1.dqnckpt"));
  for (const auto& entry : fs::directory_iterator(out)) {
    EXPECT_EQ(entry.path().string().find(".tmp-"), std::string::npos)
        << "left behind: " << entry.path();
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, FailingWrites,
                         ::testing::Values(WriteFailure{"open", "EROFS", "Read-only file system"},
                                           WriteFailure{"write", "ENOSPC",
                                                        "No space left on device"},
                                           WriteFailure{"fsync", "EIO", "Input/output error"}),
                         [](const auto& info) { return std::string(info.param.op); });

// --- bad input -------------------------------------------------------------------------------

// Every malformed file of the corpus, and broken caches, through the command: exit code 2, a
// message that names the file (and the line and column in a CSV), and no output file. (A file
// of several instruments is bad where one is read, as train reads: backtest reads each.)
TEST_F(Reliability, EveryBadInputIsRejectedWithItsLocationAndNothingWritten) {
  std::size_t tried = 0;
  const std::string json = (m_dir / "metrics.json").string();
  for (const testing::BadCase& c : testing::bad_csv_corpus()) {
    const std::string path = (m_dir / (std::string(c.name) + ".csv")).string();
    std::ofstream(path, std::ios::binary) << c.content;
    const bool several = std::string(c.name) == "several_symbols_none_chosen";
    const std::string run = (m_dir / "run").string();
    EXPECT_EQ(cli(several ? "train --data " + path + " --out " + run
                          : "backtest --data " + path + " --policy flat --json " + json),
              2)
        << c.name;
    EXPECT_FALSE(fs::exists(run + "/config.json")) << c.name;
    const std::string where =
        path + ":" + std::to_string(c.line) + ":" + std::to_string(c.column) + ": ";
    EXPECT_NE(err().find(where), std::string::npos) << c.name << ": " << err();
    EXPECT_NE(err().find(c.message), std::string::npos) << c.name << ": " << err();
    EXPECT_FALSE(fs::exists(json)) << c.name;
    ++tried;
  }
  ASSERT_EQ(cli("synth --bars 500 --out " + (m_dir / "good.dqnbars").string()), 0);
  const std::string good = slurp(m_dir / "good.dqnbars");
  std::string flipped = good;
  flipped[good.size() / 2] = static_cast<char>(flipped[good.size() / 2] ^ 1);
  const std::pair<const char*, std::string> caches[] = {
      {"truncated", good.substr(0, good.size() - 100)},
      {"corrupted", flipped},
      {"foreign", "not a cache at all"}};
  for (const auto& [name, bytes] : caches) {
    const std::string path = (m_dir / (std::string(name) + ".dqnbars")).string();
    std::ofstream(path, std::ios::binary) << bytes;
    EXPECT_EQ(cli("backtest --data " + path + " --policy flat --json " + json), 2) << name;
    EXPECT_NE(err().find(path + ": "), std::string::npos) << name << ": " << err();
    EXPECT_FALSE(fs::exists(json)) << name;
    ++tried;
  }
  for (const auto& entry : fs::directory_iterator(m_dir)) {
    EXPECT_EQ(entry.path().string().find(".tmp-"), std::string::npos)
        << "left behind: " << entry.path();
  }
  RecordProperty("bad_inputs", std::to_string(tried));
  EXPECT_GE(tried, 20u);
}

// --- numerical faults -------------------------------------------------------------------------

using testing::jsonl_records;

TEST_F(Reliability, InjectedNanIsSkippedOrRestoredAndCounted) {
  for (const char* kind : {"batch", "gradient", "weight"}) {
    SCOPED_TRACE(kind);
    train::TrainConfig c = small(kind, 3);
    c.inject_fault = std::string(kind) + "@2";
    run(c);
    const auto r = jsonl_records(m_dir / kind / "metrics.jsonl");
    ASSERT_EQ(r.size(), 3u);
    EXPECT_EQ(r[0]["skipped_steps"].get<long>() + r[0]["guard_restores"].get<long>(), 0);
    EXPECT_GE(r[1]["skipped_steps"].get<long>() + r[1]["guard_restores"].get<long>(), 1)
        << r[1].dump();
    EXPECT_FALSE(r[2]["loss"].is_null()) << "training went on with finite numbers";
    const eval::PolicyFile last = eval::read_policy((m_dir / kind / "last.dqnpolicy").string());
    for (float p : last.parameters)
      ASSERT_TRUE(std::isfinite(p));
  }
}

TEST_F(Reliability, PersistentFaultsStopTheRunWithADiagnostic) {
  train::TrainConfig c = small("price", 4);
  c.inject_fault = "price@2";
  c.fault_budget = 5;
  EXPECT_THROW(run(c), Error);
  const fs::path report = m_dir / "price" / "fault_report.json";
  ASSERT_TRUE(fs::exists(report));
  const nlohmann::json j = testing::json_file(report);
  EXPECT_EQ(j["epoch"], 2);
  EXPECT_GE(j["consecutive_faults"].get<long>(), 5);
  EXPECT_TRUE(fs::exists(m_dir / "price" / "checkpoint-1.dqnckpt"));
  EXPECT_FALSE(fs::exists(m_dir / "price" / "checkpoint-2.dqnckpt"));
  // The command exits non-zero.
  EXPECT_EQ(cli("train --synth-bars 3000 --epochs 3 --steps-per-epoch 40 --learning-starts 256 "
                "--hidden 16 "
                "--inject-fault price@2 --fault-budget 5 --out " +
                (m_dir / "cli").string()),
            1);
}

// A member none of whose gradient steps was finite (a learning rate of 1e308) failed: it did
// not finish, whatever its fault budget.
TEST_F(Reliability, ARunThatNeverTookAFiniteStepFails) {
  train::TrainConfig c = small("overflow", 2);
  c.learning_rate = 1e308;
  c.fault_budget = 100000;
  try {
    run(c);
    ADD_FAILURE() << "a run that learned nothing finished";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gradient steps was skipped"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(m_dir / "overflow" / "final_metrics.json"));
}

}  // namespace
}  // namespace dqntrader

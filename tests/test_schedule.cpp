// A sweep's schedules (sweep/schedule.hpp). An exploit copies exactly what it says and nothing
// else; a PBT sweep equals a reference written here from the documented rule (the trainer
// driven epoch by epoch, its state copied and its settings changed on the host through
// state() and restore(), with the same draws), also when it was interrupted between two
// decisions and resumed; successive halving stops the bottom half at every rung and leaves
// the survivors' runs as they were without it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backends/execution.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/core/random.hpp"
#include "dqntrader/data/synthetic.hpp"
#include "dqntrader/io/checkpoint_file.hpp"
#include "dqntrader/io/json_values.hpp"
#include "dqntrader/nn/adam.hpp"
#include "dqntrader/sweep/sweep_plan.hpp"
#include "dqntrader/train/dqn_trainer.hpp"
#include "dqntrader/train/run_checkpoint.hpp"
#include "dqntrader/train/training_run.hpp"
#include "test_support.hpp"

namespace dqntrader {
namespace {

namespace fs = std::filesystem;

using testing::json_file;
using testing::jsonl_records;
using testing::slurp;

const io::Section& section(const std::vector<io::Section>& sections, const std::string& name) {
  return io::find_section(sections, name, "test");
}

// Member m's values of a section of k members' vectors a stride apart (the stride: the online
// networks' section, which holds k whole strides; the others end at the last one's values).
std::size_t stride_bytes(const std::vector<io::Section>& sections, std::size_t k) {
  return io::find_section(sections, "online", "test").bytes.size() / k;
}
std::string slice(const io::Section& s, std::size_t m, std::size_t k, std::size_t stride) {
  const std::size_t size = s.bytes.size() - (k - 1) * stride;
  return s.bytes.substr(m * stride, size);
}

// The sections of the learner's state that an exploit copies, a member after another.
const char* const kCopied[] = {"online",       "target",       "adam_m",  "adam_v",
                               "guard_online", "guard_target", "guard_m", "guard_v"};

class Schedule : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir =
        fs::temp_directory_path() / ("dqntrader-schedule-" + std::to_string(testing::test_seed()));
    fs::create_directories(m_dir);
    ASSERT_EQ(run("synth --bars 3000 --seed 4 --out " + path("bars.dqnbars")), 0);
  }
  void TearDown() override { fs::remove_all(m_dir); }

  std::string path(const std::string& name) const { return (m_dir / name).string(); }

  // The command, with this process's host threads (a sum over threads may round otherwise,
  // and the reference runs here).
  static std::string cli() {
#if defined(DQNTRADER_BACKEND_OPENMP)
    return std::string(DQNTRADER_CLI_PATH) + " --threads " +
           std::to_string(ExecSpace().concurrency());
#else
    return DQNTRADER_CLI_PATH;
#endif
  }

  int run(const std::string& arguments) const {
    const std::string command = cli() + " " + arguments + " >/dev/null 2>" + path("stderr.txt");
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // Eight members (two random draws of a range and a list, four seeds) in one population.
  std::string pbt(const std::string& out, std::size_t epochs, std::size_t interval) const {
    return "sweep --data " + path("bars.dqnbars") + " --out " + path(out) + " --epochs " +
           std::to_string(epochs) +
           " --steps-per-epoch 40 --learning-starts 256 --environments 16 --batch-size 32 "
           "--replay-capacity 4096 --probe-batch 32 --seeds 1-4 --random 2 --random-seed 7 "
           "--set learning-rate=1e-4:1e-2:log --set gamma=0.8,0.9,0.95 --population 8 "
           "--schedule pbt --pbt-fraction 0.25 --pbt-resample 0.3 --pbt-interval " +
           std::to_string(interval);
  }

  fs::path m_dir;
  exec::StreamSpace m_stream;
};

// --- the exploit -------------------------------------------------------------------------------

// After one epoch member 2 copies member 0: its networks, Adam's moments and the guard's
// snapshot equal member 0's bitwise, Adam's position in the schedule and bias correction too
// (its counts of skipped steps stay its own); its replay ring, environments and every other
// member are untouched. Then set_member gives it member 0's settings of learning.
// Three small members that differ in their settings of learning.
std::vector<train::TrainConfig> three_members(const std::string& data) {
  std::vector<train::TrainConfig> members(3);
  for (std::size_t m = 0; m < members.size(); ++m) {
    train::TrainConfig& c = members[m];
    c.data = data;
    c.hidden = {16, 16};
    c.steps_per_epoch = 40;
    c.learning_starts = 256;
    c.environments = 16;
    c.batch_size = 32;
    c.replay_capacity = 4096;
    c.probe_batch = 32;
    c.test_fraction = 0;
    c.seed = m + 1;
    c.learning_rate = 1e-4 * static_cast<double>(m + 1);
    c.gamma = 0.8 + 0.05 * static_cast<double>(m);
  }
  return members;
}

TEST_F(Schedule, AnExploitCopiesExactlyTheLearnerAndNothingElse) {
  const std::vector<train::TrainConfig> members = three_members(path("bars.dqnbars"));
  const train::RunData data = train::load_run_data(members[0]);
  train::DqnTrainer trainer(m_stream.space(), members, data.bars);
  trainer.run_epoch();
  const std::vector<io::Section> before = trainer.state();
  trainer.copy_members({{2, 0}});
  const std::vector<io::Section> after = trainer.state();
  ASSERT_EQ(before.size(), after.size());
  const std::size_t stride = stride_bytes(before, 3);
  for (const char* name : kCopied) {
    SCOPED_TRACE(name);
    const io::Section &b = section(before, name), &a = section(after, name);
    ASSERT_EQ(a.bytes.size(), b.bytes.size());
    EXPECT_TRUE(slice(a, 2, 3, stride) == slice(b, 0, 3, stride));
    EXPECT_TRUE(slice(a, 0, 3, stride) == slice(b, 0, 3, stride));
    EXPECT_TRUE(slice(a, 1, 3, stride) == slice(b, 1, 3, stride));
    EXPECT_TRUE(slice(b, 2, 3, stride) != slice(b, 0, 3, stride))
        << "the members had learned differently";
  }
  const auto counters = [](const std::vector<io::Section>& s, std::size_t m) {
    nn::AdamCounters c;
    std::memcpy(&c, section(s, "adam_counters").bytes.data() + m * sizeof c, sizeof c);
    return c;
  };
  EXPECT_EQ(counters(after, 2).calls, counters(before, 0).calls);
  EXPECT_EQ(counters(after, 2).applied, counters(before, 0).applied);
  EXPECT_EQ(counters(after, 2).beta1_power, counters(before, 0).beta1_power);
  EXPECT_EQ(counters(after, 2).beta2_power, counters(before, 0).beta2_power);
  EXPECT_EQ(counters(after, 2).skipped, counters(before, 2).skipped);
  EXPECT_EQ(section(after, "adam_counters").bytes.substr(0, 2 * sizeof(nn::AdamCounters)),
            section(before, "adam_counters").bytes.substr(0, 2 * sizeof(nn::AdamCounters)));
  // Everything else, the replay rings and environments included, is as it was.
  for (const io::Section& b : before) {
    const bool copied = std::find_if(std::begin(kCopied), std::end(kCopied), [&](const char* name) {
                          return b.name == name;
                        }) != std::end(kCopied);
    if (!copied && b.name != "adam_counters") {
      EXPECT_TRUE(section(after, b.name).bytes == b.bytes) << b.name;
    }
  }
  // The settings: member 0's of learning, member 2's own seed.
  train::TrainConfig settings = trainer.member(2);
  train::apply_settings(settings, train::member_settings_json(trainer.member(0)), "test");
  trainer.set_member(2, settings);
  EXPECT_EQ(train::member_settings_json(trainer.member(2)),
            train::member_settings_json(trainer.member(0)));
  EXPECT_EQ(trainer.member(2).seed, 3u);
  EXPECT_EQ(trainer.member(1).learning_rate, 2e-4);
  // A seed cannot change, nor an n-step beyond the replay's windows.
  train::TrainConfig reseeded = trainer.member(1);
  reseeded.seed = 9;
  EXPECT_THROW(trainer.set_member(1, reseeded), InputError);
  train::TrainConfig longer = trainer.member(1);
  longer.n_step = 2;
  EXPECT_THROW(trainer.set_member(1, longer), InputError);
  EXPECT_THROW(trainer.copy_members({{1, 0}, {0, 2}}), Error);
}

// --- freeing stopped members' slots ----------------------------------------------------------

#if defined(DQNTRADER_BACKEND_OPENMP)

// Member 1 stops after an epoch and its slot is freed: the population holds two slots, member
// 1 has no parameters and a NaN report, and members 0 and 2 go on bitwise as in a population
// that kept the slot; the compacted state, restored into a new trainer, goes on the same.
TEST_F(Schedule, AStoppedMembersSlotIsFreedAndTheOthersGoOnAsTheyWould) {
  const std::vector<train::TrainConfig> members = three_members(path("bars.dqnbars"));
  const train::RunData data = train::load_run_data(members[0]);
  train::DqnTrainer kept(m_stream.space(), members, data.bars);
  train::DqnTrainer freed(m_stream.space(), members, data.bars);
  for (train::DqnTrainer* t : {&kept, &freed}) {
    t->run_epoch();
    t->stop(1);
  }
  freed.compact();
  EXPECT_EQ(freed.slots(), 2u);
  EXPECT_EQ(kept.slots(), 3u);
  EXPECT_THROW(freed.parameters(1), Error);
  const std::vector<io::Section> saved = freed.state();
  std::vector<train::EpochReport> a, b;
  for (int epoch = 0; epoch < 2; ++epoch) {
    a = kept.run_epoch();
    b = freed.run_epoch();
  }
  EXPECT_TRUE(std::isnan(b[1].validation_sharpe));
  for (const std::size_t m : {0u, 2u}) {
    EXPECT_EQ(b[m].validation_sharpe, a[m].validation_sharpe) << m;
    EXPECT_EQ(b[m].loss, a[m].loss) << m;
    EXPECT_EQ(freed.parameters(m), kept.parameters(m)) << m;
  }
  train::DqnTrainer resumed(m_stream.space(), members, data.bars);
  resumed.restore(saved, "the compacted state");
  EXPECT_EQ(resumed.slots(), 2u);
  std::vector<train::EpochReport> c;
  for (int epoch = 0; epoch < 2; ++epoch)
    c = resumed.run_epoch();
  for (const std::size_t m : {0u, 2u})
    EXPECT_EQ(resumed.parameters(m), freed.parameters(m)) << m;
  EXPECT_EQ(c[2].validation_sharpe, b[2].validation_sharpe);
}

#endif

// --- PBT against a reference -------------------------------------------------------------------

// The rule of sweep/schedule.hpp, written again: the population's trainer epoch by epoch; at
// each decision the running members ranked, each of the bottom q copying a top member drawn
// with the documented stream, its state copied section by section on the host and its
// settings perturbed or drawn afresh; the trainer restored from the result. Each epoch's
// validation Sharpe must equal the sweep's record, each copy the sweep's lineage, and the last
// state the sweep's last checkpoint.
void expect_reference(const fs::path& directory, std::size_t interval) {
  const sweep::SweepPlan plan = sweep::read_plan(directory.string());
  ASSERT_EQ(plan.populations.size(), 1u);
  const std::vector<std::size_t>& ids = plan.populations[0].members;
  const std::size_t k = ids.size();
  std::vector<train::TrainConfig> configs;
  for (const std::size_t id : ids)
    configs.push_back(sweep::member_config(plan, id));
  const std::size_t epochs = configs[0].epochs;
  const train::RunData data = train::load_run_data(configs[0]);
  exec::StreamSpace stream;
  train::DqnTrainer trainer(stream.space(), configs, data.bars);
  const double resample = plan.schedule.resample;
  ASSERT_EQ(plan.space.axes.size(), 2u);
  // Each member's values of the two axes now, as text.
  std::vector<std::map<std::string, std::string>> now(k);
  for (std::size_t m = 0; m < k; ++m) {
    for (const auto& [name, value] : plan.combinations[plan.members[ids[m]].combination].values)
      now[m][name] = value;
  }
  std::vector<nlohmann::json> lineage(k, nlohmann::json::array());
  std::vector<std::vector<nlohmann::json>> records(k);
  for (std::size_t m = 0; m < k; ++m)
    records[m] = jsonl_records(directory / plan.members[ids[m]].run / "metrics.jsonl");
  for (std::size_t epoch = 1; epoch <= epochs; ++epoch) {
    const std::vector<train::EpochReport> reports = trainer.run_epoch();
    for (std::size_t m = 0; m < k; ++m) {
      ASSERT_EQ(io::json_number(reports[m].validation_sharpe),
                records[m].at(epoch - 1)["validation_sharpe"])
          << "member " << m << ", epoch " << epoch;
    }
    if (epoch == epochs || epoch % interval != 0)
      continue;
    std::vector<std::size_t> order(k);
    for (std::size_t m = 0; m < k; ++m)
      order[m] = m;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      const double x = reports[a].validation_sharpe, y = reports[b].validation_sharpe;
      return x != y ? x > y : a < b;
    });
    const std::size_t q = k / 4;  // --pbt-fraction 0.25
    std::vector<std::size_t> bottom(order.end() - static_cast<std::ptrdiff_t>(q), order.end());
    std::sort(bottom.begin(), bottom.end());
    HostRng rng(counter_random(plan.schedule.seed, plan.populations[0].id, epoch));
    std::vector<io::Section> sections = trainer.state();
    nlohmann::json changed = nlohmann::json::parse(section(sections, "member_settings").bytes);
    for (const std::size_t to : bottom) {
      const std::size_t from = order[rng.below(q)];
      std::map<std::string, std::string> values = now[from];
      for (const sweep::Axis& axis : plan.space.axes) {
        std::string& v = values[axis.setting];
        if (rng.uniform() < resample) {
          if (axis.range) {
            const double u = rng.uniform();
            v = train::number_text(
                std::exp(std::log(axis.low) + u * (std::log(axis.high) - std::log(axis.low))));
          } else {
            v = axis.values[rng.below(axis.values.size())];
          }
          continue;
        }
        const bool up = rng.uniform() >= 0.5;
        if (axis.range) {
          v = train::number_text(std::clamp(std::stod(v) * (up ? 1.2 : 0.8), axis.low, axis.high));
        } else {
          const auto at = std::find(axis.values.begin(), axis.values.end(), v);
          std::size_t i = static_cast<std::size_t>(at - axis.values.begin());
          i = up ? std::min(i + 1, axis.values.size() - 1) : (i > 0 ? i - 1 : 0);
          v = axis.values[i];
        }
      }
      now[to] = values;
      const std::size_t stride = stride_bytes(sections, k);
      for (const char* name : kCopied) {
        io::Section& s = const_cast<io::Section&>(section(sections, name));
        const std::string values = slice(s, from, k, stride);
        s.bytes.replace(to * stride, values.size(), values);
      }
      io::Section& adam = const_cast<io::Section&>(section(sections, "adam_counters"));
      nn::AdamCounters source, target;
      std::memcpy(&source, adam.bytes.data() + from * sizeof source, sizeof source);
      std::memcpy(&target, adam.bytes.data() + to * sizeof target, sizeof target);
      target.calls = source.calls;
      target.applied = source.applied;
      target.beta1_power = source.beta1_power;
      target.beta2_power = source.beta2_power;
      std::memcpy(adam.bytes.data() + to * sizeof target, &target, sizeof target);
      train::TrainConfig settings = configs[to];
      train::apply_settings(settings, nlohmann::json(values), "test");
      changed[std::to_string(to)] = train::member_settings_json(settings);
      lineage[to].push_back(
          {{"epoch", epoch}, {"copied", plan.members[ids[from]].run}, {"settings", values}});
    }
    const_cast<io::Section&>(section(sections, "member_settings")).bytes = changed.dump();
    trainer.restore(sections, "the reference's state");
  }
  for (std::size_t m = 0; m < k; ++m) {
    EXPECT_EQ(plan.members[ids[m]].result.schedule, lineage[m]) << "member " << m;
    EXPECT_EQ(records[m].size(), epochs);
  }
  const std::vector<io::Section> last =
      io::read_sections((directory / plan.populations[0].checkpoints /
                         ("checkpoint-" + std::to_string(epochs) + ".dqnckpt"))
                            .string());
  for (const io::Section& s : trainer.state())
    EXPECT_TRUE(section(last, s.name).bytes == s.bytes) << s.name;
}

#if defined(DQNTRADER_BACKEND_OPENMP)

TEST_F(Schedule, APbtSweepEqualsItsReferenceBitwise) {
  ASSERT_EQ(run(pbt("pbt", 4, 1)), 0) << slurp(path("stderr.txt"));
  const nlohmann::json plan = json_file(m_dir / "pbt" / "sweep.json");
  std::size_t copies = 0;
  for (const auto& m : plan["members"])
    copies += m["result"].value("schedule", nlohmann::json::array()).size();
  EXPECT_EQ(copies, 6u) << "two copies at each of the three decisions";
  expect_reference(m_dir / "pbt", 1);

  // The report's table of the winner's settings follows its weights back through the copies:
  // at each epoch the member whose slot trained them and the settings it trained them with.
  ASSERT_EQ(run("report " + path("pbt")), 0) << slurp(path("stderr.txt"));
  const std::string html = slurp(m_dir / "pbt" / "report.html");
  EXPECT_NE(html.find("id=\"chart-lineage\""), std::string::npos);
  const nlohmann::json board = json_file(m_dir / "pbt" / "leaderboard.json");
  std::map<std::string, nlohmann::json> members;  // run -> its plan entry
  for (const auto& m : plan["members"])
    members[m["run"].get<std::string>()] = m;
  std::string at = board["members"][0]["run"].get<std::string>();
  std::vector<std::string> rows;
  for (std::size_t epoch = 4; epoch >= 1; --epoch) {
    const nlohmann::json& m = members.at(at);
    nlohmann::json settings = plan["combinations"][m["combination"].get<std::size_t>()];
    std::string copied;
    for (const auto& step : m["result"].value("schedule", nlohmann::json::array())) {
      const std::size_t e = step["epoch"].get<std::size_t>();
      if (e < epoch)
        settings = step["settings"];  // the schedule lists copies in epoch order
      if (e == epoch - 1)
        copied = step["copied"].get<std::string>();
    }
    rows.push_back("<tr><td class=\"value\">" + std::to_string(epoch) + "</td><td>" +
                   at.substr(at.rfind('/') + 1) + "</td><td>" +
                   settings["learning-rate"].get<std::string>() + "</td><td>" +
                   settings["gamma"].get<std::string>() + "</td></tr>");
    if (!copied.empty())
      at = copied;
  }
  const std::size_t table = html.find("<table id=\"winner-schedule\">");
  ASSERT_NE(table, std::string::npos);
  std::size_t from = table;
  for (auto row = rows.rbegin(); row != rows.rend(); ++row) {
    const std::size_t found = html.find(*row, from);
    EXPECT_NE(found, std::string::npos) << *row;
    from = found == std::string::npos ? from : found;
  }
}

// Killed after the checkpoint of epoch 3 (decisions at the ends of epochs 2 and 4), resumed:
// every file as in the sweep that ran straight through, and both equal the reference.
TEST_F(Schedule, APbtSweepResumedBetweenDecisionsEqualsOneRunStraight) {
  ASSERT_EQ(run(pbt("straight", 5, 2)), 0) << slurp(path("stderr.txt"));
  const pid_t child = testing::spawn_quiet(
      "exec env LD_PRELOAD=" + std::string(DQNTRADER_FAILING_IO) +
      " ASAN_OPTIONS=verify_asan_link_order=0 DQNTRADER_STOP_PATH=p-000/checkpoint-"
      " DQNTRADER_STOP_OP=rename DQNTRADER_STOP_AFTER=3 " +
      cli() + " " + pbt("killed", 5, 2));
  int status = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (waitpid(child, &status, WUNTRACED | WNOHANG) == 0 &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const bool stopped = WIFSTOPPED(status);
  kill(child, SIGKILL);
  waitpid(child, &status, 0);
  ASSERT_TRUE(stopped) << "the sweep did not stop where it was meant to";
  const std::vector<std::string> left = train::checkpoint_paths(path("killed/populations/p-000"));
  ASSERT_FALSE(left.empty());
  EXPECT_NE(left.front().find("checkpoint-3.dqnckpt"), std::string::npos) << left.front();
  ASSERT_EQ(run("sweep --resume " + path("killed")), 0) << slurp(path("stderr.txt"));
  const nlohmann::json plan = json_file(m_dir / "straight" / "sweep.json");
  for (const auto& m : plan["members"]) {
    const std::string run = m["run"].get<std::string>();
    for (const char* file :
         {"metrics.jsonl", "best.dqnpolicy", "last.dqnpolicy", "final_metrics.json"}) {
      EXPECT_EQ(slurp(m_dir / "killed" / run / file), slurp(m_dir / "straight" / run / file))
          << run << "/" << file;
    }
  }
  EXPECT_EQ(json_file(m_dir / "killed" / "leaderboard.json"),
            json_file(m_dir / "straight" / "leaderboard.json"));
  expect_reference(m_dir / "killed", 2);
}

#endif

// --- successive halving ------------------------------------------------------------------------

// Eight members, a rung at the end of every epoch but the last: 8 -> 4 -> 2 -> 1. The members
// each rung stops are the bottom half of the running ones by the epoch's validation Sharpe
// of the same sweep without a schedule, and every member's records up to its stop equal that
// sweep's.
TEST_F(Schedule, HalvingStopsTheBottomHalfAndLeavesTheRestAsTheyWere) {
  const std::string sweep = " --data " + path("bars.dqnbars") +
                            " --epochs 4 --steps-per-epoch 40 --learning-starts 256 "
                            "--environments 16 --batch-size 32 --replay-capacity 4096 "
                            "--probe-batch 32 --seeds 1-4 --set learning-rate=1e-4,1e-3 "
                            "--population 8";
  ASSERT_EQ(run("sweep --out " + path("all") + sweep), 0) << slurp(path("stderr.txt"));
  ASSERT_EQ(run("sweep --out " + path("halved") + sweep + " --schedule halving"), 0)
      << slurp(path("stderr.txt"));
  const nlohmann::json plan = json_file(m_dir / "all" / "sweep.json");
  std::vector<std::string> runs;
  for (const auto& m : plan["members"])
    runs.push_back(m["run"].get<std::string>());
  std::vector<std::vector<nlohmann::json>> full;
  for (const std::string& r : runs)
    full.push_back(jsonl_records(m_dir / "all" / r / "metrics.jsonl"));
  std::vector<bool> running(runs.size(), true);
  std::size_t left = runs.size();
  for (std::size_t epoch = 1; epoch <= 4; ++epoch) {
    std::vector<std::size_t> order;
    for (std::size_t m = 0; m < runs.size(); ++m) {
      if (!running[m])
        continue;
      order.push_back(m);
      const auto halved = jsonl_records(m_dir / "halved" / runs[m] / "metrics.jsonl");
      ASSERT_GE(halved.size(), epoch) << runs[m];
      nlohmann::json record = halved[epoch - 1];
      record.erase("schedule");
      EXPECT_EQ(record, full[m][epoch - 1]) << runs[m] << ", epoch " << epoch;
    }
    if (epoch == 4)
      break;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      const double x = full[a][epoch - 1]["validation_sharpe"].get<double>(),
                   y = full[b][epoch - 1]["validation_sharpe"].get<double>();
      return x != y ? x > y : a < b;
    });
    for (std::size_t i = (left + 1) / 2; i < order.size(); ++i) {
      const std::size_t m = order[i];
      running[m] = false;
      const auto halved = jsonl_records(m_dir / "halved" / runs[m] / "metrics.jsonl");
      EXPECT_EQ(halved.size(), epoch) << runs[m] << " stopped at the rung of epoch " << epoch;
      EXPECT_EQ(halved.back()["schedule"], (nlohmann::json{{"stopped", "halving"}})) << runs[m];
    }
    left = (left + 1) / 2;
  }
  const nlohmann::json halved = json_file(m_dir / "halved" / "sweep.json");
  std::size_t finished = 0;
  for (const auto& m : halved["members"])
    finished += m["result"]["status"] == "finished" ? 1 : 0;
  EXPECT_EQ(finished, 1u);
}

// Bad schedules exit 2 and leave no sweep behind.
TEST_F(Schedule, BadSchedulesAreRefusedNamingTheFlag) {
  const std::string sweep = "sweep --data " + path("bars.dqnbars") +
                            " --epochs 2 --seeds 1-2 --set learning-rate=1e-4,1e-3 --out ";
  for (const char* bad :
       {" --schedule evolve", " --schedule pbt --pbt-fraction 0.6", " --pbt-interval 2",
        " --schedule pbt --pbt-perturb 1.2,0.8", " --schedule pbt --pbt-perturb 0.8",
        " --schedule halving --halving-rate 1", " --schedule pbt --pbt-resample 2",
        " --schedule halving --pbt-burn-in 1", " --schedule pbt --population 1"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(run(sweep + path("bad") + bad), 2);
    EXPECT_FALSE(fs::exists(m_dir / "bad")) << slurp(path("stderr.txt"));
  }
}

}  // namespace
}  // namespace dqntrader

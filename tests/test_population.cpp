// Populations: K members trained as one loop are K agents trained alone. On OpenMP member i of
// a population writes bitwise the same metrics.jsonl, policies and final metrics as a run of
// member i's settings by itself, with members that differ in every setting a member may have
// of its own; faults, early stopping and a fault budget touch only their member; a resumed
// population equals one that ran straight through. On CUDA the batched products may take
// other algorithms for other batch counts, so the members' learning is compared within the
// rounding of its precision instead.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backends/execution.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/data/bar_cache.hpp"
#include "dqntrader/data/synthetic.hpp"
#include "dqntrader/env/trading_env.hpp"
#include "dqntrader/eval/policy_file.hpp"
#include "dqntrader/io/checkpoint_file.hpp"
#include "dqntrader/nn/adam.hpp"
#include "dqntrader/nn/mlp.hpp"
#include "dqntrader/train/dqn_trainer.hpp"
#include "dqntrader/train/td_loss.hpp"
#include "dqntrader/train/training_guard.hpp"
#include "dqntrader/train/training_run.hpp"
#include "test_support.hpp"

namespace dqntrader {
namespace {

namespace fs = std::filesystem;

using testing::download;
using testing::upload;

// --- each pass over K members equals K passes over one ----------------------------------------

// d loss / d Q, learner by learner and row by row (dq: learners x rows x actions), through
// write_row. (A free function: CUDA allows no device lambda in a test's body.)
void write_rows(const ExecSpace& space, const nn::OutputGradient<float>& g,
                const std::vector<float>& dq) {
  const auto values = upload(dq);
  const std::size_t rows = g.rows(), actions = g.actions();
  Kokkos::parallel_for(
      "test::write_rows", Kokkos::RangePolicy<ExecSpace>(space, 0, g.learners() * rows),
      KOKKOS_LAMBDA(const std::size_t kr) {
        g.write_row(kr / rows, kr % rows, [&](std::size_t a) { return values(kr * actions + a); });
      });
  space.fence();
}

// The members' online networks and targets in one batched pass, then their backward passes,
// against each member's pair evaluated alone: the same Q-values and gradients (bitwise on
// OpenMP, where every product of a batch is its own BLAS call; within float rounding on CUDA).
// The rows take several chunks of a column pass on both backends, so that a network alone
// takes its head's weight gradient in a pass of its own, a population's in the head's pass.
TEST(PopulationPasses, TheNetworksOfKMembersAreKNetworksOfOne) {
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE(testing::seed_note(seed));
  std::mt19937_64 rng(seed);
  nn::NetworkSpec spec;
  spec.features = 5;
  spec.hidden = {24, 17};
  spec.dueling = true;
  const nn::ParameterLayout layout(spec);
  const std::size_t k = 3, rows = 600, state = spec.state_size(), p = layout.size();
  const std::size_t stride = p + 29, target_first = 4, target_end = 411;
  // Parameters: every member's online network, then every member's target; states: member
  // m's in block m. The targets are evaluated on rows [target_first, target_end) only.
  std::vector<float> all(2 * k * stride, 0.0f);
  for (std::size_t set = 0; set < 2 * k; ++set) {
    const std::vector<float> one = nn::initial_parameters(layout, seed + set);
    std::copy(one.begin(), one.end(), all.begin() + static_cast<std::ptrdiff_t>(set * stride));
  }
  const ExecSpace space;
  const auto parameters = upload(all);
  const MatrixBatch<float> states("test::states", k, rows, state);
  std::vector<std::vector<float>> member_states;
  auto host_states = Kokkos::create_mirror_view(states);
  for (std::size_t m = 0; m < k; ++m) {
    member_states.push_back(testing::random_values(rng, rows * state));
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t j = 0; j < state; ++j)
        host_states(m, r, j) = member_states[m][r * state + j];
    }
  }
  Kokkos::deep_copy(states, host_states);
  nn::Mlp<float> population(space, spec, Precision::fp32, rows, 2 * k, k);
  MatrixBatch<float> q("test::q", 2 * k, rows, spec.actions);
  const exec::SideStream side;
  nn::head_forward(space,
                   population.forward_pair(space, side, {parameters, parameters, k, stride}, states,
                                           rows, target_first, target_end - target_first),
                   rows, q);
  std::vector<float> dq = testing::random_values(rng, k * rows * spec.actions);
  Kokkos::View<float*, DeviceMemory> grads("test::grads", k * stride);
  const nn::Gradients gradients{grads, k, stride};
  write_rows(space, population.output_gradient(rows, gradients), dq);
  population.backward(space, side, {parameters, parameters, k, stride}, rows, gradients);
  const auto q_all = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), q);
  const std::vector<float> g_all = download(grads);
  const bool exact = std::string(gemm::backend_name()) == "openmp";
  for (std::size_t m = 0; m < k; ++m) {
    SCOPED_TRACE("member " + std::to_string(m));
    const auto online =
        upload(std::vector<float>(all.begin() + m * stride, all.begin() + m * stride + p));
    const auto target = upload(
        std::vector<float>(all.begin() + (k + m) * stride, all.begin() + (k + m) * stride + p));
    std::vector<float> pair(2 * p);
    std::copy(all.begin() + m * stride, all.begin() + m * stride + p, pair.begin());
    std::copy(all.begin() + (k + m) * stride, all.begin() + (k + m) * stride + p, pair.begin() + p);
    const auto both = upload(pair);
    const MatrixBatch<float> one_states("test::one", 1, rows, state);
    auto host_one = Kokkos::create_mirror_view(one_states);
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t j = 0; j < state; ++j)
        host_one(0, r, j) = member_states[m][r * state + j];
    }
    Kokkos::deep_copy(one_states, host_one);
    nn::Mlp<float> alone(space, spec, Precision::fp32, rows, 2, 1);
    MatrixBatch<float> q_one("test::q_one", 2, rows, spec.actions);
    nn::head_forward(space,
                     alone.forward_pair(space, side, {both, both, 1, p}, one_states, rows,
                                        target_first, target_end - target_first),
                     rows, q_one);
    Kokkos::View<float*, DeviceMemory> g_one("test::g_one", p);
    write_rows(space, alone.output_gradient(rows, nn::Gradients{g_one}),
               std::vector<float>(dq.begin() + m * rows * spec.actions,
                                  dq.begin() + (m + 1) * rows * spec.actions));
    alone.backward(space, side, {both, both, 1, p}, rows, nn::Gradients{g_one});
    const auto q_host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), q_one);
    for (std::size_t c = 0; c < 2; ++c) {
      for (std::size_t r = c == 0 ? 0 : target_first; r < (c == 0 ? rows : target_end); ++r) {
        for (std::size_t a = 0; a < spec.actions; ++a) {
          const float got = q_all(c * k + m, r, a), want = q_host(c, r, a);
          if (exact) {
            ASSERT_EQ(got, want) << c << " " << r << " " << a;
          } else {
            ASSERT_NEAR(got, want, 1e-5f * (1 + std::fabs(want))) << c << " " << r << " " << a;
          }
        }
      }
    }
    const std::vector<float> want = download(g_one);
    for (std::size_t i = 0; i < p; ++i) {
      const float got = g_all[m * stride + i];
      if (exact) {
        ASSERT_EQ(got, want[i]) << "parameter " << i;
      } else {
        ASSERT_NEAR(got, want[i], 1e-5f * (1 + std::fabs(want[i]))) << "parameter " << i;
      }
    }
  }
}

// Adam over K members, each with its own settings, a NaN gradient in one and another stopped,
// equals K optimizers of one: the faulty member skips its step alone, the stopped one is left.
TEST(PopulationPasses, AdamOverKMembersIsKOptimizersOfOne) {
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE(testing::seed_note(seed));
  std::mt19937_64 rng(seed);
  const std::size_t k = 4, n = 3001, stride = 3072;
  std::vector<nn::AdamSettings> settings(k);
  settings[1].learning_rate = 3e-3f;
  settings[1].schedule = nn::Schedule::cosine;
  settings[1].schedule_steps = 3;
  settings[2].beta1 = 0.8f;
  settings[2].weight_decay = 0.01f;
  settings[2].clip_norm = 0.0f;
  settings[3].clip_norm = 0.1f;
  settings[3].epsilon = 1e-4f;
  const ExecSpace space;
  const std::vector<float> start = testing::random_values(rng, k * stride);
  auto together = upload(start);
  nn::Adam population(space, nn::MemberVectors{k, n, stride}, settings);
  const auto active = upload(std::vector<int>{1, 1, 1, 0});
  std::vector<std::vector<float>> grads_by_step;
  for (int t = 0; t < 3; ++t) {
    std::vector<float> g = testing::random_values(rng, k * stride);
    if (t == 1)
      g[2 * stride + 17] = std::numeric_limits<float>::quiet_NaN();  // member 2, step 2
    grads_by_step.push_back(g);
    population.step(space, together, Kokkos::View<const float*, DeviceMemory>(upload(g)), stride,
                    Kokkos::View<float*, DeviceMemory>(),
                    Kokkos::View<const int*, DeviceMemory>(active));
  }
  const std::vector<float> got = download(together);
  const auto counters =
      Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), population.counters());
  for (std::size_t m = 0; m < k; ++m) {
    SCOPED_TRACE("member " + std::to_string(m));
    std::vector<float> one(start.begin() + m * stride, start.begin() + m * stride + n);
    auto alone_params = upload(one);
    nn::Adam alone(space, nn::MemberVectors{1, n, n}, {settings[m]});
    if (m != 3) {
      for (const std::vector<float>& g : grads_by_step) {
        alone.step(space, alone_params,
                   Kokkos::View<const float*, DeviceMemory>(upload(
                       std::vector<float>(g.begin() + m * stride, g.begin() + m * stride + n))),
                   n, Kokkos::View<float*, DeviceMemory>());
      }
    }
    const std::vector<float> want = download(alone_params);
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(got[m * stride + i], want[i]) << i;
    const auto one_counters =
        Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), alone.counters());
    EXPECT_EQ(counters(m).calls, one_counters(0).calls);
    EXPECT_EQ(counters(m).skipped, one_counters(0).skipped);
  }
  EXPECT_EQ(counters(2).skipped, 1);
  EXPECT_EQ(counters(3).calls, 0);
}

// The guard over K members restores only the member that went out of bounds.
TEST(PopulationPasses, TheGuardRestoresOnlyTheFaultyMember) {
  const ExecSpace space;
  const std::size_t k = 3, n = 5, stride = 8;
  auto make = [&](float value) { return upload(std::vector<float>(k * stride, value)); };
  train::LearnerState<float> state{make(1.0f), make(2.0f), make(0.1f), make(0.01f), {}, {}};
  train::TrainingGuard guard(space, nn::MemberVectors{k, n, stride}, 1e6);
  Kokkos::View<train::LossSums*, DeviceMemory> loss("test::loss", k);
  Kokkos::deep_copy(loss, train::LossSums{0.5, 1.0, 1.0});
  MatrixBatch<float> q("test::q", k, 2, 3);
  guard.snapshot(space, state);
  Kokkos::deep_copy(state.online, 1.5f);  // a good step for every member
  guard.check(space, state, q, loss);
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), state.online);
  host(1 * stride + 2) = std::numeric_limits<float>::quiet_NaN();  // member 1 goes bad
  host(2 * stride + 4) = 2.5f;                                     // member 2 moves on
  Kokkos::deep_copy(state.online, host);
  guard.check(space, state, q, loss);
  const std::vector<float> online = download(state.online);
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_EQ(online[0 * stride + i], 1.5f);
    EXPECT_EQ(online[1 * stride + i], 1.5f) << "member 1 restored";
    EXPECT_EQ(online[2 * stride + i], i == 4 ? 2.5f : 1.5f) << "member 2 kept its step";
  }
  const auto counters = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), guard.counters());
  EXPECT_EQ(counters(0).restores, 0);
  EXPECT_EQ(counters(1).restores, 1);
  EXPECT_EQ(counters(2).restores, 0);
}

using testing::slurp;

using testing::jsonl_records;

class Population : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() /
            ("dqntrader-population-" + std::to_string(testing::test_seed()));
    fs::create_directories(m_dir);
    data::SynthConfig synth;
    synth.bars = 3000;
    synth.seed = 17;
    data::write_bar_cache((m_dir / "bars.dqnbars").string(), data::generate_bars(synth));
  }
  void TearDown() override { fs::remove_all(m_dir); }

  // The shared shapes and loop; every member's own settings at their defaults.
  train::TrainConfig base(const std::string& name) const {
    train::TrainConfig c;
    c.data = (m_dir / "bars.dqnbars").string();
    c.epochs = 3;
    c.steps_per_epoch = 60;
    c.learning_starts = 256;
    c.hidden = {16, 8};
    c.batch_size = 32;
    c.environments = 16;
    c.replay_capacity = 4096;
    c.episode_length = 64;
    c.vaccine_interval = 10;
    c.guard_interval = 5;
    c.probe_interval = 20;
    c.probe_batch = 32;
    c.out = (m_dir / name).string();
    return c;
  }

  // Three members that differ in every setting a member may have of its own.
  std::vector<train::TrainConfig> members(const std::string& prefix) const {
    std::vector<train::TrainConfig> m(3, base(""));
    m[0].seed = 1;
    m[0].learning_rate = 5e-4;
    m[0].epsilon_steps = 300;
    m[0].target_update = 50;

    m[1].seed = 2;
    m[1].learning_rate = 1e-3;
    m[1].lr_schedule = "linear";
    m[1].lr_final_fraction = 0.2;
    m[1].gamma = 0.8;
    m[1].n_step = 3;
    m[1].reward_scale = 50;
    m[1].huber_delta = 0.5;
    m[1].epsilon_start = 0.8;
    m[1].epsilon_end = 0.1;
    m[1].epsilon_steps = 200;
    m[1].target_update = 100;
    m[1].clip_norm = 5;
    m[1].weight_decay = 1e-4;
    m[1].adam_beta1 = 0.85;
    m[1].adam_beta2 = 0.99;
    m[1].adam_epsilon = 1e-7;
    m[1].vaccine_interval = 0;
    m[1].probe_interval = 0;

    m[2].seed = 3;
    m[2].learning_rate = 3e-4;
    m[2].lr_schedule = "cosine";
    m[2].gamma = 0.95;
    m[2].n_step = 2;
    m[2].reward_scale = 200;
    m[2].huber_delta = 2;
    m[2].epsilon_start = 0.5;
    m[2].epsilon_end = 0.02;
    m[2].epsilon_steps = 100;
    m[2].tau = 0.005;
    m[2].clip_norm = 0;
    m[2].weight_decay = 1e-3;
    m[2].adam_beta2 = 0.995;
    m[2].adam_epsilon = 1e-6;
    for (std::size_t i = 0; i < m.size(); ++i)
      m[i].out = (m_dir / (prefix + std::to_string(i))).string();
    return m;
  }

  std::vector<train::RunResult> population(const std::vector<train::TrainConfig>& m,
                                           const std::string& checkpoints,
                                           train::ResumeOptions resume = {}) const {
    train::PopulationOptions options;
    options.checkpoints = (m_dir / checkpoints).string();
    std::ostringstream log;
    return train::run_population(m_stream.space(), m, options, log, resume);
  }

  train::RunResult alone(const train::TrainConfig& c) const {
    std::ostringstream log;
    return train::run_training(m_stream.space(), c, log);
  }

  fs::path m_dir;
  exec::StreamSpace m_stream;
};

// The files of a member's run that depend on what it computed (timings.jsonl holds wall-clock
// seconds; checkpoints are the population's).
const char* const kComputed[] = {"metrics.jsonl",      "best.dqnpolicy", "last.dqnpolicy",
                                 "final_metrics.json", "baselines.json", "config.json"};

#if defined(DQNTRADER_BACKEND_OPENMP)

// With a plain head and with a dueling head, and two walk-forward validation windows.
TEST_F(Population, EveryMemberEqualsItsRunAloneBitwise) {
  for (const bool dueling : {false, true}) {
    SCOPED_TRACE(dueling ? "dueling" : "plain");
    const std::string tag = dueling ? "dueling-" : "plain-";
    std::vector<train::TrainConfig> together = members(tag + "member-");
    for (train::TrainConfig& c : together) {
      c.dueling = dueling;
      c.val_windows = 2;
    }
    const std::vector<train::RunResult> results = population(together, tag + "population");
    ASSERT_EQ(results.size(), together.size());
    for (std::size_t i = 0; i < together.size(); ++i) {
      SCOPED_TRACE("member " + std::to_string(i));
      train::TrainConfig solo = together[i];
      solo.out = (m_dir / (tag + "alone-" + std::to_string(i))).string();
      const train::RunResult single = alone(solo);
      EXPECT_EQ(results[i].best_epoch, single.best_epoch);
      EXPECT_EQ(results[i].best_sharpe, single.best_sharpe);
      for (const char* file : kComputed) {
        if (std::string(file) == "config.json")
          continue;  // names its own directory
        EXPECT_EQ(slurp(fs::path(together[i].out) / file), slurp(fs::path(solo.out) / file))
            << file;
      }
      EXPECT_EQ(jsonl_records(fs::path(together[i].out) / "metrics.jsonl").size(), 3u);
    }
    // The members did learn differently (their own settings took effect).
    EXPECT_NE(slurp(fs::path(together[0].out) / "metrics.jsonl"),
              slurp(fs::path(together[1].out) / "metrics.jsonl"));
    // Member 1 has the probe off: its records hold no probe values; member 0's do.
    const auto off = jsonl_records(fs::path(together[1].out) / "metrics.jsonl");
    const auto on = jsonl_records(fs::path(together[0].out) / "metrics.jsonl");
    for (const auto& [group, value] : off.back()["probe"].items())
      EXPECT_TRUE(value.is_null()) << group;
    for (const auto& [group, value] : on.back()["probe"].items())
      EXPECT_FALSE(value.is_null()) << group;
    EXPECT_EQ(on.back()["validation_windows"].size(), 2u);
  }
}

// A fault in one member (a NaN gradient, then a NaN weight; then every price, until its
// fault budget stops it) leaves every other member bitwise as it was without it.
TEST_F(Population, FaultsStayWithTheirMember) {
  const std::vector<train::TrainConfig> clean = members("clean-");
  population(clean, "clean");
  for (const char* fault : {"gradient@2", "weight@2"}) {
    SCOPED_TRACE(fault);
    std::vector<train::TrainConfig> faulty = members(std::string("faulty-") + fault[0] + "-");
    faulty[1].inject_fault = fault;
    const std::vector<train::RunResult> results = population(faulty, std::string("p-") + fault[0]);
    EXPECT_FALSE(results[1].failed);
    const auto r = jsonl_records(fs::path(faulty[1].out) / "metrics.jsonl");
    ASSERT_EQ(r.size(), 3u);
    EXPECT_GE(r[1]["skipped_steps"].get<long>() + r[1]["guard_restores"].get<long>(), 1)
        << r[1].dump();
    EXPECT_NE(slurp(fs::path(faulty[1].out) / "metrics.jsonl"),
              slurp(fs::path(clean[1].out) / "metrics.jsonl"));
    for (std::size_t i : {0u, 2u}) {
      for (const char* file : kComputed) {
        if (std::string(file) == "config.json")
          continue;
        EXPECT_EQ(slurp(fs::path(faulty[i].out) / file), slurp(fs::path(clean[i].out) / file))
            << "member " << i << ": " << file;
      }
    }
  }
  // A persistent fault: member 1's prices turn NaN at epoch 2 and its budget of 5 stops it
  // there, with its report; the others run all three epochs, unchanged.
  std::vector<train::TrainConfig> failing = members("failing-");
  failing[1].inject_fault = "price@2";
  failing[1].fault_budget = 5;
  const std::vector<train::RunResult> results = population(failing, "failing");
  EXPECT_TRUE(results[1].failed);
  EXPECT_NE(results[1].failure.find("fault_report.json"), std::string::npos);
  const nlohmann::json report = testing::json_file(fs::path(failing[1].out) / "fault_report.json");
  EXPECT_EQ(report["epoch"], 2);
  EXPECT_GE(report["consecutive_faults"].get<long>(), 5);
  EXPECT_EQ(jsonl_records(fs::path(failing[1].out) / "metrics.jsonl").size(), 2u);
  for (std::size_t i : {0u, 2u}) {
    EXPECT_FALSE(results[i].failed);
    EXPECT_EQ(slurp(fs::path(failing[i].out) / "metrics.jsonl"),
              slurp(fs::path(clean[i].out) / "metrics.jsonl"))
        << "member " << i;
  }
}

// Early stopping stops one member: its steps end, its run closes as it would alone, and the
// others go on unchanged.
TEST_F(Population, EarlyStoppingStopsOnlyItsMember) {
  std::vector<train::TrainConfig> patient = members("patient-");
  std::vector<train::TrainConfig> reference = members("reference-");
  for (std::size_t i = 0; i < patient.size(); ++i)
    patient[i].epochs = reference[i].epochs = 6;
  patient[2].patience = 1;
  const std::vector<train::RunResult> results = population(patient, "patient");
  train::TrainConfig solo = patient[2];
  solo.out = (m_dir / "patient-alone").string();
  alone(solo);
  for (const char* file : kComputed) {
    if (std::string(file) != "config.json") {
      EXPECT_EQ(slurp(fs::path(patient[2].out) / file), slurp(fs::path(solo.out) / file)) << file;
    }
  }
  ASSERT_TRUE(results[2].stopped_early) << "the seeds were meant to give an epoch without gain";
  const auto stopped = jsonl_records(fs::path(patient[2].out) / "metrics.jsonl");
  EXPECT_LT(stopped.size(), 6u);
  for (std::size_t i : {0u, 1u}) {
    EXPECT_FALSE(results[i].stopped_early);
    EXPECT_EQ(jsonl_records(fs::path(patient[i].out) / "metrics.jsonl").size(), 6u);
  }
  // Members 0 and 1 as in a population that never stopped anyone.
  population(reference, "reference");
  for (std::size_t i : {0u, 1u}) {
    EXPECT_EQ(slurp(fs::path(patient[i].out) / "metrics.jsonl"),
              slurp(fs::path(reference[i].out) / "metrics.jsonl"))
        << "member " << i;
  }
}

// A population killed after two of its four epochs (its newer checkpoints gone) and resumed
// ends exactly where one that ran straight through ends: every member's files, and the whole
// population's state.
TEST_F(Population, AResumedPopulationEqualsAStraightOneBitwise) {
  std::vector<train::TrainConfig> straight = members("straight-");
  std::vector<train::TrainConfig> killed = members("killed-");
  for (std::size_t i = 0; i < straight.size(); ++i)
    straight[i].epochs = killed[i].epochs = 4;
  population(straight, "straight");
  population(killed, "killed");
  for (const char* newer : {"checkpoint-3.dqnckpt", "checkpoint-4.dqnckpt"})
    ASSERT_TRUE(fs::remove(m_dir / "killed" / newer)) << newer;
  train::ResumeOptions resume;
  resume.resume = true;
  population(killed, "killed", resume);
  for (std::size_t i = 0; i < straight.size(); ++i) {
    for (const char* file : kComputed) {
      if (std::string(file) != "config.json") {
        EXPECT_EQ(slurp(fs::path(straight[i].out) / file), slurp(fs::path(killed[i].out) / file))
            << "member " << i << ": " << file;
      }
    }
  }
  const auto a = io::read_sections((m_dir / "straight" / "checkpoint-4.dqnckpt").string());
  const auto b = io::read_sections((m_dir / "killed" / "checkpoint-4.dqnckpt").string());
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    if (a[i].name.rfind("timings.jsonl", 0) == 0 || a[i].name.rfind("settings/", 0) == 0)
      continue;  // wall-clock seconds; the members' directories
    EXPECT_EQ(a[i].bytes, b[i].bytes) << "section " << a[i].name;
  }
}

#else

// CUDA: the members' products are batched over the population, whose algorithm cuBLASLt may
// choose by the batch count, and the fused learning step chunks a member's batch by the
// population's size; where those choices agree with the run alone the numbers are the same.
// Measured on an H100 (c8e4050, the fused path): every member's loss and validation Sharpe at
// every epoch equal to its run alone in every digit. The bound is a relative 1e-9: room for the
// last bits of a sum taken in another order, none for a flipped action, which moves a Sharpe
// by orders of magnitude more and is what this test is for.
TEST_F(Population, EveryMemberLearnsAsItsRunAloneWithinRounding) {
  const std::vector<train::TrainConfig> together = members("member-");
  const std::vector<train::RunResult> results = population(together, "population");
  for (std::size_t i = 0; i < together.size(); ++i) {
    SCOPED_TRACE("member " + std::to_string(i));
    train::TrainConfig solo = together[i];
    solo.out = (m_dir / ("alone-" + std::to_string(i))).string();
    const train::RunResult single = alone(solo);
    const auto a = jsonl_records(fs::path(together[i].out) / "metrics.jsonl");
    const auto b = jsonl_records(fs::path(solo.out) / "metrics.jsonl");
    ASSERT_EQ(a.size(), b.size());
    constexpr double kRelative = 1e-9;
    for (std::size_t e = 0; e < a.size(); ++e) {
      SCOPED_TRACE("epoch " + std::to_string(e + 1));
      const double loss_a = a[e]["loss"].get<double>(), loss_b = b[e]["loss"].get<double>();
      EXPECT_NEAR(loss_a, loss_b, kRelative * std::fabs(loss_b)) << "the loss";
      const double sharpe_a = a[e]["validation"]["sharpe"].get<double>();
      const double sharpe_b = b[e]["validation"]["sharpe"].get<double>();
      EXPECT_NEAR(sharpe_a, sharpe_b, kRelative * std::fabs(sharpe_b)) << "the validation";
    }
    EXPECT_NEAR(results[i].last_sharpe, single.last_sharpe,
                kRelative * std::fabs(single.last_sharpe));
  }
}

#endif

// What cannot be one population is refused, naming the setting.
// What the settings table derives for a member: the records the kernels and Adam read, the
// settings a schedule hands on, and those its population shares, against the fields as this
// test lists them (every member setting given a value other than its default).
TEST(PopulationSettings, AMembersRecordsAndScopesAreItsOwnSettings) {
  train::TrainConfig c;
  c.seed = 77;
  c.gamma = 0.95;
  c.n_step = 3;
  c.reward_scale = 20.0;
  c.huber_delta = 2.5;
  c.epsilon_start = 0.8;
  c.epsilon_end = 0.02;
  c.epsilon_steps = 900;
  c.target_update = 300;
  c.tau = 0.01;
  c.learning_rate = 2e-3;
  c.lr_schedule = "linear";
  c.lr_final_fraction = 0.3;
  c.weight_decay = 1e-4;
  c.clip_norm = 5.0;
  c.adam_beta1 = 0.8;
  c.adam_beta2 = 0.99;
  c.adam_epsilon = 1e-6;
  c.epochs = 3;
  c.steps_per_epoch = 70;
  c.vaccine_interval = 0;
  c.probe_interval = 25;
  train::TrainConfig population = c;
  population.probe_interval = 25;
  const train::MemberRecords r = train::member_records(c, population);
  EXPECT_EQ(r.kernels.seed, 77u);
  EXPECT_EQ(r.kernels.gamma, 0.95);
  EXPECT_EQ(r.kernels.n_step, 3);
  EXPECT_EQ(r.kernels.reward_scale, 20.0);
  EXPECT_EQ(r.kernels.huber_delta, 2.5);
  EXPECT_EQ(r.kernels.epsilon_start, 0.8);
  EXPECT_EQ(r.kernels.epsilon_end, 0.02);
  EXPECT_EQ(r.kernels.epsilon_steps, 900);
  EXPECT_EQ(r.kernels.target_update, 300);
  EXPECT_EQ(r.kernels.tau, 0.01);
  EXPECT_EQ(r.kernels.vaccine, 0);
  EXPECT_EQ(r.kernels.probe, 1);
  EXPECT_EQ(r.adam.learning_rate, 2e-3f);
  EXPECT_EQ(r.adam.schedule, nn::Schedule::linear);
  EXPECT_EQ(r.adam.final_fraction, 0.3f);
  EXPECT_EQ(r.adam.weight_decay, 1e-4f);
  EXPECT_EQ(r.adam.clip_norm, 5.0f);
  EXPECT_EQ(r.adam.beta1, 0.8f);
  EXPECT_EQ(r.adam.beta2, 0.99f);
  EXPECT_EQ(r.adam.epsilon, 1e-6f);
  EXPECT_EQ(r.adam.schedule_steps, 210);
  population.probe_interval = 0;  // the population runs no probe: nor does the member
  EXPECT_EQ(train::member_records(c, population).kernels.probe, 0);

  // A schedule's copy takes the source's learning and keeps its own seed, run directory, test
  // fault, patience and fault budget.
  train::TrainConfig own;
  own.seed = 5;
  own.out = "mine";
  own.inject_fault = "weight@2";
  own.patience = 4;
  own.fault_budget = 9;
  c.out = "theirs";
  c.patience = 1;
  c.fault_budget = 2;
  const train::TrainConfig taken = train::with_learning_settings(own, c);
  EXPECT_EQ(taken.seed, 5u);
  EXPECT_EQ(taken.out, "mine");
  EXPECT_EQ(taken.inject_fault, "weight@2");
  EXPECT_EQ(taken.patience, 4u);
  EXPECT_EQ(taken.fault_budget, 9u);
  EXPECT_EQ(taken.gamma, 0.95);
  EXPECT_EQ(taken.adam_epsilon, 1e-6);
  EXPECT_EQ(taken.lr_schedule, "linear");
  EXPECT_EQ(train::member_settings_json(c).size(), 19u);  // the learning settings

  // Every other setting is the population's (or the sweep's).
  const std::vector<std::string> own_names = {
      "seed",          "learning-rate", "lr-schedule",  "lr-final-fraction", "gamma",
      "n-step",        "reward-scale",  "huber-delta",  "epsilon-start",     "epsilon-end",
      "epsilon-steps", "target-update", "tau",          "clip-norm",         "weight-decay",
      "adam-beta1",    "adam-beta2",    "adam-epsilon", "vaccine-interval",  "probe-interval",
      "patience",      "fault-budget",  "out",          "inject-fault"};
  train::TrainConfig defaults;
  std::size_t settings = 0;
  for (const train::Setting& s : train::settings(defaults)) {
    ++settings;
    const bool listed = std::find(own_names.begin(), own_names.end(), s.name) != own_names.end();
    EXPECT_EQ(train::own_setting(s.scope), listed) << s.name;
  }
  EXPECT_EQ(train::population_settings(defaults).size(), settings - own_names.size());
  for (const char* name : {"data", "cost", "graph-steps", "val-windows", "out"})
    EXPECT_EQ(train::setting_scope(name), train::Scope::sweep) << name;
  for (const char* name : {"hidden", "batch-size", "epochs", "environments"})
    EXPECT_EQ(train::setting_scope(name), train::Scope::population) << name;
}

TEST_F(Population, MembersThatCannotShareAPopulationAreRefused) {
  auto refused = [&](std::vector<train::TrainConfig> m, const std::string& setting) {
    try {
      train::check_population(m);
      ADD_FAILURE() << "accepted " << setting;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(setting), std::string::npos) << e.what();
    }
  };
  std::vector<train::TrainConfig> m = members("x-");
  m[1].hidden = {32, 8};
  refused(m, "--hidden");
  m = members("x-");
  m[2].batch_size = 64;
  refused(m, "--batch-size");
  m = members("x-");
  m[0].probe_interval = 40;  // member 2 runs the probe every 20 steps
  refused(m, "--probe-interval");
  m = members("x-");
  m[0].data.clear();
  m[1].data.clear();
  m[2].data.clear();
  refused(m, "--seed");  // the built-in market: the seed chooses the market
  m = members("x-");
  for (train::TrainConfig& c : m)
    c.learning_starts = 16;  // member 1's 3-step windows need more than 2 x 16
  refused(m, "--learning-starts");
  EXPECT_NO_THROW(train::check_population(members("x-")));
}

// --- what a member takes on the device ---------------------------------------------------------

#if defined(DQNTRADER_BACKEND_OPENMP)

// The device memory allocated and not yet freed, and its peak, through Kokkos' tool hooks.
struct DeviceBytes {
  static std::int64_t now, peak;
  static void allocated(const Kokkos_Profiling_SpaceHandle space, const char*, const void*,
                        const std::uint64_t bytes) {
    if (std::string(space.name) != DeviceMemory::name())
      return;
    now += static_cast<std::int64_t>(bytes);
    peak = std::max(peak, now);
  }
  static void freed(const Kokkos_Profiling_SpaceHandle space, const char*, const void*,
                    const std::uint64_t bytes) {
    if (std::string(space.name) == DeviceMemory::name())
      now -= static_cast<std::int64_t>(bytes);
  }
};
std::int64_t DeviceBytes::now = 0, DeviceBytes::peak = 0;

// The peak device memory of a population of k members of c, made and trained for an epoch.
std::int64_t population_peak(const ExecSpace& space, train::TrainConfig c, std::size_t k,
                             const data::Bars& bars) {
  std::vector<train::TrainConfig> members(k, c);
  for (std::size_t m = 0; m < k; ++m)
    members[m].seed = m + 1;
  Kokkos::fence();
  DeviceBytes::now = DeviceBytes::peak = 0;
  Kokkos::Tools::Experimental::set_allocate_data_callback(&DeviceBytes::allocated);
  Kokkos::Tools::Experimental::set_deallocate_data_callback(&DeviceBytes::freed);
  {
    train::DqnTrainer trainer(space, members, bars);
    trainer.run_epoch();
  }
  Kokkos::Tools::Experimental::set_allocate_data_callback(nullptr);
  Kokkos::Tools::Experimental::set_deallocate_data_callback(nullptr);
  return DeviceBytes::peak;
}

// member_bytes() is what a sweep sizes its populations by: each member a population gains must
// cost at most that (a population planned to fit must fit), and not much less (a third of the
// device would go unused). Measured as the peak of a population of 5 less that of 1, over 4.
TEST_F(Population, MemberBytesBoundWhatAMemberAllocates) {
  for (const bool wide : {false, true}) {
    train::TrainConfig c = base("bytes");
    if (wide) {
      c.hidden = {128, 128};
      c.batch_size = 256;
      c.environments = 64;
      c.replay_capacity = 100000;
      c.probe_batch = 256;
    }
    SCOPED_TRACE(wide ? "the defaults' shapes" : "a small network");
    const train::RunData data = train::load_run_data(c);
    const std::int64_t one = population_peak(m_stream.space(), c, 1, data.bars);
    const std::int64_t five = population_peak(m_stream.space(), c, 5, data.bars);
    const double measured = static_cast<double>(five - one) / 4.0;
    data::FeatureConfig features;
    const data::FeatureSpec spec = data::resolve_features(features, data.bars);
    const train::RunWindows w =
        train::split_windows(c, data.bars.size(), data.validation.size(), spec.warmup());
    const double bound =
        static_cast<double>(train::member_bytes(c, spec.count(), w.val_end - w.val_begin));
    EXPECT_GE(bound, measured);
    EXPECT_LE(bound, 1.5 * measured) << "bound " << bound << ", measured " << measured;
  }
}

#endif

}  // namespace
}  // namespace dqntrader

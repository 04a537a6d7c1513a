// The device backtest (features, decisions, position scan, metrics) against the
// sequential double-precision oracle in backtest_oracle.hpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backtest_oracle.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/data/features.hpp"
#include "dqntrader/data/synthetic.hpp"
#include "dqntrader/eval/backtest_evaluator.hpp"
#include "dqntrader/eval/path_evaluator.hpp"
#include "dqntrader/nn/network_spec.hpp"
#include "dqntrader/train/train_config.hpp"
#include "test_support.hpp"

namespace dqntrader {
namespace {

using testing::download;
using testing::upload;

using eval::WindowMetrics;

// --- helpers ---------------------------------------------------------------------------------

Kokkos::View<float**, Kokkos::LayoutRight, DeviceMemory> upload_rows(
    const std::vector<std::vector<float>>& rows) {
  Kokkos::View<float**, Kokkos::LayoutRight, DeviceMemory> device("test::rows", rows.size(),
                                                                  rows[0].size());
  auto host = Kokkos::create_mirror_view(device);
  for (std::size_t k = 0; k < rows.size(); ++k) {
    for (std::size_t j = 0; j < rows[k].size(); ++j)
      host(k, j) = rows[k][j];
  }
  Kokkos::deep_copy(device, host);
  return device;
}

// Relative agreement; NaN only with NaN, infinity only with the same infinity. Values
// whose magnitude is below floor compare absolutely against floor.
void expect_near_relative(double got, double expected, double relative, const char* what,
                          double floor = 1e-14) {
  if (std::isnan(floor) || std::isinf(floor))
    floor = 1e-14;
  if (std::isnan(expected)) {
    EXPECT_TRUE(std::isnan(got)) << what << ": got " << got << ", expected NaN";
    return;
  }
  if (std::isinf(expected)) {
    EXPECT_EQ(got, expected) << what;
    return;
  }
  const double scale = std::max({std::fabs(expected), std::fabs(got), floor});
  EXPECT_LE(std::fabs(got - expected), relative * scale)
      << what << ": got " << got << ", expected " << expected;
}

// Every metric relative to its own size or, for those that cancel, the size of what they
// are computed from (oracle::Metrics::scale).
void expect_metrics(const WindowMetrics& got, const oracle::Metrics& expected, double relative) {
  EXPECT_EQ(got.bars, expected.bars);
  EXPECT_EQ(got.trades_closed, expected.trades_closed);
  const auto& s = expected.scale;
  expect_near_relative(got.total_return, expected.total_return, relative, "total_return",
                       s.total_return);
  expect_near_relative(got.log_return, expected.log_return, relative, "log_return", s.log_return);
  expect_near_relative(got.cagr, expected.cagr, relative, "cagr", s.cagr);
  expect_near_relative(got.annual_volatility, expected.annual_volatility, relative,
                       "annual_volatility");
  expect_near_relative(got.sharpe, expected.sharpe, relative, "sharpe", s.sharpe);
  expect_near_relative(got.sortino, expected.sortino, relative, "sortino", s.sortino);
  expect_near_relative(got.max_drawdown, expected.max_drawdown, relative, "max_drawdown");
  expect_near_relative(got.calmar, expected.calmar, relative, "calmar", s.calmar);
  expect_near_relative(got.win_rate, expected.win_rate, relative, "win_rate");
  expect_near_relative(got.profit_factor, expected.profit_factor, relative, "profit_factor");
  expect_near_relative(got.expectancy, expected.expectancy, relative, "expectancy", s.expectancy);
  expect_near_relative(got.turnover, expected.turnover, relative, "turnover");
  expect_near_relative(got.exposure, expected.exposure, relative, "exposure");
  expect_near_relative(got.total_cost, expected.total_cost, relative, "total_cost");
}

void expect_same(const WindowMetrics& a, const WindowMetrics& b) {
  const double x[] = {a.total_return, a.log_return,    a.cagr,         a.annual_volatility,
                      a.sharpe,       a.sortino,       a.max_drawdown, a.calmar,
                      a.win_rate,     a.profit_factor, a.expectancy,   a.turnover,
                      a.exposure,     a.total_cost};
  const double y[] = {b.total_return, b.log_return,    b.cagr,         b.annual_volatility,
                      b.sharpe,       b.sortino,       b.max_drawdown, b.calmar,
                      b.win_rate,     b.profit_factor, b.expectancy,   b.turnover,
                      b.exposure,     b.total_cost};
  static_assert(sizeof(x) / sizeof(x[0]) == 14, "every floating-point metric");
  EXPECT_EQ(a.bars, b.bars);
  EXPECT_EQ(a.trades_closed, b.trades_closed);
  for (int i = 0; i < 14; ++i) {
    if (std::isnan(y[i])) {
      EXPECT_TRUE(std::isnan(x[i])) << "metric " << i;
    } else {
      EXPECT_EQ(x[i], y[i]) << "metric " << i;
    }
  }
}

std::vector<double> window_close(const data::Bars& bars, const eval::BarRange& w) {
  return std::vector<double>(bars.close.begin() + w.begin, bars.close.begin() + w.end);
}

std::vector<double> to_positions(const std::vector<int>& path,
                                 const std::vector<double>& positions) {
  std::vector<double> p(path.size());
  for (std::size_t i = 0; i < path.size(); ++i)
    p[i] = positions[path[i]];
  return p;
}

// A small market and network to evaluate.
struct Fixture {
  data::Bars bars;
  data::FeatureSpec spec;
  nn::NetworkSpec network;
  eval::BacktestConfig config;
  eval::BarRange train, window;

  explicit Fixture(std::uint64_t seed, std::size_t n = 4000) {
    data::SynthConfig synth;
    synth.bars = n;
    synth.seed = seed;
    bars = data::generate_bars(synth);
    data::FeatureConfig features;
    features.return_window = 6;
    features.volatility_window = 8;
    features.ofi_window = 2;
    spec = data::resolve_features(features, bars);
    network.features = spec.count();
    network.hidden = {32, 24};
    train = {spec.warmup(), n * 6 / 10};
    window = {n * 6 / 10, n};
    config.chunk_bars = 512;  // several chunks, the last one partial
  }
};

// --- same Q-values in, same decisions and metrics out ----------------------------------------

class SameQValues : public ::testing::TestWithParam<Precision> {};

TEST_P(SameQValues, OracleOnTheLibrarysQValuesAgreesExactly) {
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE(testing::seed_note(seed));
  Fixture f(seed);
  f.config.precision = GetParam();
  for (bool dueling : {false, true}) {
    f.network.dueling = dueling;
    const ExecSpace space;
    data::FeatureSet features(space, f.bars, f.spec);
    const data::FeatureStats stats = features.fit(f.train.begin, f.train.end);
    const nn::ParameterLayout layout(f.network);
    eval::QPolicy policy(space, f.network, f.config.precision, features, stats, 1,
                         f.config.chunk_bars, f.window.returns(), f.config.flat_index());
    const std::size_t n = f.window.returns();
    // A random network may never trade; take the first of a few that does, so that the
    // trade metrics are exercised.
    Kokkos::View<float*, DeviceMemory> parameters;
    std::vector<double> positions;
    for (std::uint64_t attempt = 0; attempt < 50; ++attempt) {
      parameters = upload(nn::initial_parameters(layout, seed + 1000 * dueling + attempt));
      const std::vector<float> q = policy.q_values(
          space, eval::parameter_rows(parameters.data(), 1, layout.size()), 0, f.window.begin, n);
      const std::vector<int> path = oracle::decisions(std::vector<double>(q.begin(), q.end()), n, 3,
                                                      3, static_cast<int>(f.config.flat_index()));
      positions = to_positions(path, f.config.positions);
      if (oracle::metrics(window_close(f.bars, f.window), positions, f.config.cost,
                          f.config.bars_per_year, 0.0)
              .trades_closed > 10) {
        break;
      }
    }
    eval::BacktestEvaluator evaluator(space, features, stats, f.network, f.window, f.config);
    const WindowMetrics metrics = evaluator.evaluate(parameters);
    const eval::PathDetail detail = evaluator.path_detail(parameters);
    ASSERT_EQ(detail.positions, positions) << "dueling " << dueling;
    const oracle::Metrics expected = oracle::metrics(window_close(f.bars, f.window), positions,
                                                     f.config.cost, f.config.bars_per_year, 0.0);
    expect_metrics(metrics, expected, 1e-12);
    EXPECT_GT(expected.trades_closed, 10)
        << "a path that trades, so the trade metrics are exercised";
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, SameQValues,
                         ::testing::Values(Precision::fp32, Precision::bf16),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// --- end to end against a double forward pass on independently built features -------------

// The oracle's features, in double, from the definitions in data/features.hpp.
std::vector<double> oracle_features(const data::Bars& bars, const data::FeatureSpec& spec,
                                    const eval::BarRange& train, const eval::BarRange& rows) {
  const std::size_t f_count = spec.count();
  auto raw_row = [&](std::size_t t) {
    std::vector<double> x;
    auto lr = [&](std::size_t s) { return std::log(bars.close[s] / bars.close[s - 1]); };
    for (int j = 0; j < spec.return_window; ++j)
      x.push_back(lr(t - j));
    double mean = 0;
    for (int j = 0; j < spec.volatility_window; ++j)
      mean += lr(t - j);
    mean /= spec.volatility_window;
    double sq = 0;
    for (int j = 0; j < spec.volatility_window; ++j)
      sq += (lr(t - j) - mean) * (lr(t - j) - mean);
    x.push_back(std::sqrt(sq / (spec.volatility_window - 1)));
    for (int j = 0; j < spec.ofi_window; ++j)
      x.push_back(bars.ofi[t - j]);
    return x;
  };
  std::vector<double> mean(f_count, 0.0), stdev(f_count, 0.0);
  for (std::size_t t = train.begin; t < train.end; ++t) {
    const auto x = raw_row(t);
    for (std::size_t f = 0; f < f_count; ++f)
      mean[f] += x[f];
  }
  for (double& m : mean)
    m /= static_cast<double>(train.end - train.begin);
  for (std::size_t t = train.begin; t < train.end; ++t) {
    const auto x = raw_row(t);
    for (std::size_t f = 0; f < f_count; ++f)
      stdev[f] += (x[f] - mean[f]) * (x[f] - mean[f]);
  }
  for (double& s : stdev)
    s = std::sqrt(s / static_cast<double>(train.end - train.begin));
  std::vector<double> out;
  for (std::size_t t = rows.begin; t < rows.end; ++t) {
    const auto x = raw_row(t);
    for (std::size_t f = 0; f < f_count; ++f)
      out.push_back((x[f] - mean[f]) / stdev[f]);
  }
  return out;
}

class EndToEnd : public ::testing::TestWithParam<Precision> {};

// Decisions may differ from the oracle's only at near-ties of its Q-values: for every bar
// and every incoming position, where the library's argmax differs, the oracle's best and
// chosen actions must lie within `tie` of each other. tie reflects the arithmetic: float
// features (about 1e-7 relative) for fp32; bf16 features, weights and activations (2^-8
// relative each, through three layers) for bf16.
TEST_P(EndToEnd, DecisionsDifferOnlyAtNearTies) {
  const Precision precision = GetParam();
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE(testing::seed_note(seed));
  Fixture f(seed);
  f.config.precision = precision;
  const ExecSpace space;
  data::FeatureSet features(space, f.bars, f.spec);
  const data::FeatureStats stats = features.fit(f.train.begin, f.train.end);
  const nn::ParameterLayout layout(f.network);
  const std::size_t n = f.window.returns();
  const oracle::Network net{f.network.features, 3, 3, f.network.hidden, false};
  const auto states =
      oracle_features(f.bars, f.spec, f.train, {f.window.begin, f.window.begin + n});
  // A freshly drawn network may prefer one position at every bar, whose metrics say nothing
  // (a flat path has no Sharpe ratio): the first draw from the seed on whose oracle path
  // holds each of at least two positions on 5% of the bars is the one compared.
  std::vector<float> host_parameters;
  std::vector<double> q_ref;
  for (std::uint64_t draw = seed;; ++draw) {
    host_parameters = nn::initial_parameters(layout, draw);
    q_ref = oracle::q_values(net, host_parameters, states, n);
    const std::vector<int> path =
        oracle::decisions(q_ref, n, 3, 3, static_cast<int>(f.config.flat_index()));
    std::size_t held[3] = {0, 0, 0};
    for (int p : path)
      ++held[p];
    if (std::count_if(held, held + 3, [&](std::size_t h) { return h >= n / 20; }) >= 2)
      break;
  }
  const auto parameters = upload(host_parameters);

  eval::QPolicy policy(space, f.network, precision, features, stats, 1, f.config.chunk_bars, n,
                       f.config.flat_index());
  const std::vector<float> q_lib = policy.q_values(
      space, eval::parameter_rows(parameters.data(), 1, layout.size()), 0, f.window.begin, n);

  double q_scale = 0.0;
  for (double v : q_ref)
    q_scale = std::max(q_scale, std::fabs(v));
  const double tie = (precision == Precision::bf16 ? 0.05 : 1e-4) * q_scale;
  std::size_t differing = 0;
  for (std::size_t i = 0; i < n * 3; ++i) {
    const float* lib = &q_lib[i * 3];
    const double* ref = &q_ref[i * 3];
    const int lib_best = static_cast<int>(std::max_element(lib, lib + 3) - lib);
    const int ref_best = static_cast<int>(std::max_element(ref, ref + 3) - ref);
    if (lib_best != ref_best) {
      ++differing;
      EXPECT_LE(ref[ref_best] - ref[lib_best], tie) << "bar " << i / 3 << " incoming " << i % 3;
    }
  }
  const double fraction = static_cast<double>(differing) / (n * 3);
  EXPECT_LE(fraction, precision == Precision::bf16 ? 0.03 : 0.002) << differing << " of " << n * 3;
  RecordProperty("differing_decisions", std::to_string(differing));

  // And the metrics of the oracle's own path, from its own Q-values, stay close.
  eval::BacktestEvaluator evaluator(space, features, stats, f.network, f.window, f.config);
  const WindowMetrics got = evaluator.evaluate(parameters);
  const std::vector<int> path =
      oracle::decisions(q_ref, n, 3, 3, static_cast<int>(f.config.flat_index()));
  const oracle::Metrics expected =
      oracle::metrics(window_close(f.bars, f.window), to_positions(path, f.config.positions),
                      f.config.cost, f.config.bars_per_year, 0.0);
  const double sharpe_tolerance = precision == Precision::bf16 ? 0.25 : 0.02;
  EXPECT_NEAR(got.sharpe, expected.sharpe, sharpe_tolerance);
  EXPECT_NEAR(got.turnover, expected.turnover, precision == Precision::bf16 ? 0.05 : 0.005);
}

INSTANTIATE_TEST_SUITE_P(Precisions, EndToEnd, ::testing::Values(Precision::fp32, Precision::bf16),
                         [](const auto& info) { return std::string(to_string(info.param)); });

// --- the parallel position scan equals the sequential loop on adversarial inputs ----------

enum class Crafted { flip_every_bar, all_actions_equal, long_flat_stretches };

// Parameters of a one-hidden-layer network (hidden width 3) whose decisions follow a
// chosen pattern, exactly representable in every precision.
std::vector<float> crafted(const nn::ParameterLayout& layout, Crafted kind) {
  std::vector<float> p(layout.size(), 0.0f);
  const nn::Tensor& w1 = layout.weight(0);
  const nn::Tensor& b1 = layout.bias(0);
  const nn::Tensor& wq = layout.weight(1);
  const nn::Tensor& bq = layout.bias(1);
  const std::size_t features = layout.spec().features;
  auto w1_at = [&](std::size_t row, std::size_t col) -> float& {
    return p[w1.offset + row * w1.cols + col];
  };
  auto wq_at = [&](std::size_t row, std::size_t col) -> float& {
    return p[wq.offset + row * wq.cols + col];
  };
  switch (kind) {
    case Crafted::flip_every_bar:
      // h_j = incoming position j; from short or flat go long, from long go short.
      for (std::size_t j = 0; j < 3; ++j)
        w1_at(features + j, j) = 1.0f;
      wq_at(0, 2) = 1.0f;
      wq_at(1, 2) = 1.0f;
      wq_at(2, 0) = 1.0f;
      break;
    case Crafted::all_actions_equal:
      break;  // Q = 0 everywhere: every tie goes to action 0
    case Crafted::long_flat_stretches:
      // h_0 = relu(ret_0 - 1.5) (standardized): go long only after a large up move, else flat.
      w1_at(0, 0) = 1.0f;
      p[b1.offset + 0] = -1.5f;
      wq_at(0, 2) = 16.0f;
      p[bq.offset + 1] = 0.0078125f;
      break;
  }
  return p;
}

TEST(PositionScan, EqualsTheSequentialLoopOnAdversarialAndRandomPolicies) {
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE(testing::seed_note(seed));
  Fixture f(seed, 6000);
  f.network.hidden = {3};
  const ExecSpace space;
  data::FeatureSet features(space, f.bars, f.spec);
  const data::FeatureStats stats = features.fit(f.train.begin, f.train.end);
  const nn::ParameterLayout layout(f.network);
  const std::size_t n = f.window.returns(), policies = 64;
  std::vector<std::vector<float>> rows = {crafted(layout, Crafted::flip_every_bar),
                                          crafted(layout, Crafted::all_actions_equal),
                                          crafted(layout, Crafted::long_flat_stretches)};
  for (std::size_t k = rows.size(); k < policies; ++k)
    rows.push_back(nn::initial_parameters(layout, seed + k));
  const auto device_rows = upload_rows(rows);

  eval::QPolicy policy(space, f.network, f.config.precision, features, stats, policies,
                       f.config.chunk_bars, n, f.config.flat_index());
  policy.enqueue(space, device_rows, f.window.begin, n);
  for (std::size_t k = 0; k < policies; ++k) {
    // The Q-values of policy k from the same batched products that made the paths.
    const std::vector<float> q = policy.q_values(space, device_rows, k, f.window.begin, n);
    const std::vector<int> expected =
        oracle::decisions(std::vector<double>(q.begin(), q.end()), n, 3, 3, 1);
    auto got = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), policy.path(k, n));
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < n; ++i)
      mismatches += got(i) != expected[i];
    ASSERT_EQ(mismatches, 0u) << "policy " << k;
    if (k == 0) {
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_EQ(expected[i], i % 2 == 0 ? 2 : 0) << "flip pattern at " << i;
    }
    if (k == 1) {
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_EQ(expected[i], 0);
    }
    if (k == 2) {
      const auto longs = std::count(expected.begin(), expected.end(), 2);
      EXPECT_GT(longs, 0);
      EXPECT_LT(longs, static_cast<long>(n / 5)) << "mostly flat";
    }
  }
}

// --- evaluate_many, walk-forward and the recorded path agree with evaluate ----------------

// evaluate_many runs each policy's network on the same data as evaluate does, with every
// product batched over the policies. The vendor library may pick another algorithm (another
// summation order) for a batch than for a single product, so Q-values agree to the
// precision's rounding, not bit for bit, and a decision may flip at a near-tie. Checked:
// each policy's batched metrics against the oracle on that run's own Q-values (exactly),
// and the batched Q-values against single-policy ones (within rounding).
// Every evaluation that reports or deploys computes the decision a policy file defines and the
// ONNX export writes, in float32 products, on every backend: a backtest's and act's default,
// and a run's validation and test window whatever precision its learning step takes.
TEST(BacktestConfig, EvaluatesInFloat32WhateverTheTrainingTakes) {
  EXPECT_EQ(eval::BacktestConfig{}.precision, Precision::fp32);
  for (const Precision training : {Precision::fp32, Precision::tf32, Precision::bf16}) {
    train::TrainConfig config;
    config.precision = training;
    EXPECT_EQ(train::backtest_config(config, {-1.0, 0.0, 1.0}).precision, Precision::fp32);
  }
}

TEST(BacktestEvaluator, ManyPoliciesMatchTheOracleAndSinglePolicyQValues) {
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE(testing::seed_note(seed));
  Fixture f(seed, 3000);
  const ExecSpace space;
  data::FeatureSet features(space, f.bars, f.spec);
  const data::FeatureStats stats = features.fit(f.train.begin, f.train.end);
  const nn::ParameterLayout layout(f.network);
  const std::size_t policies = 8, n = f.window.returns();
  std::vector<std::vector<float>> rows;
  for (std::size_t k = 0; k < policies; ++k)
    rows.push_back(nn::initial_parameters(layout, seed * 31 + k));
  const auto device_rows = upload_rows(rows);
  eval::BacktestEvaluator many(space, features, stats, f.network, f.window, f.config, policies);
  const std::vector<WindowMetrics> together = many.evaluate_many(device_rows);
  ASSERT_EQ(together.size(), policies);
  eval::QPolicy batched(space, f.network, f.config.precision, features, stats, policies,
                        f.config.chunk_bars, n, f.config.flat_index());
  eval::QPolicy single(space, f.network, f.config.precision, features, stats, 1,
                       f.config.chunk_bars, n, f.config.flat_index());
  const double tolerance = f.config.precision == Precision::bf16 ? 2e-2 : 1e-5;
  for (std::size_t k = 0; k < policies; ++k) {
    const std::vector<float> q = batched.q_values(space, device_rows, k, f.window.begin, n);
    const std::vector<int> path = oracle::decisions(std::vector<double>(q.begin(), q.end()), n, 3,
                                                    3, static_cast<int>(f.config.flat_index()));
    expect_metrics(
        together[k],
        oracle::metrics(window_close(f.bars, f.window), to_positions(path, f.config.positions),
                        f.config.cost, f.config.bars_per_year, 0.0),
        1e-12);
    const auto one = upload(rows[k]);
    const std::vector<float> q_single = single.q_values(
        space, eval::parameter_rows(one.data(), 1, layout.size()), 0, f.window.begin, n);
    double worst = 0.0, scale = 0.0;
    for (std::size_t i = 0; i < q.size(); ++i) {
      worst = std::max(worst, std::fabs(static_cast<double>(q[i]) - q_single[i]));
      scale = std::max(scale, std::fabs(static_cast<double>(q_single[i])));
    }
    EXPECT_LE(worst, tolerance * scale) << "policy " << k;
  }
}

// Policies whose parameter vectors lie a padded stride apart (a population's), as one
// device buffer, and as ParameterRows over it.
struct PaddedRows {
  Kokkos::View<float*, DeviceMemory> buffer;
  eval::ParameterRows rows;
};
PaddedRows padded_rows(const nn::ParameterLayout& layout, std::uint64_t seed, std::size_t count) {
  const std::size_t p = layout.size(), stride = p + 37;
  std::vector<float> all(count * stride, std::numeric_limits<float>::quiet_NaN());
  for (std::size_t k = 0; k < count; ++k) {
    const std::vector<float> one = nn::initial_parameters(layout, seed + k);
    std::copy(one.begin(), one.end(), all.begin() + static_cast<std::ptrdiff_t>(k * stride));
  }
  PaddedRows r{upload(all), {}};
  r.rows = eval::parameter_rows(r.buffer.data(), count, p, stride);
  return r;
}

// Every policy on every window of a walk forward, from parameter rows a padded stride apart
// (the padding NaN, so that a read of it would show), equals each policy on that window
// alone.
TEST(BacktestEvaluator, WalkForwardEqualsEvaluatorsOnEachWindow) {
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE(testing::seed_note(seed));
  Fixture f(seed, 3000);
  const ExecSpace space;
  data::FeatureSet features(space, f.bars, f.spec);
  const data::FeatureStats stats = features.fit(f.train.begin, f.train.end);
  const nn::ParameterLayout layout(f.network);
  const std::size_t policies = 3;
  const PaddedRows parameters = padded_rows(layout, seed, policies);
  eval::BacktestEvaluator evaluator(space, features, stats, f.network, f.window, f.config,
                                    policies);
  const std::size_t third = (f.window.end - f.window.begin) / 3;
  const std::vector<eval::BarRange> windows = {{f.window.begin, f.window.begin + third},
                                               {f.window.begin + third, f.window.begin + 2 * third},
                                               {f.window.begin + 2 * third, f.window.end}};
  const std::vector<std::vector<WindowMetrics>> walk =
      evaluator.walk_forward(parameters.rows, windows);
  ASSERT_EQ(walk.size(), 3u);
  for (std::size_t w = 0; w < windows.size(); ++w) {
    ASSERT_EQ(walk[w].size(), policies);
    eval::BacktestEvaluator alone(space, features, stats, f.network, windows[w], f.config);
    for (std::size_t k = 0; k < policies; ++k) {
      const auto one = upload(nn::initial_parameters(layout, seed + k));
      expect_same(walk[w][k], alone.evaluate(one));
    }
  }
  EXPECT_THROW(evaluator.walk_forward(parameters.rows, {{f.window.begin - 1, f.window.end}}),
               InputError);
}

// The recorded evaluation of several policies (rows a padded stride apart) equals
// evaluate_many on the same weights, follows new weights on every call, and refuses another
// number of policies than it recorded.
TEST(BacktestEvaluator, GraphedEvaluationEqualsEvaluateAndFollowsNewWeights) {
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE(testing::seed_note(seed));
  Fixture f(seed, 3000);
  exec::StreamSpace stream;  // on CUDA, evaluate_graphed needs an instance with its own stream
  data::FeatureSet features(stream.space(), f.bars, f.spec);
  const data::FeatureStats stats = features.fit(f.train.begin, f.train.end);
  const nn::ParameterLayout layout(f.network);
  const std::size_t policies = 3;
  eval::BacktestEvaluator evaluator(stream.space(), features, stats, f.network, f.window, f.config,
                                    policies);
  for (std::uint64_t round = 0; round < 3; ++round) {
    const PaddedRows parameters = padded_rows(layout, seed + 10 * round, policies);
    const std::vector<WindowMetrics> graphed = evaluator.evaluate_graphed(parameters.rows);
    const std::vector<WindowMetrics> plain = evaluator.evaluate_many(parameters.rows);
    ASSERT_EQ(graphed.size(), policies);
    for (std::size_t k = 0; k < policies; ++k)
      expect_same(graphed[k], plain[k]);
  }
  const PaddedRows two = padded_rows(layout, seed, 2);
  EXPECT_THROW(evaluator.evaluate_graphed(two.rows), InputError);
}

// --- metric edge cases on hand-made paths ---------------------------------------------------

struct PathCase {
  std::vector<double> close;
  std::vector<int> path;  // indices into {-1, 0, 1}
};

WindowMetrics run_path(const PathCase& c, const eval::BacktestConfig& config) {
  const ExecSpace space;
  eval::PathEvaluator evaluator(space, upload(c.close), config, c.path.size());
  std::vector<std::int8_t> path(c.path.begin(), c.path.end());
  return evaluator.evaluate(0, upload(path));
}

oracle::Metrics oracle_path(const PathCase& c, const eval::BacktestConfig& config) {
  return oracle::metrics(c.close, to_positions(c.path, config.positions), config.cost,
                         config.bars_per_year, config.risk_free);
}

TEST(Metrics, EdgeCasesMatchTheOracleAndTheDefinitions) {
  eval::BacktestConfig config;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  (void)nan;
  // N = 1: no standard deviation, hence no Sharpe.
  {
    const PathCase c{{100, 101}, {2}};
    const WindowMetrics m = run_path(c, config);
    expect_metrics(m, oracle_path(c, config), 1e-12);
    EXPECT_TRUE(std::isnan(m.sharpe));
    EXPECT_TRUE(std::isnan(m.annual_volatility));
  }
  // Flat throughout: zero variance, no trades, no downside.
  {
    const PathCase c{{100, 101, 99, 102, 98}, {1, 1, 1, 1}};
    const WindowMetrics m = run_path(c, config);
    expect_metrics(m, oracle_path(c, config), 1e-12);
    EXPECT_TRUE(std::isnan(m.sharpe));
    EXPECT_TRUE(std::isnan(m.sortino));
    EXPECT_TRUE(std::isnan(m.calmar));
    EXPECT_EQ(m.trades_closed, 0);
    EXPECT_TRUE(std::isnan(m.win_rate));
    EXPECT_TRUE(std::isnan(m.profit_factor));
    EXPECT_EQ(m.max_drawdown, 0.0);
    EXPECT_EQ(m.exposure, 0.0);
  }
  // Only winning trades: profit factor is infinite.
  {
    const PathCase c{{100, 110, 121, 133, 146, 160, 176}, {2, 1, 2, 1, 2, 1}};
    const WindowMetrics m = run_path(c, config);
    expect_metrics(m, oracle_path(c, config), 1e-12);
    EXPECT_EQ(m.trades_closed, 3);
    EXPECT_EQ(m.win_rate, 1.0);
    EXPECT_TRUE(std::isinf(m.profit_factor) && m.profit_factor > 0);
  }
  // Only losing trades, and a drawdown from the very first bar.
  {
    const PathCase c{{100, 90, 81, 73, 66, 59}, {2, 1, 2, 1, 2}};
    const WindowMetrics m = run_path(c, config);
    expect_metrics(m, oracle_path(c, config), 1e-12);
    EXPECT_EQ(m.trades_closed, 2);  // the third long is still open at the end
    EXPECT_EQ(m.win_rate, 0.0);
    EXPECT_EQ(m.profit_factor, 0.0);
    EXPECT_LT(m.max_drawdown, -0.09);
  }
  // Flips, size changes and a trade left open at the end; a risk-free rate.
  {
    eval::BacktestConfig sized = config;
    sized.positions = {-1.0, -0.5, 0.0, 0.5, 1.0};
    sized.risk_free = 0.0001;
    const PathCase c{{100, 101, 99, 98, 103, 104, 102, 101, 105, 107}, {4, 3, 0, 1, 2, 4, 4, 0, 3}};
    expect_metrics(run_path(c, sized), oracle_path(c, sized), 1e-12);
  }
}

TEST(Metrics, RandomPathsMatchTheOracle) {
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE(testing::seed_note(seed));
  std::mt19937_64 rng(seed);
  data::SynthConfig synth;
  synth.bars = 20001;
  synth.seed = seed;
  const data::Bars bars = data::generate_bars(synth);
  eval::BacktestConfig config;
  for (double stay : {0.0, 0.5, 0.95, 0.999}) {
    PathCase c{bars.close, std::vector<int>(bars.size() - 1)};
    std::uniform_real_distribution<double> u(0.0, 1.0);
    int current = 1;
    for (int& p : c.path) {
      if (u(rng) >= stay)
        current = static_cast<int>(rng() % 3);
      p = current;
    }
    expect_metrics(run_path(c, config), oracle_path(c, config), 1e-12);
  }
}

// Paths over a window of several blocks (kBlockBars bars a team), evaluated together in one
// launch: each gets the numbers it gets alone, bit for bit (the cut into blocks depends on the
// window alone), and the oracle's; the per-bar returns left for the selection statistics are
// the ones the metrics are made from.
TEST(Metrics, PathsTogetherGetTheirNumbersAloneAcrossBlocks) {
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE(testing::seed_note(seed));
  std::mt19937_64 rng(seed);
  const std::size_t n = 3 * eval::kBlockBars + 17, count = 5;
  data::SynthConfig synth;
  synth.bars = n + 1;
  synth.seed = seed;
  const data::Bars bars = data::generate_bars(synth);
  const eval::BacktestConfig config;
  std::vector<std::int8_t> all(count * n);
  for (std::size_t k = 0; k < count; ++k) {
    int current = 1;
    for (std::size_t i = 0; i < n; ++i) {
      if (rng() % (k + 2) == 0)
        current = static_cast<int>(rng() % 3);
      all[k * n + i] = static_cast<std::int8_t>(current);
    }
  }
  const ExecSpace space;
  const auto close = upload(bars.close);
  const auto paths = upload(all);
  const eval::MetricsEngine engine(space, close, config, n, count);
  Kokkos::View<WindowMetrics*, DeviceMemory> results("results", count);
  Kokkos::View<double*, DeviceMemory> returns("returns", count * n);
  engine.enqueue_returns(space, 0, eval::Paths{paths, n, count, n}, results, returns.data(), n);
  const auto together = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), results);
  const auto per_bar = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), returns);
  eval::PathEvaluator alone(space, close, config, n);
  for (std::size_t k = 0; k < count; ++k) {
    SCOPED_TRACE("path " + std::to_string(k));
    const std::vector<int> path(all.begin() + k * n, all.begin() + (k + 1) * n);
    const auto one = Kokkos::subview(paths, std::make_pair(k * n, (k + 1) * n));
    expect_same(together(k), alone.evaluate(0, one));
    expect_metrics(together(k),
                   oracle::metrics(bars.close, to_positions(path, config.positions), config.cost,
                                   config.bars_per_year, config.risk_free),
                   1e-12);
    const eval::PathDetail detail = alone.detail(0, one);
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_EQ(per_bar(k * n + i), detail.returns[i]) << "bar " << i;
  }
}

// A policy that profits from almost every bar of a long window: its equity passes the largest
// double (near 1e400 here), so total_return is +inf, as the true value is, while log_return,
// CAGR, Calmar and every other metric stay finite and agree with the long double oracle.
TEST(Metrics, AWindowWhoseEquityPassesTheLargestDoubleStaysFinite) {
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE(testing::seed_note(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> move(0.3, 0.9);
  PathCase c{{100.0}, {}};
  for (int t = 0; t < 3000; ++t) {
    // The price rises or falls by 30-90%; the policy is long before rises and short before
    // falls, but one bar in twenty it guesses wrong.
    const bool up = rng() % 2 == 0, right = rng() % 20 != 0;
    const double factor = up ? 1.0 + move(rng) : 1.0 / (1.0 + move(rng));
    c.path.push_back(up == right ? 2 : 0);
    c.close.push_back(c.close.back() * factor);
  }
  eval::BacktestConfig config;
  const oracle::Metrics expected = oracle_path(c, config);
  ASSERT_TRUE(std::isinf(expected.total_return)) << "the window must pass the largest double";
  ASSERT_GT(expected.log_return, std::log(1e308));
  const WindowMetrics m = run_path(c, config);
  expect_metrics(m, expected, 1e-12);
  EXPECT_TRUE(std::isinf(m.total_return) && m.total_return > 0);
  for (double finite : {m.log_return, m.cagr, m.calmar, m.sharpe, m.sortino, m.max_drawdown,
                        m.annual_volatility, m.expectancy}) {
    EXPECT_TRUE(std::isfinite(finite)) << finite;
  }
  EXPECT_LT(m.max_drawdown, 0.0);
}

TEST(BuiltinPolicies, PathsHoldWhatTheyPromise) {
  const std::uint64_t seed = testing::test_seed();
  data::SynthConfig synth;
  synth.bars = 2000;
  synth.seed = seed;
  const data::Bars bars = data::generate_bars(synth);
  eval::BacktestConfig config;
  const ExecSpace space;
  const auto close = upload(bars.close);
  const auto ofi = upload(bars.ofi);
  const eval::BarRange all{0, bars.size()};
  eval::PathEvaluator evaluator(space, close, config, all.returns());
  for (auto policy : {eval::BuiltinPolicy::buy_and_hold, eval::BuiltinPolicy::flat,
                      eval::BuiltinPolicy::sign_of_ofi}) {
    const auto path = eval::builtin_path(space, policy, ofi, all, config);
    std::vector<double> p(all.returns());
    for (std::size_t t = 0; t < p.size(); ++t) {
      p[t] = policy == eval::BuiltinPolicy::buy_and_hold ? 1.0
             : policy == eval::BuiltinPolicy::flat       ? 0.0
                                                         : (bars.ofi[t] > 0) - (bars.ofi[t] < 0);
    }
    expect_metrics(evaluator.evaluate(0, path),
                   oracle::metrics(bars.close, p, config.cost, config.bars_per_year, 0.0), 1e-12);
  }
  EXPECT_THROW(eval::builtin_path(space, eval::BuiltinPolicy::sign_of_ofi,
                                  Kokkos::View<double*, DeviceMemory>(), all, config),
               InputError);
  EXPECT_THROW(eval::parse_builtin_policy("martingale"), InputError);
}

// --- features ------------------------------------------------------------------------------------

TEST(Features, RawValuesAndTrainingStatisticsMatchTheOracle) {
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE(testing::seed_note(seed));
  Fixture f(seed, 3000);
  const ExecSpace space;
  data::FeatureSet features(space, f.bars, f.spec);
  const data::FeatureStats stats = features.fit(f.train.begin, f.train.end);
  auto standardized =
      Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), features.standardized_float(stats));
  const std::vector<double> expected = oracle_features(f.bars, f.spec, f.train, f.window);
  const std::size_t f_count = f.spec.count();
  double worst = 0.0;
  for (std::size_t t = f.window.begin; t < f.window.end; ++t) {
    for (std::size_t j = 0; j < f_count; ++j) {
      worst = std::max(
          worst, std::fabs(standardized(t, j) - expected[(t - f.window.begin) * f_count + j]));
    }
  }
  // Raw features are stored as float: about 1e-7 relative, a few 1e-6 after standardizing
  // values of up to ten standard deviations.
  EXPECT_LT(worst, 2e-5);
  EXPECT_EQ(f.spec.names().size(), f_count);
  EXPECT_EQ(f.spec.names()[f.spec.return_window], "vol");
}

TEST(Features, TooFewBarsAndMissingColumnsAreInputErrors) {
  data::SynthConfig synth;
  synth.bars = 10;
  const data::Bars bars = data::generate_bars(synth);
  data::FeatureSpec spec;
  spec.return_window = 16;
  spec.volatility_window = 16;
  EXPECT_THROW(data::check_features_available(spec, bars, 2), InputError);
  spec.return_window = 2;
  spec.volatility_window = 2;
  spec.extra = {"missing"};
  EXPECT_THROW(data::check_features_available(spec, bars, 2), InputError);
}

}  // namespace
}  // namespace dqntrader

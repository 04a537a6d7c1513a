// Policies of every shape a policy file holds, on bars with an ofi column and extra columns:
// plain and dueling heads, 1 to 4 hidden layers, with and without ofi and extra features, three
// and five positions. Their parameters are freshly drawn (He-uniform, as training starts), their
// feature statistics those of the bars' first half, so that Q-values are of a trained policy's
// size. Shared by the tests of `dqntrader act` and of the ONNX export, with the harness they run
// commands in (CommandTest).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backends/execution.hpp"
#include "dqntrader/data/csv_reader.hpp"
#include "dqntrader/data/features.hpp"
#include "dqntrader/data/synthetic.hpp"
#include "dqntrader/eval/policy_file.hpp"
#include "dqntrader/nn/network_spec.hpp"
#include "test_support.hpp"

namespace dqntrader::testing {

/// What a command returned and printed.
struct CommandResult {
  int code;
  std::string out, err;
};

/// Each non-empty line of text, as JSON.
inline std::vector<nlohmann::json> json_lines(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty())
      out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

/// Two decision lists (JSON lines of `dqntrader act`, or of a reader or runtime giving the
/// same fields) agree: the same bars and positions, Q-values within 1e-5 of the largest
/// |Q| of the list (float rounding in sums of terms of that size: a row whose Q-values nearly
/// cancel keeps the rounding of its terms); an action may differ only where the row's two
/// largest Q-values lie within that of each other (float rounding decides such a tie), and
/// then the rows after it are not compared (their incoming positions differ). Returns the
/// rows compared.
inline std::size_t expect_same_decisions(const std::vector<nlohmann::json>& got,
                                         const std::vector<nlohmann::json>& expected,
                                         const std::string& what) {
  EXPECT_EQ(got.size(), expected.size()) << what;
  const std::size_t n = std::min(got.size(), expected.size());
  double largest = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    for (double v : expected[i]["q"].get<std::vector<double>>())
      largest = std::max(largest, std::fabs(v));
  }
  const double tolerance = 1e-5 * largest;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& g = got[i];
    const auto& e = expected[i];
    EXPECT_EQ(g["bar"], e["bar"]) << what << " row " << i;
    const auto q = e["q"].get<std::vector<double>>(), r = g["q"].get<std::vector<double>>();
    EXPECT_EQ(q.size(), r.size()) << what;
    for (std::size_t a = 0; a < q.size() && a < r.size(); ++a)
      EXPECT_NEAR(r[a], q[a], tolerance) << what << " bar " << e["bar"] << " action " << a;
    if (g["action"] != e["action"]) {
      std::vector<double> sorted = q;
      std::sort(sorted.rbegin(), sorted.rend());
      EXPECT_LE(sorted[0] - sorted[1], 2 * tolerance)
          << what << " bar " << e["bar"] << ": actions differ without a tie";
      return i;
    }
    EXPECT_EQ(g["position"], e["position"]) << what << " row " << i;
  }
  return n;
}

/// A table of decisions at every bar with every incoming position (an ONNX runtime's, or the
/// reference reader's --every-position: rows bar by bar from `first`, the positions in order)
/// agrees with act's path on every row act took: the table's Q-values for that bar and incoming
/// position are act's within 1e-5 of the largest |Q| of the path (float rounding in sums of
/// terms of that size), and its action is act's unless the row's two largest Q-values lie
/// within that of each other (float rounding decides such a tie). Every row is compared; the
/// rows whose actions differed (near ties) are returned.
inline std::size_t expect_rows_agree(const std::vector<nlohmann::json>& table,
                                     const std::vector<nlohmann::json>& act,
                                     const std::vector<double>& positions, std::size_t first,
                                     const std::string& what) {
  const std::size_t K = positions.size();
  EXPECT_EQ(table.size(), act.size() * K) << what;
  double largest = 0.0;
  for (const nlohmann::json& row : act) {
    for (double v : row["q"].get<std::vector<double>>())
      largest = std::max(largest, std::fabs(v));
  }
  const double tolerance = 1e-5 * largest;
  std::size_t ties = 0;
  for (const nlohmann::json& row : act) {
    const auto incoming = static_cast<std::size_t>(
        std::find(positions.begin(), positions.end(), row["incoming"].get<double>()) -
        positions.begin());
    const std::size_t index = (row["bar"].get<std::size_t>() - first) * K + incoming;
    if (index >= table.size()) {
      ADD_FAILURE() << what << ": no row for bar " << row["bar"];
      break;
    }
    const nlohmann::json& got = table[index];
    EXPECT_EQ(got["bar"], row["bar"]) << what;
    EXPECT_EQ(got["incoming"].get<std::size_t>(), incoming) << what;
    const auto q = row["q"].get<std::vector<double>>(), r = got["q"].get<std::vector<double>>();
    EXPECT_EQ(q.size(), r.size()) << what;
    for (std::size_t a = 0; a < q.size() && a < r.size(); ++a)
      EXPECT_NEAR(r[a], q[a], tolerance) << what << " bar " << row["bar"] << " action " << a;
    if (got["action"] != row["action"]) {
      std::vector<double> sorted = q;
      std::sort(sorted.rbegin(), sorted.rend());
      EXPECT_LE(sorted[0] - sorted[1], 2 * tolerance)
          << what << " bar " << row["bar"] << ": actions differ without a tie";
      ++ties;
    }
  }
  return ties;
}

/// A test with a temporary directory of its own (named for the suite and the test's seed,
/// removed after it) that runs commands through /bin/sh, their output into files there.
class CommandTest : public ::testing::Test {
 protected:
  explicit CommandTest(std::string suite) : m_suite(std::move(suite)) {}
  void SetUp() override {
    m_seed = test_seed();
    m_dir = std::filesystem::temp_directory_path() /
            ("dqntrader-" + m_suite + "-" + std::to_string(m_seed));
    std::filesystem::create_directories(m_dir);
  }
  void TearDown() override { std::filesystem::remove_all(m_dir); }

  std::string path(const std::string& name) const { return (m_dir / name).string(); }

  /// A command line; prefix goes before it (a pipe into it).
  CommandResult shell(const std::string& command, const std::string& prefix = "") const {
    const std::string out = path("stdout.txt"), err = path("stderr.txt");
    const int status = std::system((prefix + command + " >" + out + " 2>" + err).c_str());
    return CommandResult{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
  }
  /// dqntrader with these arguments.
  CommandResult cli(const std::string& arguments, const std::string& prefix = "") const {
    return shell(std::string(DQNTRADER_CLI_PATH) + " " + arguments, prefix);
  }
  /// bars as bars.csv, the fixture policies drawn for them beside it, and a run trained on them
  /// by `dqntrader train` with train_flags: the policy files, the run's best last (a failed
  /// training is a failure of the test, its best policy then missing).
  std::vector<std::string> write_policies(const data::Bars& bars,
                                          const std::string& train_flags) const;

  std::uint64_t m_seed = 0;
  std::filesystem::path m_dir;

 private:
  std::string m_suite;
};

/// The synthetic market (with ofi) and two extra columns, f_x (a random walk) and f_y (noise).
inline data::Bars fixture_bars(std::size_t count, std::uint64_t seed) {
  data::SynthConfig synth;
  synth.bars = count;
  synth.seed = seed;
  data::Bars bars = data::generate_bars(synth);
  std::mt19937_64 rng(seed ^ 0xF1C7);
  std::normal_distribution<double> normal(0.0, 1.0);
  data::NamedColumn x{"f_x", {}}, y{"f_y", {}};
  double walk = 0.0;
  for (std::size_t t = 0; t < count; ++t) {
    walk += 0.1 * normal(rng);
    x.values.push_back(walk);
    y.values.push_back(normal(rng));
  }
  bars.extra = {x, y};
  return bars;
}

struct FixturePolicy {
  std::string name;
  eval::PolicyFile file;
};

/// One policy: features resolved on bars (ofi when ofi_window > 0; the named extra columns),
/// statistics of the first half of bars, parameters drawn from seed.
inline FixturePolicy fixture_policy(const std::string& name, const data::Bars& bars,
                                    std::vector<std::size_t> hidden, bool dueling, int ofi_window,
                                    std::vector<std::string> extra, std::vector<double> positions,
                                    std::uint64_t seed) {
  FixturePolicy p;
  p.name = name;
  eval::PolicyFile& f = p.file;
  f.features.return_window = 12;
  f.features.volatility_window = 10;
  f.features.ofi_window = ofi_window;
  f.features.extra = extra;
  f.network.features = f.features.count();
  f.network.positions = f.network.actions = positions.size();
  f.network.hidden = hidden;
  f.network.dueling = dueling;
  f.positions = positions;
  exec::StreamSpace stream;
  const data::FeatureSet features(stream.space(), bars, f.features);
  f.stats = features.fit(f.features.warmup(), bars.size() / 2);
  f.parameters = nn::initial_parameters(nn::ParameterLayout(f.network), seed);
  f.info = {{"fixture", name}};
  return p;
}

/// A drawn policy of one hidden layer (two units at least) and three positions made to follow
/// its first feature, a standardized return: the drawn weights scaled by 1/20, then Q(long) =
/// relu(x) - relu(-x) = x and Q(short) = -x through the first two hidden units. Its decision
/// changes with the sign of a return, thousands of times over a few thousand bars, where a drawn
/// network may hold one position throughout.
inline FixturePolicy following_returns(FixturePolicy p) {
  const nn::ParameterLayout layout(p.file.network);
  std::vector<float>& w = p.file.parameters;
  for (float& v : w)
    v /= 20.0f;
  const nn::Tensor &in = layout.weight(0), &head = layout.weight(1);
  w[in.offset + 0] = 1.0f;                    // unit 0: relu(x)
  w[in.offset + 1] = -1.0f;                   // unit 1: relu(-x)
  w[head.offset + 0 * head.cols + 2] = 1.0f;  // long
  w[head.offset + 1 * head.cols + 2] = -1.0f;
  w[head.offset + 0 * head.cols + 0] = -1.0f;  // short
  w[head.offset + 1 * head.cols + 0] = 1.0f;
  p.file.info = {{"fixture", p.name}, {"follows", "its first feature"}};
  return p;
}

/// The shapes of docs/POLICY.md, each drawn from seed; the first follows returns
/// (following_returns).
inline std::vector<FixturePolicy> fixture_policies(const data::Bars& bars, std::uint64_t seed) {
  return {
      following_returns(
          fixture_policy("plain-1-ofi", bars, {16}, false, 4, {}, {-1, 0, 1}, seed + 1)),
      fixture_policy("dueling-2-extra", bars, {32, 24}, true, 0, {"f_x"}, {-1, 0, 1}, seed + 2),
      fixture_policy("dueling-3-ofi-extras", bars, {24, 24, 16}, true, 2, {"f_x", "f_y"},
                     {-1, 0, 1}, seed + 3),
      fixture_policy("plain-4-five-positions", bars, {16, 16, 16, 16}, false, 0, {},
                     {-1, -0.5, 0, 0.5, 1}, seed + 4),
  };
}

inline std::vector<std::string> CommandTest::write_policies(const data::Bars& bars,
                                                            const std::string& train_flags) const {
  data::write_bars_csv(path("bars.csv"), bars);
  std::vector<std::string> policies;
  for (const FixturePolicy& p : fixture_policies(bars, m_seed)) {
    eval::write_policy(path(p.name + ".dqnpolicy"), p.file);
    policies.push_back(path(p.name + ".dqnpolicy"));
  }
  const CommandResult trained =
      cli("train --data " + path("bars.csv") + " " + train_flags + " --out " + path("run"));
  EXPECT_EQ(trained.code, 0) << trained.err;
  policies.push_back(path("run/best.dqnpolicy"));
  return policies;
}

}  // namespace dqntrader::testing

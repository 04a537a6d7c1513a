// The selection statistics (docs/METRICS.md) computed on the device against the float64
// oracle of tests/oracles/selection_statistics.py, written from the papers: on random return
// matrices, on the cases the literature names (noise: PBO near 0.5; one real edge among
// noise: PBO near 0, DSR above 0.95), on ties and returns that do not vary, and on a sweep's
// own members, whose per-bar returns `dqntrader backtest --returns` writes out.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "dqntrader/core/error.hpp"
#include "dqntrader/eval/selection_statistics.hpp"
#include "test_support.hpp"

namespace dqntrader {
namespace {

namespace fs = std::filesystem;
using testing::json_file;
using testing::slurp;

// Host matrix, one column a candidate.
struct Returns {
  std::size_t rows = 0, columns = 0;
  std::vector<double> values;  // column-major
  double& at(std::size_t i, std::size_t n) { return values[n * rows + i]; }
  double at(std::size_t i, std::size_t n) const { return values[n * rows + i]; }
};

Returns noise(std::size_t rows, std::size_t columns, std::uint64_t seed, std::size_t edge_column,
              double edge) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 0.01);
  Returns r{rows, columns, std::vector<double>(rows * columns)};
  for (std::size_t n = 0; n < columns; ++n) {
    for (std::size_t i = 0; i < rows; ++i)
      r.at(i, n) = normal(rng) + (n == edge_column ? edge * 0.01 : 0.0);
  }
  return r;
}

// The column with the largest per-bar Sharpe ratio, computed plainly.
std::size_t best_column(const Returns& r) {
  std::size_t best = 0;
  double best_sharpe = -INFINITY;
  for (std::size_t n = 0; n < r.columns; ++n) {
    double mean = 0.0;
    for (std::size_t i = 0; i < r.rows; ++i)
      mean += r.at(i, n);
    mean /= static_cast<double>(r.rows);
    double squares = 0.0;
    for (std::size_t i = 0; i < r.rows; ++i)
      squares += (r.at(i, n) - mean) * (r.at(i, n) - mean);
    const double sd = std::sqrt(squares / static_cast<double>(r.rows - 1));
    const double sharpe = sd > 0 ? mean / sd : 0.0;
    if (sharpe > best_sharpe) {
      best_sharpe = sharpe;
      best = n;
    }
  }
  return best;
}

eval::SelectionStatistics on_device(const Returns& r, std::size_t winner, std::size_t blocks) {
  ExecSpace space;
  eval::ReturnMatrix device("returns", r.rows, r.columns);
  auto host = Kokkos::create_mirror_view(device);
  for (std::size_t n = 0; n < r.columns; ++n) {
    for (std::size_t i = 0; i < r.rows; ++i)
      host(i, n) = r.at(i, n);
  }
  Kokkos::deep_copy(device, host);
  return eval::selection_statistics(space, device, winner, blocks);
}

class Selection : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir =
        fs::temp_directory_path() / ("dqntrader-selection-" + std::to_string(testing::test_seed()));
    fs::create_directories(m_dir);
  }
  void TearDown() override { fs::remove_all(m_dir); }

  // Runs a command line, its output into out.txt and err.txt; the exit status.
  int shell(const std::string& command) const {
    const int status = std::system(
        (command + " >" + (m_dir / "out.txt").string() + " 2>" + (m_dir / "err.txt").string())
            .c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // The oracle's statistics of a CSV matrix (arguments: --blocks, --winner, column choice).
  nlohmann::json oracle(const fs::path& csv, const std::string& arguments) const {
    const int code = shell(std::string(DQNTRADER_ORACLE_PYTHON3) + " " +
                           DQNTRADER_SELECTION_ORACLE + " " + csv.string() + " " + arguments);
    EXPECT_EQ(code, 0) << "the oracle needs " << DQNTRADER_ORACLE_PYTHON3
                       << " with numpy (Debian: python3-numpy): " << slurp(m_dir / "err.txt");
    return nlohmann::json::parse(slurp(m_dir / "out.txt"));
  }

  nlohmann::json oracle(const Returns& r, std::size_t winner, std::size_t blocks) const {
    const fs::path csv = m_dir / "matrix.csv";
    std::ofstream out(csv);
    for (std::size_t n = 0; n < r.columns; ++n)
      out << (n ? "," : "") << "c" << n;
    out << "\n";
    char number[32];
    for (std::size_t i = 0; i < r.rows; ++i) {
      for (std::size_t n = 0; n < r.columns; ++n) {
        std::snprintf(number, sizeof number, "%.17g", r.at(i, n));
        out << (n ? "," : "") << number;
      }
      out << "\n";
    }
    out.close();
    return oracle(csv,
                  "--blocks " + std::to_string(blocks) + " --winner " + std::to_string(winner));
  }

  fs::path m_dir;
};

double number(const nlohmann::json& v) {
  return v.is_null() ? NAN : v.get<double>();
}

// Every statistic of the device against the oracle's: the shares exactly (they count the same
// discrete decisions), the rest to 1e-9.
void expect_agree(const eval::SelectionStatistics& s, const nlohmann::json& o) {
  ASSERT_EQ(o.at("trials").get<std::size_t>(), s.trials);
  ASSERT_EQ(o.at("returns").get<std::size_t>(), s.returns);
  EXPECT_EQ(o.at("dropped").get<std::size_t>(), s.dropped);
  ASSERT_EQ(o.at("sharpes").size(), s.sharpes.size());
  for (std::size_t n = 0; n < s.sharpes.size(); ++n)
    EXPECT_NEAR(s.sharpes[n], number(o["sharpes"][n]), 1e-12) << "candidate " << n;
  EXPECT_NEAR(s.sharpe_variance, number(o["sharpe_variance"]),
              1e-9 * std::fabs(number(o["sharpe_variance"])));
  EXPECT_NEAR(s.skewness, number(o["skewness"]), 1e-9);
  EXPECT_NEAR(s.kurtosis, number(o["kurtosis"]), 1e-9);
  EXPECT_NEAR(s.expected_max_sharpe, number(o["expected_max_sharpe"]), 1e-9);
  EXPECT_NEAR(s.deflated_sharpe, number(o["deflated_sharpe"]), 1e-9);
  EXPECT_EQ(s.pbo, number(o["pbo"]));
  EXPECT_EQ(s.probability_of_loss, number(o["probability_of_loss"]));
  EXPECT_NEAR(s.slope, number(o["slope"]), 1e-9 * (1 + std::fabs(number(o["slope"]))));
  ASSERT_EQ(o.at("logits").size(), s.logits.size());
  for (std::size_t c = 0; c < s.logits.size(); ++c)
    ASSERT_NEAR(s.logits[c], number(o["logits"][c]), 1e-9) << "split " << c;
}

TEST_F(Selection, NoiseAndAnEdgeAmongNoiseAgreeWithTheOracle) {
  // 16 noise candidates, a window that does not divide into the blocks (3 rows dropped).
  const Returns pure = noise(2003, 16, 7, 16, 0.0);
  const std::size_t winner = best_column(pure);
  const eval::SelectionStatistics s = on_device(pure, winner, 16);
  expect_agree(s, oracle(pure, winner, 16));
  EXPECT_EQ(s.logits.size(), 12870u);
  EXPECT_EQ(s.dropped, 3u);
  // One candidate with a real edge (mean 0.2 standard deviations a bar) among them.
  const Returns edge = noise(2000, 16, 8, 5, 0.2);
  ASSERT_EQ(best_column(edge), 5u);
  const eval::SelectionStatistics e = on_device(edge, 5, 16);
  expect_agree(e, oracle(edge, 5, 16));
  EXPECT_LE(e.pbo, 0.05);
  EXPECT_GT(e.deflated_sharpe, 0.95);
}

TEST_F(Selection, TiesAndReturnsThatDoNotVaryAgreeWithTheOracle) {
  Returns r = noise(401, 6, 9, 6, 0.0);
  for (std::size_t i = 0; i < r.rows; ++i) {
    r.at(i, 2) = 0.0;         // flat: Sharpe ratio 0
    r.at(i, 4) = r.at(i, 1);  // a twin: ranks tie
  }
  for (std::size_t blocks : {2, 8}) {
    const eval::SelectionStatistics s = on_device(r, 1, blocks);
    expect_agree(s, oracle(r, 1, blocks));
    EXPECT_EQ(s.sharpes[2], 0.0);
  }
}

// The anchors of the literature on the device's own numbers: noise candidates overfit about
// half the time, whatever the draw; the best of noise rarely survives deflation.
TEST_F(Selection, NoiseOverfitsAboutHalfTheTimeAndItsBestIsNotDeflatedPast095) {
  double pbo = 0.0;
  std::size_t survivors = 0;
  const std::size_t draws = 12;
  for (std::size_t d = 0; d < draws; ++d) {
    const Returns r = noise(1000, 16, 100 + d, 16, 0.0);
    const eval::SelectionStatistics s = on_device(r, best_column(r), 10);
    pbo += s.pbo / static_cast<double>(draws);
    survivors += s.deflated_sharpe > 0.95 ? 1 : 0;
  }
  EXPECT_GT(pbo, 0.35);
  EXPECT_LT(pbo, 0.65);
  EXPECT_LE(survivors, 2u);
}

TEST_F(Selection, BadShapesAreInputErrors) {
  const Returns r = noise(100, 3, 1, 3, 0.0);
  EXPECT_THROW(on_device(noise(100, 1, 1, 1, 0.0), 0, 4), InputError);  // one candidate
  EXPECT_THROW(on_device(r, 3, 4), InputError);                         // no such winner
  EXPECT_THROW(on_device(r, 0, 5), InputError);                         // odd blocks
  EXPECT_THROW(on_device(r, 0, 26), InputError);                        // too many splits
  EXPECT_THROW(on_device(noise(1, 3, 1, 3, 0.0), 0, 2), InputError);    // one return
}

// Blocks too short for PBO leave the deflated Sharpe ratio, which does not depend on them:
// it is the oracle's, and PBO is NaN with a note saying why.
TEST_F(Selection, BlocksTooShortForPboKeepTheDeflatedSharpeRatio) {
  const Returns r = noise(7, 3, 1, 3, 0.0);  // blocks of 1 row
  const eval::SelectionStatistics s = on_device(r, 0, 4);
  EXPECT_NE(s.pbo_note.find("too few for 4 blocks"), std::string::npos) << s.pbo_note;
  EXPECT_TRUE(std::isnan(s.pbo) && std::isnan(s.probability_of_loss) && std::isnan(s.slope));
  EXPECT_TRUE(s.logits.empty());
  const nlohmann::json o = oracle(r, 0, 2);  // a block count the oracle can cut 7 rows into
  EXPECT_NEAR(s.expected_max_sharpe, number(o["expected_max_sharpe"]), 1e-9);
  EXPECT_NEAR(s.deflated_sharpe, number(o["deflated_sharpe"]), 1e-9);
  ASSERT_FALSE(std::isnan(s.deflated_sharpe));
}

// Candidates whose returns are equal on the out-of-sample blocks of a split but not on the
// others (here twins that differ on one block by an offset, which moves their whole-window
// means apart) have equal out-of-sample Sharpe ratios there: the ranks tie exactly, as in the
// oracle, which computes each split from its rows. Sums of deviations from each column's
// whole-window mean made the twins differ by rounding and missed these ties.
TEST_F(Selection, ReturnsEqualOutOfSampleTieExactly) {
  const std::size_t blocks = 16, pairs = 8, length = 64;
  Returns r = noise(blocks * length, 2 * pairs, 77, 2 * pairs, 0.0);
  std::mt19937_64 rng(78);
  for (std::size_t p = 0; p < pairs; ++p) {
    const std::size_t shifted = rng() % blocks;  // the one block the twins differ on
    const double offset = 0.002 * static_cast<double>(1 + p);
    for (std::size_t i = 0; i < r.rows; ++i) {
      r.at(i, 2 * p + 1) = r.at(i, 2 * p) * 1.7 + 3e-4 * static_cast<double>(p);
      r.at(i, 2 * p) = r.at(i, 2 * p + 1) + (i / length == shifted ? offset : 0.0);
    }
  }
  const std::size_t winner = best_column(r);
  const eval::SelectionStatistics s = on_device(r, winner, blocks);
  const nlohmann::json o = oracle(r, winner, blocks);
  ASSERT_EQ(o.at("logits").size(), s.logits.size());
  std::size_t differ = 0;
  for (std::size_t c = 0; c < s.logits.size(); ++c)
    differ += std::fabs(s.logits[c] - number(o["logits"][c])) > 1e-9 ? 1 : 0;
  EXPECT_EQ(differ, 0u) << "of " << s.logits.size() << " splits";
  EXPECT_EQ(s.pbo, number(o["pbo"]));
}

// A sweep's "selection" is the oracle's statistics of its members' best policies on the
// validation window, whose per-bar returns `dqntrader backtest --returns` writes out.
TEST_F(Selection, ASweepsStatisticsAreTheOraclesOnItsMembersReturns) {
  const std::string cli = std::string("OMP_NUM_THREADS=") +
                          std::to_string(Kokkos::DefaultHostExecutionSpace().concurrency()) + " " +
                          DQNTRADER_CLI_PATH;
  const std::string data = (m_dir / "bars.dqnbars").string();
  ASSERT_EQ(shell(cli + " synth --bars 6000 --seed 4 --out " + data), 0);
  const fs::path dir = m_dir / "sweep";
  ASSERT_EQ(shell(cli + " sweep --data " + data + " --out " + dir.string() +
                  " --epochs 2 --steps-per-epoch 40 --learning-starts 256 --environments 16 "
                  "--batch-size 32 --replay-capacity 4096 --probe-batch 32 --seeds 1-3 "
                  "--set learning-rate=1e-4,1e-3 --set hidden=16,8 --pbo-blocks 8"),
            0)
      << slurp(m_dir / "err.txt");
  EXPECT_NE(slurp(m_dir / "err.txt").find("how much of the winner is luck"), std::string::npos);
  const nlohmann::json board = json_file(dir / "leaderboard.json");
  const nlohmann::json& s = board.at("selection");
  ASSERT_EQ(s.at("trials"), 12);
  EXPECT_EQ(s.at("blocks"), 8);
  EXPECT_EQ(s.at("winner").at("member"), board["members"][0]["member"]);
  EXPECT_EQ(json_file(dir / "sweep.json").at("selection"), s);

  // The members' returns, in the matrix's column order, over the same window.
  std::string weights;
  std::size_t winner = 0;
  for (std::size_t c = 0; c < s["members"].size(); ++c) {
    const std::size_t id = s["members"][c].get<std::size_t>();
    if (id == s["winner"]["member"].get<std::size_t>())
      winner = c;
    weights += " --weights " +
               (dir / board["members"][0]["run"].get<std::string>()).parent_path().string() +
               "/m-" + std::string(4 - std::to_string(id).size(), '0') + std::to_string(id) +
               "/best.dqnpolicy";
  }
  const fs::path csv = m_dir / "returns.csv";
  ASSERT_EQ(shell(cli + " backtest --data " + data + weights + " --start " +
                  s["window"]["first_bar"].dump() + " --end " + s["window"]["last_bar"].dump() +
                  " --returns " + csv.string()),
            0)
      << slurp(m_dir / "err.txt");
  const nlohmann::json o =
      oracle(csv, "--blocks 8 --winner " + std::to_string(winner) + " --suffix :return");
  EXPECT_EQ(o.at("returns"), s["window"]["returns"]);
  EXPECT_NEAR(number(s["expected_max_sharpe"]), number(o["expected_max_sharpe"]), 1e-9);
  EXPECT_NEAR(number(s["deflated_sharpe"]), number(o["deflated_sharpe"]), 1e-9);
  EXPECT_EQ(number(s["pbo"]), number(o["pbo"]));
  EXPECT_EQ(number(s["probability_of_loss"]), number(o["probability_of_loss"]));
  EXPECT_NEAR(number(s["slope"]), number(o["slope"]), 1e-9 * (1 + std::fabs(number(o["slope"]))));
  // The logits as a histogram of the values that occur, each with its count of splits.
  std::vector<double> logits;
  for (const nlohmann::json& l : o["logits"])
    logits.push_back(number(l));
  std::sort(logits.begin(), logits.end());
  std::vector<std::pair<double, std::size_t>> histogram;
  for (double l : logits) {
    if (histogram.empty() || std::fabs(l - histogram.back().first) > 1e-9)
      histogram.push_back({l, 0});
    ++histogram.back().second;
  }
  ASSERT_EQ(s["logit_histogram"].size(), histogram.size()) << s["logit_histogram"].dump();
  for (std::size_t v = 0; v < histogram.size(); ++v) {
    EXPECT_NEAR(number(s["logit_histogram"][v]["logit"]), histogram[v].first, 1e-9);
    EXPECT_EQ(s["logit_histogram"][v]["splits"], histogram[v].second);
  }
  EXPECT_NEAR(number(s["winner"]["sharpe_per_bar"]), number(o["sharpes"][winner]), 1e-12);
  // The winner's per-bar Sharpe ratio, annualised, is its validation Sharpe (rf = 0, one
  // validation window).
  EXPECT_NEAR(number(s["winner"]["sharpe_per_bar"]) * std::sqrt(252.0),
              number(s["winner"]["validation_sharpe"]), 1e-9);
}

}  // namespace
}  // namespace dqntrader

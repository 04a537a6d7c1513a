// `dqntrader export --onnx`, checked by code dqntrader did not write: ONNX's own checker
// (python3-onnx, tests/onnx/check_model.py) accepts every exported model, and onnxruntime
// (onnxruntime-node, tests/onnx/run_model.js) executes it over 5,000 bars of policies of every
// shape, carrying its own position: its Q-values agree with `dqntrader act`'s within 1e-5 of
// each row's largest and its actions are act's. Built with DQNTRADER_ENABLE_ONNX only.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
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

class Export : public testing::CommandTest {
 protected:
  Export() : CommandTest("export") {}
};

TEST_F(Export, OnnxRuntimeTakesActsDecisionsOverEveryShape) {
  SCOPED_TRACE(testing::seed_note(m_seed));
  const data::Bars bars = testing::fixture_bars(5200, m_seed % 1000 + 11);
  const std::vector<std::string> policies =
      write_policies(bars,
                     "--feature-columns f_y --epochs 1 --steps-per-epoch 60 --learning-starts 256 "
                     "--hidden 16,16,16");
  ASSERT_FALSE(HasFailure());
  for (const std::string& policy : policies) {
    SCOPED_TRACE(policy);
    const Result exported = cli("export --onnx " + path("model.onnx") + " --weights " + policy);
    ASSERT_EQ(exported.code, 0) << exported.err;
    const Result checked = shell(std::string(DQNTRADER_ORACLE_PYTHON3) + " " +
                                 DQNTRADER_ONNX_CHECK + " " + path("model.onnx"));
    ASSERT_EQ(checked.code, 0) << checked.err;
    const nlohmann::json meta = nlohmann::json::parse(checked.out);
    EXPECT_EQ(meta["opset"][0]["version"], 17);
    EXPECT_EQ(meta["ir_version"], 8);
    std::ofstream(path("meta.json")) << checked.out;
    const eval::PolicyFile file = eval::read_policy(policy);
    EXPECT_EQ(meta["warmup"], file.features.warmup());
    EXPECT_EQ(meta["positions"].get<std::vector<double>>(), file.positions);

    const std::string from = "150", to = "5199";
    // act in float32 products, as the model computes (CUDA's default is bf16).
    const Result act =
        cli("act --json --precision fp32 --weights " + policy + " --data " + path("bars.csv") +
            " --from " + from + " --to " + to + " --position long");
    ASSERT_EQ(act.code, 0) << act.err;
    const Result ran =
        shell("NODE_PATH=" + std::string(DQNTRADER_NODE_PATH) + " " + DQNTRADER_NODE + " " +
              DQNTRADER_ONNX_RUN + " " + path("model.onnx") + " " + path("meta.json") + " " +
              path("bars.csv") + " " + from + " " + to + " 1");
    ASSERT_EQ(ran.code, 0) << ran.err;
    const std::vector<nlohmann::json> expected = json_lines(act.out), got = json_lines(ran.out);
    ASSERT_EQ(got.size(), 5050u);
    ASSERT_EQ(expected.size(), 5050u);
    // Q-values and actions act's, to float rounding (testing::expect_same_decisions).
    EXPECT_GE(testing::expect_same_decisions(got, expected, policy), 1000u);
  }
}

// An export that cannot be written exits 1 and leaves nothing; a path that is no file exits 2.
TEST_F(Export, AnUnwritablePathLeavesNothing) {
  const data::Bars bars = testing::fixture_bars(400, m_seed % 1000 + 13);
  const testing::FixturePolicy p = testing::fixture_policies(bars, m_seed)[0];
  eval::write_policy(path("p.dqnpolicy"), p.file);
  const Result missing =
      cli("export --onnx " + path("no/such/dir/m.onnx") + " --weights " + path("p.dqnpolicy"));
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("cannot create"), std::string::npos) << missing.err;
  EXPECT_FALSE(fs::exists(path("no")));
  fs::create_directories(path("dir"));
  const Result directory =
      cli("export --onnx " + path("dir") + " --weights " + path("p.dqnpolicy"));
  EXPECT_EQ(directory.code, 2);
  EXPECT_NE(directory.err.find("--onnx " + path("dir") + " is a directory"), std::string::npos)
      << directory.err;
  EXPECT_TRUE(fs::is_empty(path("dir")));
  const Result bad = cli("export --onnx " + path("m.onnx") + " --weights " + path("dir"));
  EXPECT_EQ(bad.code, 2);
  EXPECT_FALSE(fs::exists(path("m.onnx")));
}

}  // namespace
}  // namespace dqntrader

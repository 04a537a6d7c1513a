// `dqntrader export --onnx`, checked by code dqntrader did not write: ONNX's own checker
// (python3-onnx, tests/onnx/check_model.py) accepts every exported model, and two runtimes of
// other vendors execute them over 5,000 bars of policies of every shape, each bar with every
// incoming position: onnxruntime (onnxruntime-node, tests/onnx/run_model.js, or its Python
// package, tests/onnx/run_model.py) both forms of the model, OpenCV's DNN (python3-opencv,
// tests/onnx/run_model.py) the float32 form. On
// every row of `dqntrader act`'s path their Q-values agree with act's within 1e-5 of the list's
// largest |Q| and their actions are act's but where the row's two largest Q-values lie within
// that of each other. Built with DQNTRADER_ENABLE_ONNX only.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
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

TEST_F(Export, TwoRuntimesTakeActsDecisionsOverEveryShape) {
  SCOPED_TRACE(testing::seed_note(m_seed));
  const data::Bars bars = testing::fixture_bars(5200, m_seed % 1000 + 11);
  const std::vector<std::string> policies =
      write_policies(bars,
                     "--feature-columns f_y --epochs 1 --steps-per-epoch 60 --learning-starts 256 "
                     "--hidden 16,16,16");
  ASSERT_FALSE(HasFailure());
  const std::size_t first = 150, last = 5199;
  for (const std::string& policy : policies) {
    SCOPED_TRACE(policy);
    const eval::PolicyFile file = eval::read_policy(policy);
    // act in float32 products, its default on every backend.
    const Result act =
        cli("act --json --weights " + policy + " --data " + path("bars.csv") + " --start " +
            std::to_string(first) + " --end " + std::to_string(last) + " --position long");
    ASSERT_EQ(act.code, 0) << act.err;
    const std::vector<nlohmann::json> decisions = json_lines(act.out);
    ASSERT_EQ(decisions.size(), last - first + 1);
    for (const std::string form : {"float64", "float32"}) {
      SCOPED_TRACE(form);
      const std::string model = path("model-" + form + ".onnx");
      const Result exported =
          cli("export --onnx " + model + " --weights " + policy + " --inputs " + form);
      ASSERT_EQ(exported.code, 0) << exported.err;
      const Result checked =
          shell(std::string(DQNTRADER_ORACLE_PYTHON3) + " " + DQNTRADER_ONNX_CHECK + " " + model);
      ASSERT_EQ(checked.code, 0) << checked.err;
      const nlohmann::json meta = nlohmann::json::parse(checked.out);
      EXPECT_EQ(meta["opset"][0]["version"], 17);
      EXPECT_EQ(meta["ir_version"], 8);
      EXPECT_EQ(meta["form"], form);
      EXPECT_EQ(meta["warmup"], file.features.warmup());
      EXPECT_EQ(meta["positions"].get<std::vector<double>>(), file.positions);
      std::ofstream(path("meta.json")) << checked.out;
      const std::string args = model + " " + path("meta.json") + " " + path("bars.csv") + " " +
                               std::to_string(first) + " " + std::to_string(last);
      std::vector<std::pair<std::string, Result>> runs;
      runs.emplace_back("onnxruntime",
                        shell("sh " + std::string(DQNTRADER_ONNXRUNTIME_RUNNER) + " " + args));
      if (form == "float32") {
        runs.emplace_back("OpenCV",
                          shell("sh " + std::string(DQNTRADER_OPENCV_RUNNER) + " " + args));
      }
      for (const auto& [runtime, ran] : runs) {
        ASSERT_EQ(ran.code, 0) << runtime << ": " << ran.err;
        const std::size_t ties = testing::expect_rows_agree(
            json_lines(ran.out), decisions, file.positions, first, runtime + " " + form);
        RecordProperty(runtime + "_" + form + "_near_ties", static_cast<int>(ties));
      }
    }
  }
}

// The model goes to standard output with --onnx -, byte for byte the file's (a terminal is
// refused); an output that is the policy being read is refused, the policy intact.
TEST_F(Export, StandardOutputAndNeverThePolicyItself) {
  const data::Bars bars = testing::fixture_bars(400, m_seed % 1000 + 17);
  eval::write_policy(path("p.dqnpolicy"), testing::fixture_policies(bars, m_seed)[1].file);
  ASSERT_EQ(cli("export --onnx " + path("m.onnx") + " --weights " + path("p.dqnpolicy")).code, 0);
  const Result piped = cli("export --onnx - --weights " + path("p.dqnpolicy"));
  EXPECT_EQ(piped.code, 0) << piped.err;
  EXPECT_EQ(piped.out, slurp(path("m.onnx")));
  const std::string before = slurp(path("p.dqnpolicy"));
  fs::create_symlink(path("p.dqnpolicy"), path("link.dqnpolicy"));
  for (const std::string& output : {path("p.dqnpolicy"), path("link.dqnpolicy")}) {
    const Result over = cli("export --onnx " + output + " --weights " + path("p.dqnpolicy"));
    EXPECT_EQ(over.code, 2);
    EXPECT_NE(over.err.find("--onnx " + output + " is the file --weights"), std::string::npos)
        << over.err;
  }
  const Result form = cli("export --onnx " + path("f.onnx") + " --weights " + path("p.dqnpolicy") +
                          " --inputs float16");
  EXPECT_EQ(form.code, 2);
  EXPECT_NE(form.err.find("--inputs 'float16' is not one of float64 or float32"), std::string::npos)
      << form.err;
  EXPECT_EQ(slurp(path("p.dqnpolicy")), before);
  EXPECT_FALSE(fs::exists(path("f.onnx")));
}

// An output path that cannot take a file (a missing directory, an empty path, a directory)
// exits 2 naming --onnx before any work, and leaves nothing.
TEST_F(Export, AnUnwritablePathLeavesNothing) {
  const data::Bars bars = testing::fixture_bars(400, m_seed % 1000 + 13);
  const testing::FixturePolicy p = testing::fixture_policies(bars, m_seed)[0];
  eval::write_policy(path("p.dqnpolicy"), p.file);
  const Result missing =
      cli("export --onnx " + path("no/such/dir/m.onnx") + " --weights " + path("p.dqnpolicy"));
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("--onnx " + path("no/such/dir/m.onnx") + ": its directory"),
            std::string::npos)
      << missing.err;
  EXPECT_FALSE(fs::exists(path("no")));
  const Result empty = cli("export --onnx '' --weights " + path("p.dqnpolicy"));
  EXPECT_EQ(empty.code, 2);
  EXPECT_NE(empty.err.find("--onnx an empty path"), std::string::npos) << empty.err;
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

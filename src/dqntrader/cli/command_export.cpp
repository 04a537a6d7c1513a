// dqntrader export: a policy's whole decision as an ONNX model (eval/onnx_export.hpp).
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "dqntrader/cli/commands.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/eval/onnx_export.hpp"
#include "dqntrader/eval/policy_file.hpp"
#include "dqntrader/sweep/leaderboard.hpp"

namespace dqntrader::cli {

Command add_export(CLI::App& app) {
  struct Options {
    std::string onnx, weights, inputs = "float64";
  };
  auto options = std::make_shared<Options>();
  Command command;
  command.app = app.add_subcommand(
      "export",
      "write a policy's whole decision as an ONNX model: the recent raw bars and the incoming "
      "position of any number of rows in, their Q-values and greedy actions out "
      "(docs/POLICY.md)");
  CLI::App* c = command.app;
  c->add_option("--onnx", options->onnx,
                "the ONNX model to write (.onnx), or - for standard output")
      ->required();
  c->add_option("--weights", options->weights,
                "policy file (.dqnpolicy), a training run's directory (its best policy) or a "
                "sweep's directory (its winner's best policy)")
      ->required();
  c->add_option("--inputs", options->inputs,
                "float64: the bars in double, the features computed as dqntrader computes them "
                "(onnxruntime); float32: every input and constant float32, the closes in two "
                "parts (OpenCV's DNN, TensorRT)")
      ->capture_default_str();
  command.run = [options](const ExecSpace&) {
    const eval::OnnxInputs inputs = eval::parse_onnx_inputs(options->inputs, "--inputs");
    const std::string path = sweep::policy_path(options->weights);
    check_input("--weights", path);
    check_output("--onnx", options->onnx);
    refuse_output_over_input("--onnx", options->onnx, {{"--weights", path}});
    if (options->onnx == "-" && ::isatty(STDOUT_FILENO)) {
      throw InputError(
          "--onnx - writes the model's bytes to standard output, which is a terminal: "
          "redirect it to a file or a pipe");
    }
    const eval::PolicyFile policy = eval::read_policy(path);
    if (options->onnx == "-") {
      const std::string model = eval::onnx_model(policy, path, inputs);
      std::fwrite(model.data(), 1, model.size(), stdout);  // checked at exit (main.cpp)
    } else {
      eval::write_onnx_model(options->onnx, policy, path, inputs);
    }
    std::cerr << "dqntrader export: wrote " << (options->onnx == "-" ? "the model" : options->onnx)
              << " (" << nn::describe(policy.network) << ", " << options->inputs
              << " inputs per row: the closes of the last " << policy.features.warmup() + 1
              << " bars"
              << (policy.features.ofi_window > 0
                      ? ", the ofi of the last " + std::to_string(policy.features.ofi_window)
                      : std::string())
              << (policy.features.extra.empty() ? std::string() : ", the extra columns")
              << " and the incoming position's one-hot)\n";
  };
  return command;
}

}  // namespace dqntrader::cli

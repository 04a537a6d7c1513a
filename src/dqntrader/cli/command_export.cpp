// dqntrader export: a policy's whole decision as an ONNX model (eval/onnx_export.hpp).
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
    std::string onnx, weights;
  };
  auto options = std::make_shared<Options>();
  Command command;
  command.app = app.add_subcommand(
      "export",
      "write a policy's whole decision as an ONNX model: the recent raw bars and the incoming "
      "position in, the Q-values and the greedy action out (docs/POLICY.md)");
  CLI::App* c = command.app;
  c->add_option("--onnx", options->onnx, "the ONNX model to write (.onnx)")->required();
  c->add_option("--weights", options->weights,
                "policy file (.dqnpolicy), a training run's directory (its best policy) or a "
                "sweep's directory (its winner's best policy)")
      ->required();
  command.run = [options](const ExecSpace&) {
    const std::string path = sweep::policy_path(options->weights);
    check_input("--weights", path);
    check_output("--onnx", options->onnx);
    const eval::PolicyFile policy = eval::read_policy(path);
    eval::write_onnx_model(options->onnx, policy, path);
    std::cerr << "dqntrader export: wrote " << options->onnx << " (" << nn::describe(policy.network)
              << ", inputs: the closes of the last " << policy.features.warmup() + 1 << " bars"
              << (policy.features.ofi_window > 0
                      ? ", the ofi of the last " + std::to_string(policy.features.ofi_window)
                      : std::string())
              << (policy.features.extra.empty() ? std::string() : ", the extra columns")
              << " and the incoming position's one-hot)\n";
  };
  return command;
}

}  // namespace dqntrader::cli

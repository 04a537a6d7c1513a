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
#include "dqntrader/request/requests.hpp"

namespace dqntrader::cli {

Command add_export(CLI::App& app) {
  auto flags = std::make_shared<RequestFlags>();
  Command command;
  command.app = flags->add(app, request::table("export"));
  command.run = [flags](const ExecSpace&) {
    const request::ExportRequest r = request::export_request(flags->given());
    const std::string& path = r.weights;
    refuse_output_over_input("--onnx", r.onnx, {{"--weights", path}});
    if (r.onnx == "-" && ::isatty(STDOUT_FILENO)) {
      throw InputError(
          "--onnx - writes the model's bytes to standard output, which is a terminal: "
          "redirect it to a file or a pipe");
    }
    const eval::PolicyFile policy = eval::read_policy(path);
    if (r.onnx == "-") {
      const std::string model = eval::onnx_model(policy, path, r.inputs);
      std::fwrite(model.data(), 1, model.size(), stdout);  // checked at exit (main.cpp)
    } else {
      eval::write_onnx_model(r.onnx, policy, path, r.inputs);
    }
    std::cerr << "dqntrader export: wrote " << (r.onnx == "-" ? "the model" : r.onnx) << " ("
              << nn::describe(policy.network) << ", "
              << (r.inputs == eval::OnnxInputs::float64 ? "float64" : "float32")
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

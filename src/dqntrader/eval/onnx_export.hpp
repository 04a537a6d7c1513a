// A policy's whole decision as an ONNX model, for runtimes that are not dqntrader: the recent
// raw bars and the incoming position in, the Q-values (and the greedy action) out; the
// features, their standardization, the network and a dueling head are nodes of the graph
// (docs/POLICY.md, "The ONNX model"). Built only with DQNTRADER_ENABLE_ONNX (ONNX 1.12's C++
// library, protobuf).
#pragma once

#include <string>

#include "dqntrader/eval/policy_file.hpp"

namespace dqntrader::eval {

/// The ONNX model of policy's decision (opset 17, IR version 8), serialized, and checked by
/// ONNX's own checker. source names the policy in the model's metadata.
std::string onnx_model(const PolicyFile& policy, const std::string& source);

/// onnx_model() written to path atomically (nothing is left on failure).
void write_onnx_model(const std::string& path, const PolicyFile& policy, const std::string& source);

}  // namespace dqntrader::eval

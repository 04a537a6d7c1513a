// A policy's whole decision as an ONNX model, for runtimes that are not dqntrader: the recent
// raw bars and the incoming position of N rows (instruments, or bars of one) in, the Q-values
// and the greedy action of each out; the features, their standardization, the network and a
// dueling head are nodes of the graph (docs/POLICY.md, "The ONNX model"). The graph uses plain
// operators on two-dimensional tensors only (Slice, Add, Sub, Mul, Div, Log, Sqrt, MatMul,
// ReduceMean, ReduceSumSquare, Concat, Cast, Relu, ArgMax), which onnxruntime, OpenCV's DNN and
// TensorRT take. Built only with DQNTRADER_ENABLE_ONNX (ONNX 1.12's C++ library, protobuf).
#pragma once

#include <string>

#include "dqntrader/eval/policy_file.hpp"

namespace dqntrader::eval {

/// The inputs' element type.
/// float64: the bars in double and the features computed in double, as dqntrader computes
///   them: the decision exactly (onnxruntime).
/// float32: every input and constant float32, for runtimes without double arithmetic (OpenCV's
///   DNN, TensorRT); the closes come as two float32 parts (closes + closes_low, the double
///   close's rounding remainder), and the features agree with dqntrader's to about 1e-6 of
///   their size (docs/POLICY.md gives the measured agreement).
enum class OnnxInputs { float64, float32 };

/// "float64" or "float32"; InputError naming the field inputs otherwise.
OnnxInputs parse_onnx_inputs(const std::string& text);

/// The ONNX model of policy's decision (opset 17, IR version 8), serialized, and checked by
/// ONNX's own checker. source names the policy in the model's metadata.
std::string onnx_model(const PolicyFile& policy, const std::string& source, OnnxInputs inputs);

/// onnx_model() written to path atomically (nothing is left on failure). InputError when path is
/// the policy file source itself (links followed): the model would replace the policy.
void write_onnx_model(const std::string& path, const PolicyFile& policy, const std::string& source,
                      OnnxInputs inputs);

}  // namespace dqntrader::eval

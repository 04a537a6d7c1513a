// How a learning step computes (train/learning_step.hpp runs it): what a run and
// `dqntrader info` report, and how --learning-path chooses it.
#pragma once

#include <cstddef>
#include <string>

#include "dqntrader/core/precision.hpp"
#include "dqntrader/nn/network_spec.hpp"

namespace dqntrader::train {

/// How a learning step computes. products: one batched product a layer (nn::Mlp: cuBLASLt on
/// CUDA, the host's BLAS on OpenMP) around the TD loss's kernel, the passes split between the
/// main and the side stream; every shape, precision and backend. fused: two kernels with the
/// products on the tensor cores and a chunk's activations on chip, the second with Adam's step
/// (train/fused/step.hpp); on CUDA in bf16, for networks of 1 to 4 hidden layers at most
/// 128 wide and a state of at most 128 values.
enum class LearningPath { products, fused };

/// Whether the fused path takes networks of spec in this precision (on this build and device).
bool fused_takes(const nn::NetworkSpec& spec, Precision precision);

/// The path --learning-path `requested` names for networks of spec in this precision:
/// "products" and "fused" the path they name; "auto" the fused path where it takes the networks
/// (measured faster at every population size it was timed at, 1 to 256 members of the
/// defaults' network, in one wave of its blocks or several: docs/BENCHMARKS.md), else the
/// products path.
LearningPath choose(const std::string& requested, const nn::NetworkSpec& spec, Precision precision);
/// The device memory a member's learning step takes on path beyond what every path holds: on
/// the products path the target network's activations over `rows` rows (widths padded to 8
/// values), on the fused path its chunks' parts for batches of batch_size samples.
std::size_t learning_step_bytes(LearningPath path, const nn::NetworkSpec& spec, Precision precision,
                                std::size_t batch_size, std::size_t rows);

/// "fused narrow MLP", or "batched products (cuBLASLt 13.1.0)": the library's name and release
/// from gemm::library_description().
std::string describe(LearningPath path);

}  // namespace dqntrader::train

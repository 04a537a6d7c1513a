// The fused learning step's loss kernel (CUDA only; step.cpp launches it). A chunk of R samples
// of one member is one block of kThreads threads:
//   1. forward_passes: both networks' weights into shared memory (where one set is all that fits:
//      the target's first, the online's in its place after the target's pass) and the chunk's
//      states: its s' rows, its s rows and its share of the environments' states; down the
//      layers, the target network on s' beside the online network on every row, so that a layer
//      of both is one phase; the online activations of s stay for step 3; the online Q-values of
//      every row to global memory, and further passes for the rest of the environments' share
//   2. td_rows: per sample (a thread each) the DQN rule (train/dqn_rule.hpp), the head's output
//      gradient in bf16 (nn::head_gradient, stored as the products path stores it) and each
//      warp's sums; chunk_sums: the warps' in order, written apart
//   3. backward_chain: down the layers, the weight gradient act^T dOut of the chunk's rows into
//      its parts, the bias gradient (dOut's column sums; the head's from the chunk's sums of
//      d loss / d Q) and the next dOut = (dOut W^T) masked by the ReLU
// Rows are padded to multiples of 16 with zeros; the state to 32, 64 or 128 values and every
// hidden layer to one of these widths (plan.hpp's Geometry), the head to kHeadPad outputs (zero
// weights and biases keep the padded activations at zero), and the kernel is compiled for each
// pair of widths, so that a product's extents, tiles and strides are constants.
#pragma once

#include <cstddef>

#include "dqntrader/train/fused/plan.hpp"
#include "dqntrader/train/fused/step.hpp"

namespace dqntrader::train::fused {

/// The loss kernel's arguments, passed by value (at most a launch's 4 KB).
struct LossParams {
  Shape shape;
  Smem smem;
  WeightPiece pieces[2][kMaxPieces];  // [slot][piece]
  int members, batch, environments, chunks, environment_share;
  Inputs in;
  float* q;
  std::size_t q_member, q_row;
  float* partials;
  std::size_t part_stride;  // a chunk's parts: part_stride(shape)
  double* partial_sums;     // [member][chunk][kSums]
};
static_assert(sizeof(LossParams) <= 4096, "the loss kernel's parameters fit a launch's 4 KB");

using LossKernel = void (*)(LossParams);

/// The loss kernel as compiled for widths g (both of kWidths).
LossKernel loss_kernel_for(const Geometry& g);

}  // namespace dqntrader::train::fused

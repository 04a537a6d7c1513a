// The fused learning step's learn kernel (CUDA only; step.cpp launches it): one cooperative
// grid that adds the loss kernel's chunk parts of every member in a fixed order into its
// gradient and the loss's sums, the squares of the gradient's values by blocks, and after a
// grid-wide barrier every member's Adam step (nn/adam_rule.hpp: the factors from the blocks'
// sums in a fixed order, then the update of each parameter, as nn::Adam::step).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "dqntrader/nn/adam_rule.hpp"
#include "dqntrader/train/fused/plan.hpp"
#include "dqntrader/train/fused/step.hpp"

namespace dqntrader::train::fused {

// The learn kernel's: kLearnThreads threads a block, each taking kLearnValues of a member's
// parameters at once: block j of a member's `blocks` takes its parameters j kLearnThreads + t
// + v blocks kLearnThreads (v < kLearnValues). Its grid is at most kLearnBlocks blocks a
// multiprocessor, and its registers are those of twice as many, so that the kernels on the side
// stream find room beside it.
constexpr int kLearnThreads = 256;
constexpr int kLearnValues = 4;
constexpr int kLearnBlocks = 2;
constexpr int kLearnGroup = kLearnThreads / 32;  // units a block sums and steps between barriers

/// The learn kernel's arguments.
struct LearnParams {
  Shape shape;
  int members, chunks, blocks;  // blocks: of a member's gradient (learn_blocks)
  const float* partials;        // the loss kernel's parts: [member][chunk][part_stride]
  std::size_t part_stride;
  const double* partial_sums;  // [member][chunk][kSums]
  float* grads;
  std::size_t grad_stride;
  double *sums, *totals;
  double* norms;             // [member][block]: the squares of the block's values
  nn::AdamCounters* before;  // [member]: the counters before the step
  Update update;
};

/// The blocks of a member's gradient for networks of shape: they follow from its size alone.
int learn_blocks(const Shape& shape);

/// The learn kernel's blocks a multiprocessor of this device runs at once.
int learn_resident();

/// The learn kernel over grid blocks (at most as many as the device holds at once) on stream.
void launch_learn(const LearnParams& p, int grid, cudaStream_t stream);

}  // namespace dqntrader::train::fused

#include "dqntrader/train/fused/learn_kernel.hpp"

#include <cooperative_groups.h>

#include "backends/cuda/cuda_check.hpp"
#include "dqntrader/core/bf16.hpp"
#include "dqntrader/train/fused/tiles.hpp"

namespace dqntrader::train::fused {

namespace {

// A 128-byte line into L2 (a hint: nothing waits for it).
__device__ __forceinline__ void prefetch_line(const void* p) {
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}

// A unit's values: thread t's v-th is parameter first + v step of its member (first = j
// kLearnThreads + t for the unit's block j, step = blocks kLearnThreads).
struct UnitValues {
  float g[kLearnValues], m[kLearnValues], v[kLearnValues], w[kLearnValues];
};

// Member m's Adam state at this thread's values from first (not beyond n), into x (not g).
__device__ __forceinline__ void load_state(const Update& u, int m, int first, int step, int n,
                                           UnitValues& x) {
  const std::size_t at0 = static_cast<std::size_t>(m) * u.stride;
#pragma unroll
  for (int v = 0; v < kLearnValues; ++v) {
    const int at = first + v * step;
    if (at < n) {
      x.m[v] = u.m[at0 + at];
      x.v[v] = u.v[at0 + at];
      x.w[v] = u.parameters[at0 + at];
    }
  }
}

// Where a unit (member m's block j) stands: its member, its values' first parameter for this
// thread (first = j kLearnThreads + t) and the step between its values (blocks kLearnThreads).
struct Unit {
  int m, j, first;
};

__device__ __forceinline__ Unit unit_at(const LearnParams& p, int unit, int t) {
  const int m = unit / p.blocks, j = unit % p.blocks;
  return Unit{m, j, j * kLearnThreads + t};
}

// The unit's gradient values: its member's chunks' parts added in chunk order.
__device__ __forceinline__ void gather_gradient(const LearnParams& p, const Unit& u, int step,
                                                int n, float (&g)[kLearnValues]) {
  const float* const parts = p.partials + static_cast<std::size_t>(u.m) * p.chunks * p.part_stride;
#pragma unroll 4
  for (int c = 0; c < p.chunks; ++c) {
    const float* const part = parts + static_cast<std::size_t>(c) * p.part_stride;
#pragma unroll
    for (int v = 0; v < kLearnValues; ++v) {
      const int at = u.first + v * step;
      if (at < n)
        g[v] += part[at];
    }
  }
}

// Stores the gradient values and returns the warp's sum of their squares (in a fixed order).
__device__ __forceinline__ double store_gradient(const LearnParams& p, const Unit& u, int step,
                                                 int n, const float (&g)[kLearnValues]) {
  float* const grads = p.grads + static_cast<std::size_t>(u.m) * p.grad_stride;
  double x = 0.0;
#pragma unroll
  for (int v = 0; v < kLearnValues; ++v) {
    const int at = u.first + v * step;
    if (at < n) {
      grads[at] = g[v];
      x += static_cast<double>(g[v]) * g[v];
    }
  }
  return warp_sum(x);
}

// Asks L2 for a unit's Adam state: lane 4 a + v for line v of array a (the warp's 32 values of
// each are a line).
__device__ __forceinline__ void prefetch_state(const Update& u, const Unit& unit, int lane,
                                               int step, int n) {
  if (lane >= 3 * kLearnValues)
    return;
  const int v = lane % kLearnValues, at = unit.first - lane + v * step;
  const float* const array = lane < kLearnValues       ? u.m
                             : lane < 2 * kLearnValues ? u.v
                                                       : u.parameters;
  if (at < n)
    prefetch_line(array + static_cast<std::size_t>(unit.m) * u.stride + at);
}

// A member's first unit, by lanes 0 .. 3 of its last warp: its loss, Q and non-finite count
// (its chunks' in order), and its counters as they were before the step.
__device__ __forceinline__ void keep_member_sums(const LearnParams& p, int m, int lane) {
  if (lane == 3) {
    p.before[m] = p.update.counters[m];
    return;
  }
  const double* const sums = p.partial_sums + static_cast<std::size_t>(m) * p.chunks * kSums + lane;
  double total = 0.0;
#pragma unroll 8
  for (int c = 0; c < p.chunks; ++c)
    total += sums[c * kSums];
  p.sums[3 * m + lane] = lane == 2 ? (total == 0.0 ? 1.0 : 0.0) : total;
  p.totals[3 * m + lane] += lane == 2 ? 1.0 : total;
}

// A warp's factors of member m's step from its blocks' sums of squares (each lane's in order,
// then the lanes' by halves: every unit of a member adds them alike); the member's first unit
// writes its counters. Lane 0's result counts.
__device__ __forceinline__ nn::AdamStepFactors member_factors(const LearnParams& p, int unit,
                                                              int lane) {
  const Update& u = p.update;
  const int m = unit / p.blocks;
  double x = 0.0;
  for (int b = lane; b < p.blocks; b += 32)
    x += p.norms[static_cast<std::size_t>(m) * p.blocks + b];
  x = warp_sum(x);
  nn::AdamStepFactors f{};  // apply 0: a stopped member stays as it is
  if (lane == 0 && (u.active == nullptr || u.active[m] != 0)) {
    nn::AdamCounters counters = p.before[m];
    f = nn::step_factors(u.settings[m], counters, x);
    if (unit % p.blocks == 0)
      u.counters[m] = counters;
  }
  return f;
}

// A unit's Adam step of its values, x its gradient and state.
__device__ __forceinline__ void adam_step(const Update& u, const Unit& unit,
                                          const nn::AdamStepFactors& f, int step, int n,
                                          UnitValues& x) {
  const nn::AdamSettings settings = u.settings[unit.m];
  const std::size_t at0 = static_cast<std::size_t>(unit.m) * u.stride;
#pragma unroll
  for (int v = 0; v < kLearnValues; ++v) {
    const int at = unit.first + v * step;
    if (at < n) {
      const float value = nn::updated(settings, f, x.g[v], x.m[v], x.v[v], x.w[v]);
      u.m[at0 + at] = x.m[v];
      u.v[at0 + at] = x.v[v];
      u.parameters[at0 + at] = value;
      store(u.working[at0 + at], value);
    }
  }
}

// Units (member, block) gridDim.x apart, a block's taken kLearnGroup at a time. First every
// unit's gradient values (gather_gradient), each warp's sum of their squares and, once the
// group's units are done, each unit's sum of its warps' in order; a member's first unit also
// keeps its loss sums and counters. The block's first unit keeps its gradient and loads its
// Adam state before the grid-wide barrier; the others' state is asked into L2. After the
// barrier, a warp for each unit of a group works out its member's factors (member_factors);
// then each unit's Adam step of its values (adam_step).
__global__ void __launch_bounds__(kLearnThreads, 2 * kLearnBlocks)
    learn_kernel(const LearnParams p) {
  constexpr int warps = kLearnThreads / 32;
  __shared__ double squares[kLearnGroup][warps];
  __shared__ nn::AdamStepFactors factors[kLearnGroup];
  const Update& u = p.update;
  const int n = static_cast<int>(p.shape.size), t = static_cast<int>(threadIdx.x);
  const int lane = t & 31, warp = t >> 5;
  const int units = p.members * p.blocks, grid = static_cast<int>(gridDim.x);
  const int step = p.blocks * kLearnThreads;
  UnitValues kept;  // the block's first unit's
  for (int group = blockIdx.x; group < units; group += kLearnGroup * grid) {
#pragma unroll 1
    for (int i = 0; i < kLearnGroup; ++i) {
      const int unit = group + i * grid;
      if (unit >= units)
        break;
      const Unit at = unit_at(p, unit, t);
      float g[kLearnValues] = {};
      gather_gradient(p, at, step, n, g);
      const double x = store_gradient(p, at, step, n, g);
      if (lane == 0)
        squares[i][warp] = x;
      if (unit == static_cast<int>(blockIdx.x)) {
#pragma unroll
        for (int v = 0; v < kLearnValues; ++v)
          kept.g[v] = g[v];
        load_state(u, at.m, at.first, step, n, kept);
      } else {
        prefetch_state(u, at, lane, step, n);
      }
      if (at.j == 0 && warp == warps - 1 && lane <= 3)
        keep_member_sums(p, at.m, lane);
    }
    __syncthreads();
    if (t < kLearnGroup && group + t * grid < units) {
      double sum = 0.0;
      for (int w = 0; w < warps; ++w)
        sum += squares[t][w];
      p.norms[group + t * grid] = sum;
    }
    __syncthreads();
  }
  cooperative_groups::this_grid().sync();
  for (int group = blockIdx.x; group < units; group += kLearnGroup * grid) {
    if (const int unit = group + warp * grid; warp < kLearnGroup && unit < units) {
      const nn::AdamStepFactors f = member_factors(p, unit, lane);
      if (lane == 0)
        factors[warp] = f;
    }
    __syncthreads();
#pragma unroll 1
    for (int i = 0; i < kLearnGroup; ++i) {
      const int unit = group + i * grid;
      if (unit >= units)
        break;
      const nn::AdamStepFactors f = factors[i];
      if (f.apply == 0)
        continue;  // a stopped member, or a gradient not finite: the step is skipped
      const Unit at = unit_at(p, unit, t);
      UnitValues x;
      if (unit == static_cast<int>(blockIdx.x)) {
        x = kept;
      } else {
        const float* const grads = p.grads + static_cast<std::size_t>(at.m) * p.grad_stride;
#pragma unroll
        for (int v = 0; v < kLearnValues; ++v) {
          const int a = at.first + v * step;
          if (a < n)
            x.g[v] = grads[a];
        }
        load_state(u, at.m, at.first, step, n, x);
      }
      adam_step(u, at, f, step, n, x);
    }
    __syncthreads();  // the group's factors are read before the next group's
  }
}

}  // namespace

int learn_blocks(const Shape& shape) {
  const std::size_t per_block = std::size_t{kLearnThreads} * kLearnValues;
  return static_cast<int>((shape.size + per_block - 1) / per_block);
}

int learn_resident() {
  int resident = 0;
  DQNTRADER_CUDA(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, learn_kernel, kLearnThreads, 0));
  return resident;
}

void launch_learn(const LearnParams& p, int grid, cudaStream_t stream) {
  LearnParams args = p;
  void* pointers[] = {&args};
  DQNTRADER_CUDA(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(&learn_kernel),
                                             static_cast<unsigned>(grid), kLearnThreads, pointers,
                                             0, stream));
}

}  // namespace dqntrader::train::fused

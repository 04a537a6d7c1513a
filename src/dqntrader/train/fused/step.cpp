// The fused step on the host (CUDA builds): the device's numbers for the plan, the chunking, the
// buffers between the kernels and their launches.
#include "dqntrader/train/fused/step.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "backends/cuda/cuda_check.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/train/fused/learn_kernel.hpp"
#include "dqntrader/train/fused/loss_kernel.hpp"

namespace dqntrader::train::fused {

static_assert(sizeof(bf16) == sizeof(__nv_bfloat16), "bf16 has __nv_bfloat16's layout");

namespace {

int device_attribute(cudaDeviceAttr attribute) {
  int device = 0, value = 0;
  DQNTRADER_CUDA(cudaGetDevice(&device));
  DQNTRADER_CUDA(cudaDeviceGetAttribute(&value, attribute, device));
  return value;
}

// The loss kernel for shape's widths, allowed the most dynamic shared memory the device gives a
// block (not a Step's own need: a smaller bound would refuse the larger chunks of another Step
// of the same widths), and that most.
LossKernel loss_kernel(const Shape& shape, std::size_t* dynamic_shared = nullptr) {
  const LossKernel kernel = loss_kernel_for(geometry(shape));
  cudaFuncAttributes attributes{};
  DQNTRADER_CUDA(cudaFuncGetAttributes(&attributes, kernel));
  const std::size_t most =
      static_cast<std::size_t>(device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin)) -
      attributes.sharedSizeBytes;
  DQNTRADER_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(most)));
  if (dynamic_shared != nullptr)
    *dynamic_shared = most;
  return kernel;
}

// This device as the plan sees it for the loss kernel of shape's widths (compiled(shape)).
Device device_for(const Shape& shape) {
  Device d;
  d.multiprocessors = device_attribute(cudaDevAttrMultiProcessorCount);
  const LossKernel kernel = loss_kernel(shape, &d.dynamic_shared);
  d.resident = [kernel](std::size_t shared) {
    int resident = 0;
    DQNTRADER_CUDA(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, kernel, kThreads, shared));
    return resident;
  };
  return d;
}

}  // namespace

bool takes(const Shape& shape) {
  return compiled(shape) && fits(shape, device_for(shape).dynamic_shared);
}

Step::Step(const ExecSpace& space, const Shape& shape, std::size_t members, std::size_t batch,
           std::size_t environments)
    : m_shape(shape), m_members(members), m_batch(batch), m_environments(environments) {
  if (!takes(shape))
    throw InputError("fused step: a network of this shape is not one it takes");
  m_chunks = chunking(shape, members, batch, environments, device_for(shape));
  const std::size_t parts = members * static_cast<std::size_t>(m_chunks.chunks);
  m_partials = Kokkos::View<float*, DeviceMemory>(
      Kokkos::view_alloc(space, std::string("dqntrader::fused::partials")),
      parts * part_stride(shape));
  m_partial_sums = Kokkos::View<double*, DeviceMemory>(
      Kokkos::view_alloc(space, std::string("dqntrader::fused::partial_sums")), parts * kSums);
  // learn(): as many of the units (member, block) as the device holds at once beside other
  // work, for the grid-wide barrier.
  m_norm_blocks = learn_blocks(shape);
  const std::size_t units = members * static_cast<std::size_t>(m_norm_blocks);
  const std::size_t at_once =
      static_cast<std::size_t>(std::min(learn_resident(), kLearnBlocks)) *
      static_cast<std::size_t>(device_attribute(cudaDevAttrMultiProcessorCount));
  m_grid = static_cast<int>(std::min(units, at_once));
  m_norms = Kokkos::View<double*, DeviceMemory>(
      Kokkos::view_alloc(space, std::string("dqntrader::fused::norms")), units);
  m_counters = Kokkos::View<nn::AdamCounters*, DeviceMemory>(
      Kokkos::view_alloc(space, std::string("dqntrader::fused::counters_before")), members);
}

void Step::loss(const ExecSpace& space, const Inputs& in, float* q, std::size_t q_member,
                std::size_t q_row) const {
  LossParams p{};
  p.shape = m_shape;
  p.smem = smem_layout(m_shape, m_chunks.rows, m_chunks.environment_rows, m_chunks.sets);
  // Whole aligned 16-byte runs in every set: the sets' firsts and the rows 16-byte aligned.
  const bool aligned = in.stride % 8 == 0 && reinterpret_cast<std::uintptr_t>(in.working) % 16 == 0;
  describe_pieces(m_shape, p.smem, aligned, p.pieces);
  p.members = static_cast<int>(m_members);
  p.batch = static_cast<int>(m_batch);
  p.environments = static_cast<int>(m_environments);
  p.chunks = m_chunks.chunks;
  p.environment_share = static_cast<int>((m_environments + m_chunks.chunks - 1) / m_chunks.chunks);
  p.in = in;
  p.q = q;
  p.q_member = q_member;
  p.q_row = q_row;
  p.partials = m_partials.data();
  p.part_stride = part_stride(m_shape);
  p.partial_sums = m_partial_sums.data();
  loss_kernel_for(geometry(m_shape))<<<static_cast<unsigned>(m_members * m_chunks.chunks), kThreads,
                                       p.smem.bytes, space.cuda_stream()>>>(p);
  DQNTRADER_CUDA(cudaGetLastError());
}

void Step::learn(const ExecSpace& space, float* grads, std::size_t grad_stride, double* sums,
                 double* totals, const Update& update) const {
  LearnParams p{};
  p.shape = m_shape;
  p.members = static_cast<int>(m_members);
  p.chunks = m_chunks.chunks;
  p.blocks = m_norm_blocks;
  p.partials = m_partials.data();
  p.part_stride = part_stride(m_shape);
  p.partial_sums = m_partial_sums.data();
  p.grads = grads;
  p.grad_stride = grad_stride;
  p.sums = sums;
  p.totals = totals;
  p.norms = m_norms.data();
  p.before = m_counters.data();
  p.update = update;
  launch_learn(p, m_grid, space.cuda_stream());
}

}  // namespace dqntrader::train::fused

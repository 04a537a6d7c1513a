// CUDA: a stream per StreamSpace, CUDA graphs by stream capture.
#include <cuda_runtime_api.h>

#include <optional>
#include <vector>

#include "../execution.hpp"
#include "cuda_check.hpp"
#include "dqntrader/core/error.hpp"

namespace dqntrader::exec {

struct StreamSpace::Impl {
  cudaStream_t stream = nullptr;
  std::optional<ExecSpace> space;
  Impl() {
    DQNTRADER_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    space.emplace(stream);
  }
  ~Impl() {
    if (space)
      space->fence();
    space.reset();  // the Kokkos instance goes before its stream
    if (stream != nullptr)
      cudaStreamDestroy(stream);
  }
};

StreamSpace::StreamSpace() : m_impl(std::make_unique<Impl>()) {}
StreamSpace::~StreamSpace() = default;
const ExecSpace& StreamSpace::space() const {
  return *m_impl->space;
}

struct SideStream::Impl {
  StreamSpace side;
  cudaEvent_t forked = nullptr, joined = nullptr;
  Impl() {
    DQNTRADER_CUDA(cudaEventCreateWithFlags(&forked, cudaEventDisableTiming));
    DQNTRADER_CUDA(cudaEventCreateWithFlags(&joined, cudaEventDisableTiming));
  }
  ~Impl() {
    side.space().fence();  // nothing enqueued on the side still uses the events
    if (forked != nullptr)
      cudaEventDestroy(forked);
    if (joined != nullptr)
      cudaEventDestroy(joined);
  }
};

SideStream::SideStream() : m_impl(std::make_unique<Impl>()) {}
SideStream::~SideStream() = default;
const ExecSpace& SideStream::space() const {
  return m_impl->side.space();
}
void SideStream::fork(const ExecSpace& space) const {
  DQNTRADER_CUDA(cudaEventRecord(m_impl->forked, space.cuda_stream()));
  DQNTRADER_CUDA(cudaStreamWaitEvent(m_impl->side.space().cuda_stream(), m_impl->forked, 0));
}
void SideStream::join(const ExecSpace& space) const {
  DQNTRADER_CUDA(cudaEventRecord(m_impl->joined, m_impl->side.space().cuda_stream()));
  DQNTRADER_CUDA(cudaStreamWaitEvent(space.cuda_stream(), m_impl->joined, 0));
}

struct CapturedWork::Impl {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t instance = nullptr;
  ~Impl() {
    if (instance != nullptr)
      cudaGraphExecDestroy(instance);
    if (graph != nullptr)
      cudaGraphDestroy(graph);
  }
};

CapturedWork::CapturedWork() : m_impl(std::make_unique<Impl>()) {}
CapturedWork::~CapturedWork() = default;

void CapturedWork::capture(const ExecSpace& space, const std::function<void()>& enqueue) {
  cudaStream_t stream = space.cuda_stream();
  if (stream == nullptr) {
    throw Error(
        "graph capture needs an execution-space instance on a stream of its own "
        "(exec::StreamSpace)");
  }
  if (m_impl->instance != nullptr) {
    DQNTRADER_CUDA(cudaGraphExecDestroy(m_impl->instance));
    m_impl->instance = nullptr;
  }
  if (m_impl->graph != nullptr) {
    DQNTRADER_CUDA(cudaGraphDestroy(m_impl->graph));
    m_impl->graph = nullptr;
  }
  // Relaxed: the work is warm, and Kokkos may still query (not change) device state.
  DQNTRADER_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  try {
    enqueue();
  } catch (...) {
    cudaGraph_t partial = nullptr;
    cudaStreamEndCapture(stream, &partial);
    if (partial != nullptr)
      cudaGraphDestroy(partial);
    throw;
  }
  DQNTRADER_CUDA(cudaStreamEndCapture(stream, &m_impl->graph));
  DQNTRADER_CUDA(cudaGraphInstantiate(&m_impl->instance, m_impl->graph, 0));
}

void CapturedWork::replay(const ExecSpace& space) const {
  if (m_impl->instance == nullptr)
    throw Error("CapturedWork::replay before capture");
  DQNTRADER_CUDA(cudaGraphLaunch(m_impl->instance, space.cuda_stream()));
}

void CapturedWork::clear() {
  m_impl = std::make_unique<Impl>();
}

bool CapturedWork::captured() const {
  return m_impl->instance != nullptr;
}

std::size_t CapturedWork::kernels() const {
  if (m_impl->graph == nullptr)
    return 0;
  std::size_t count = 0;
  DQNTRADER_CUDA(cudaGraphGetNodes(m_impl->graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  DQNTRADER_CUDA(cudaGraphGetNodes(m_impl->graph, nodes.data(), &count));
  std::size_t kernels = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    DQNTRADER_CUDA(cudaGraphNodeGetType(node, &type));
    if (type == cudaGraphNodeTypeKernel)
      ++kernels;
  }
  return kernels;
}

std::size_t free_memory() {
  std::size_t free = 0, total = 0;
  DQNTRADER_CUDA(cudaMemGetInfo(&free, &total));
  return free;
}

int device_count() {
  int count = 0;
  DQNTRADER_CUDA(cudaGetDeviceCount(&count));
  return count;
}

}  // namespace dqntrader::exec

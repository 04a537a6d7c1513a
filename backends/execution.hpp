// Execution-space instances and recorded work: the CUDA-only execution details behind one
// interface. On CUDA a StreamSpace is a Kokkos::Cuda instance on a stream of its own (the
// default stream cannot be captured) and CapturedWork is a CUDA graph made by stream
// capture of everything enqueued there (Kokkos kernels and cuBLAS calls alike), and a
// SideStream is a second stream whose work runs beside a space's, ordered against it by
// events (which a capture records as dependencies). On OpenMP a StreamSpace and a SideStream
// are the default instance, which runs work in the order it is enqueued, and CapturedWork
// simply runs the work again.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "dqntrader/core/types.hpp"

namespace dqntrader::exec {

class StreamSpace {
 public:
  StreamSpace();
  ~StreamSpace();
  StreamSpace(const StreamSpace&) = delete;
  StreamSpace& operator=(const StreamSpace&) = delete;

  const ExecSpace& space() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

/// Work that may run beside another space's: fork(space) makes what is enqueued on the side
/// from then on wait for what was enqueued on space before; join(space) makes what is
/// enqueued on space from then on wait for what was enqueued on the side before. Inside a
/// capture of space, forked work is recorded with it (as a branch of the graph); it must be
/// joined back before the capture ends.
class SideStream {
 public:
  SideStream();
  ~SideStream();
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;

  const ExecSpace& space() const;
  void fork(const ExecSpace& space) const;
  void join(const ExecSpace& space) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

/// Bytes of memory the device has free now: on CUDA the GPU's (cudaMemGetInfo), on OpenMP
/// the host's available memory. What a sweep sizes its populations by.
std::size_t free_memory();

/// The accelerators this process can use: the CUDA devices it sees (callable before Kokkos is
/// initialized), 1 on OpenMP. Which GPU a rank of a distributed sweep takes.
int device_count();

class CapturedWork {
 public:
  CapturedWork();
  ~CapturedWork();
  CapturedWork(const CapturedWork&) = delete;
  CapturedWork& operator=(const CapturedWork&) = delete;

  /// Records what enqueue() puts on space. The work must be warm (run once before, so no
  /// lazy initialisation happens), allocate nothing and never wait for the device. On CUDA,
  /// space must be a StreamSpace's (or another instance on a non-default stream).
  void capture(const ExecSpace& space, const std::function<void()>& enqueue);

  /// Enqueues the recorded work on space; does not wait.
  void replay(const ExecSpace& space) const;

  bool captured() const;

  /// Forgets the recording (captured() is false again), so that different work can be
  /// recorded.
  void clear();

  /// Kernels in the recording (the CUDA graph's kernel nodes, matrix products' included);
  /// 0 before capture and on OpenMP, where nothing is recorded.
  std::size_t kernels() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

}  // namespace dqntrader::exec

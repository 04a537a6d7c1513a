// The execution space, memory space and array types the library computes with.
#pragma once

#include <Kokkos_Core.hpp>

namespace dqntrader {

/// The one execution space every kernel and vendor call of a build runs on: Kokkos::Cuda
/// in the CUDA build, Kokkos::OpenMP in the host build.
using ExecSpace = Kokkos::DefaultExecutionSpace;
using DeviceMemory = ExecSpace::memory_space;
/// Host memory the device copies into without staging (page-locked on CUDA): what device state
/// read back in bulk goes into.
#ifdef KOKKOS_ENABLE_CUDA
using PinnedHostMemory = Kokkos::CudaHostPinnedSpace;
#else
using PinnedHostMemory = Kokkos::HostSpace;
#endif

/// A row-major matrix in device memory: rows are contiguous.
template <class T>
using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, DeviceMemory>;

/// A row-major matrix whose rows may lie further apart than their length (stride(0)):
/// the first columns of a wider one, or rows followed by columns of their own.
template <class T>
using StridedMatrix = Kokkos::View<T**, Kokkos::LayoutStride, DeviceMemory>;

/// A batch of row-major matrices, [batch][row][column], each contiguous.
template <class T>
using MatrixBatch = Kokkos::View<T***, Kokkos::LayoutRight, DeviceMemory>;

/// The policy given, but launched on CUDA with its functor as a kernel parameter (up to 4 KB)
/// even when the functor exceeds the 512 bytes above which Kokkos would copy it to constant
/// memory, a copy that waits on an event and so cannot be recorded into a CUDA graph. Kernels
/// of the recorded training step with large functors use it.
template <class Policy>
auto recordable(const Policy& policy) {
  return Kokkos::Experimental::require(policy,
                                       Kokkos::Experimental::WorkItemProperty::HintLightWeight);
}

}  // namespace dqntrader

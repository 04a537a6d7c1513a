// The execution space, memory space and array types the library computes with.
#pragma once

#include <Kokkos_Core.hpp>

namespace dqntrader {

/// The one execution space every kernel and vendor call of a build runs on: Kokkos::Cuda
/// in the CUDA build, Kokkos::OpenMP in the host build.
using ExecSpace = Kokkos::DefaultExecutionSpace;
using DeviceMemory = ExecSpace::memory_space;

/// A row-major matrix in device memory: rows are contiguous.
template <class T>
using Matrix = Kokkos::View<T**, Kokkos::LayoutRight, DeviceMemory>;

/// A batch of row-major matrices, [batch][row][column], each contiguous.
template <class T>
using MatrixBatch = Kokkos::View<T***, Kokkos::LayoutRight, DeviceMemory>;

}  // namespace dqntrader

// One kernel over the cells of a row-major matrix, shaped for the backend: on CUDA one
// thread per cell (consecutive threads touch consecutive addresses); on the host one
// iteration per row with a contiguous inner loop (no division per cell, vectorizable).
#pragma once

#include <Kokkos_Core.hpp>

#include <cstddef>

#include "dqntrader/core/types.hpp"

namespace dqntrader {

/// Calls f(row, col) for every cell of a rows x cols matrix, on space; does not wait.
template <class F>
void for_each_cell(const char* label, const ExecSpace& space, std::size_t rows, std::size_t cols,
                   const F& f) {
#if defined(DQNTRADER_BACKEND_CUDA)
  Kokkos::parallel_for(
      label, Kokkos::RangePolicy<ExecSpace>(space, 0, rows * cols),
      KOKKOS_LAMBDA(const std::size_t cell) { f(cell / cols, cell % cols); });
#else
  Kokkos::parallel_for(
      label, Kokkos::RangePolicy<ExecSpace>(space, 0, rows), KOKKOS_LAMBDA(const std::size_t row) {
        for (std::size_t col = 0; col < cols; ++col)
          f(row, col);
      });
#endif
}

}  // namespace dqntrader

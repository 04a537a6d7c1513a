// States rebuilt from the feature arrays by index: the features of the bar followed by the
// one-hot of the incoming position.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dqntrader/core/bf16.hpp"
#include "dqntrader/core/for_each_cell.hpp"
#include "dqntrader/core/types.hpp"

namespace dqntrader::env {

/// out[row_offset + i] = state (bars(i), positions(i)) for i < count.
template <class T>
void assemble_states(const ExecSpace& space, const Matrix<const T>& features,
                     const Kokkos::View<const std::int32_t*, DeviceMemory>& bars,
                     const Kokkos::View<const std::int8_t*, DeviceMemory>& positions,
                     std::size_t count, const Matrix<T>& out, std::size_t row_offset = 0) {
  const std::size_t f_count = features.extent(1);
  for_each_cell(
      "dqntrader::env::assemble_states", space, count, out.extent(1),
      KOKKOS_LAMBDA(const std::size_t i, const std::size_t j) {
        if (j < f_count) {
          out(row_offset + i, j) = features(bars(i), j);
        } else {
          store(out(row_offset + i, j),
                j - f_count == static_cast<std::size_t>(positions(i)) ? 1.0f : 0.0f);
        }
      });
}

}  // namespace dqntrader::env

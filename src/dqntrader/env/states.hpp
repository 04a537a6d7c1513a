// States rebuilt from the feature arrays by index: the features of the bar followed by the
// one-hot of the incoming position.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dqntrader/core/bf16.hpp"
#include "dqntrader/core/for_each_cell.hpp"
#include "dqntrader/core/types.hpp"

namespace dqntrader::env {

/// Where states come from: the bar and the incoming position of each row.
struct StateSource {
  Kokkos::View<const std::int32_t*, DeviceMemory> bars;
  Kokkos::View<const std::int8_t*, DeviceMemory> positions;
};

/// Several sources' states stacked in one pass: out's first rows are the states of
/// sources[0] (one per entry of its bars), then those of sources[1], and so on.
template <std::size_t N>
struct StateSources {
  StateSource source[N];
};

template <class T, std::size_t N>
void assemble_states(const ExecSpace& space, const Matrix<const T>& features,
                     const StateSources<N>& sources, const Matrix<T>& out) {
  const std::size_t f_count = features.extent(1);
  std::size_t rows = 0;
  for (std::size_t k = 0; k < N; ++k)
    rows += sources.source[k].bars.extent(0);
  for_each_cell(
      "dqntrader::env::assemble_states", space, rows, out.extent(1),
      KOKKOS_LAMBDA(const std::size_t row, const std::size_t j) {
        std::size_t k = 0, i = row;
        while (k + 1 < N && i >= sources.source[k].bars.extent(0)) {
          i -= sources.source[k].bars.extent(0);
          ++k;
        }
        const StateSource& from = sources.source[k];
        if (j < f_count) {
          out(row, j) = features(from.bars(i), j);
        } else {
          store(out(row, j),
                j - f_count == static_cast<std::size_t>(from.positions(i)) ? 1.0f : 0.0f);
        }
      });
}

/// out[i] = state (bars(i), positions(i)) for every entry of bars.
template <class T>
void assemble_states(const ExecSpace& space, const Matrix<const T>& features,
                     const StateSource& source, const Matrix<T>& out) {
  assemble_states(space, features, StateSources<1>{{source}}, out);
}

}  // namespace dqntrader::env

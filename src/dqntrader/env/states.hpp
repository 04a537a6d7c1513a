// States rebuilt from the feature arrays by index: the features of the bar followed by the
// one-hot of the incoming position.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dqntrader/core/bf16.hpp"
#include "dqntrader/core/for_each_cell.hpp"
#include "dqntrader/core/types.hpp"
#include "dqntrader/replay/replay_buffer.hpp"

namespace dqntrader::env {

/// Where states come from: the bar and the incoming position of each row.
struct StateSource {
  Kokkos::View<const std::int32_t*, DeviceMemory> bars;
  Kokkos::View<const std::int8_t*, DeviceMemory> positions;
};

/// Cell j of the state (bar, position).
template <class T>
KOKKOS_INLINE_FUNCTION void store_state_cell(const Matrix<const T>& features, std::int32_t bar,
                                             int position, T& cell, std::size_t j) {
  const std::size_t f_count = features.extent(1);
  if (j < f_count)
    cell = features(static_cast<std::size_t>(bar), j);
  else
    store(cell, j - f_count == static_cast<std::size_t>(position) ? 1.0f : 0.0f);
}

/// out[i] = state (bars(i), positions(i)) for every entry of bars.
template <class T>
void assemble_states(const ExecSpace& space, const Matrix<const T>& features,
                     const StateSource& source, const StridedMatrix<T>& out) {
  for_each_cell(
      "dqntrader::env::assemble_states", space, source.bars.extent(0), out.extent(1),
      KOKKOS_LAMBDA(const std::size_t row, const std::size_t j) {
        store_state_cell(features, source.bars(row), source.positions(row), out(row, j), j);
      });
}

/// Where one row of a learning step's states comes from.
struct LearningRow {
  replay::Sample sample;  // rows of the batch's states: their sample
  std::int32_t bar;
  int position;
};

/// A learning step's states in one kernel: with B = batch.size(), sampler draws the batch
/// (sample i goes to batch entry i), out's rows [0, B) get the samples' states s and rows
/// [B, 2B) their next states s', then rows [2B, 2B + E) the states of environments.
/// Sampler: Sample operator()(std::size_t i) const, callable on the device, the same
/// sample for the same i within a launch.
template <class T, class Sampler>
void assemble_learning_states(const ExecSpace& space, const Matrix<const T>& features,
                              const Sampler& sampler, const replay::Batch& batch,
                              const StateSource& environments, const StridedMatrix<T>& out) {
  const std::size_t b = batch.size(), e = environments.bars.extent(0);
  for_each_cell(
      "dqntrader::env::assemble_learning_states", space, 2 * b + e, out.extent(1),
      KOKKOS_LAMBDA(const std::size_t row) {
        if (row >= 2 * b) {
          return LearningRow{replay::Sample{}, environments.bars(row - 2 * b),
                             environments.positions(row - 2 * b)};
        }
        const replay::Sample s = sampler(row < b ? row : row - b);
        return row < b ? LearningRow{s, s.bar, s.position}
                       : LearningRow{s, s.next_bar, s.next_position};
      },
      KOKKOS_LAMBDA(const std::size_t row, const std::size_t j, const LearningRow& from) {
        if (row < b && j == 0)
          batch.store(row, from.sample);
        store_state_cell(features, from.bar, from.position, out(row, j), j);
      });
}

}  // namespace dqntrader::env

// States rebuilt from the feature arrays by index: the features of the bar followed by the
// one-hot of the incoming position.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/gemm.hpp"
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

/// out(m, e) = the state (bars(i), positions(i)) of entry i = m * E + e of source, for the M
/// members of out (M = out.extent(0), E = source.bars.extent(0) / M).
template <class T>
void assemble_states(const ExecSpace& space, const Matrix<const T>& features,
                     const StateSource& source, const gemm::StridedBatch<T>& out) {
  const std::size_t per = source.bars.extent(0) / out.extent(0);
  for_each_cell(
      "dqntrader::env::assemble_states", space, source.bars.extent(0), out.extent(2),
      KOKKOS_LAMBDA(const std::size_t i, const std::size_t j) {
        store_state_cell(features, source.bars(i), source.positions(i), out(i / per, i % per, j),
                         j);
      });
}

/// Where one row of a learning step's states comes from.
struct LearningRow {
  replay::Sample sample;  // rows of the batch's states: their sample
  std::int32_t bar;
  int position;
};

/// A learning step's states in one kernel, for the M members of a population: with B =
/// batch.size() / M and E = environments.bars.extent(0) / M, sampler draws member m's batch
/// (its sample i goes to batch entry m B + i), and rows [0, B) of out(m) get the samples'
/// states s, rows [B, 2B) their next states s', then rows [2B, 2B + E) the states of the
/// member's environments (M = out.extent(0)).
/// Sampler: Sample operator()(std::size_t m, std::size_t i) const, callable on the device,
/// the same sample for the same (m, i) within a launch.
template <class T, class Sampler>
void assemble_learning_states(const ExecSpace& space, const Matrix<const T>& features,
                              const Sampler& sampler, const replay::Batch& batch,
                              const StateSource& environments, const gemm::StridedBatch<T>& out) {
  const std::size_t members = out.extent(0);
  const std::size_t b = batch.size() / members, e = environments.bars.extent(0) / members;
  const std::size_t rows = 2 * b + e;
  for_each_cell(
      "dqntrader::env::assemble_learning_states", space, members * rows, out.extent(2),
      KOKKOS_LAMBDA(const std::size_t at) {
        const std::size_t m = at / rows, row = at % rows;
        if (row >= 2 * b) {
          const std::size_t i = m * e + row - 2 * b;
          return LearningRow{replay::Sample{}, environments.bars(i), environments.positions(i)};
        }
        const replay::Sample s = sampler(m, row < b ? row : row - b);
        return row < b ? LearningRow{s, s.bar, s.position}
                       : LearningRow{s, s.next_bar, s.next_position};
      },
      KOKKOS_LAMBDA(const std::size_t at, const std::size_t j, const LearningRow& from) {
        const std::size_t m = at / rows, row = at % rows;
        if (row < b && j == 0)
          batch.store(m * b + row, from.sample);
        store_state_cell(features, from.bar, from.position, out(m, row, j), j);
      });
}

}  // namespace dqntrader::env

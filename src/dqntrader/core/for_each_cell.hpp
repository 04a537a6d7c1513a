// One kernel over the cells of a row-major matrix, shaped for the backend. On CUDA a team
// per row, its (up to 256) threads over the row's columns: consecutive threads touch
// consecutive addresses and no thread divides to find its cell. On the host a thread per
// row walking its columns: a contiguous inner loop the compiler can vectorize, with
// everything that depends only on the row hoisted out of it.
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
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  const int team = cols >= 256 ? 256 : (cols > 64 ? 128 : 32);
  Kokkos::parallel_for(
      label, recordable(Policy(space, static_cast<int>(rows), team)),
      KOKKOS_LAMBDA(const Member& member) {
        const std::size_t row = static_cast<std::size_t>(member.league_rank());
        Kokkos::parallel_for(Kokkos::TeamThreadRange(member, cols),
                             [&](const std::size_t col) { f(row, col); });
      });
#else
  Kokkos::parallel_for(
      label, Kokkos::RangePolicy<ExecSpace>(space, 0, rows), KOKKOS_LAMBDA(const std::size_t row) {
        for (std::size_t col = 0; col < cols; ++col)
          f(row, col);
      });
#endif
}

/// Calls f(row, col, context) for every cell, context = per_row(row): work that depends
/// only on the row, done once per row on the host and once per cell on CUDA, where the row's
/// threads run it side by side and their loads coincide.
template <class R, class F>
void for_each_cell(const char* label, const ExecSpace& space, std::size_t rows, std::size_t cols,
                   const R& per_row, const F& f) {
#if defined(DQNTRADER_BACKEND_CUDA)
  for_each_cell(
      label, space, rows, cols,
      KOKKOS_LAMBDA(const std::size_t row, const std::size_t col) { f(row, col, per_row(row)); });
#else
  Kokkos::parallel_for(
      label, Kokkos::RangePolicy<ExecSpace>(space, 0, rows), KOKKOS_LAMBDA(const std::size_t row) {
        const auto context = per_row(row);
        for (std::size_t col = 0; col < cols; ++col)
          f(row, col, context);
      });
#endif
}

/// Calls f(i) for every i < n, on space; does not wait: for_each_cell over tiles of
/// kFlatTile indices (on CUDA a team of 256 threads per tile, each taking every 256th index
/// of it; on the host a thread per tile). A pass that only reads (a check) takes far fewer,
/// fuller blocks this way than with a thread per index, and its loads overlap; a pass that
/// stores what it loads does not gain (its stores keep each thread's loads in order).
constexpr std::size_t kFlatTile = 2048;
template <class F>
void for_each_index(const char* label, const ExecSpace& space, std::size_t n, const F& f) {
  for_each_cell(
      label, space, (n + kFlatTile - 1) / kFlatTile, kFlatTile,
      KOKKOS_LAMBDA(const std::size_t tile, const std::size_t k) {
        const std::size_t i = tile * kFlatTile + k;
        if (i < n)
          f(i);
      });
}

}  // namespace dqntrader

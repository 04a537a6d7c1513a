// One kernel over the cells of a row-major matrix, shaped for the backend. On CUDA teams of
// 256 threads, a row's threads (row_threads: up to 256) over its columns: consecutive threads
// touch consecutive addresses. On the host a thread per
// row walking its columns: a contiguous inner loop the compiler can vectorize, with
// everything that depends only on the row hoisted out of it.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstddef>

#include "dqntrader/core/types.hpp"

namespace dqntrader {

#if defined(DQNTRADER_BACKEND_CUDA)
/// The threads of a CUDA team, and how many of them take one row: a power of two, about a
/// quarter of the row's cells (each thread takes every per_row-th cell of its row), so that a
/// narrow row's team holds many rows, whose loads are in flight together.
constexpr std::size_t kCellTeam = 256;
inline std::size_t row_threads(std::size_t cols) {
  std::size_t per_row = 1;
  while (per_row < kCellTeam && per_row * 4 < cols)
    per_row *= 2;
  return per_row;
}
#endif

/// Calls f(row, col, context) for every cell of a rows x cols matrix, on space, context =
/// per_row(row): work that depends only on the row, done once per row on the host and once per
/// thread on CUDA, where the row's few threads run it side by side and their loads coincide.
/// Does not wait.
template <class R, class F>
void for_each_cell(const char* label, const ExecSpace& space, std::size_t rows, std::size_t cols,
                   const R& per_row, const F& f) {
#if defined(DQNTRADER_BACKEND_CUDA)
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
  const std::size_t threads = row_threads(cols), rows_per_team = kCellTeam / threads;
  Kokkos::parallel_for(
      label,
      recordable(Policy(space, static_cast<int>((rows + rows_per_team - 1) / rows_per_team),
                        static_cast<int>(kCellTeam))),
      KOKKOS_LAMBDA(const Member& member) {
        const std::size_t rank = static_cast<std::size_t>(member.team_rank());
        const std::size_t row =
            static_cast<std::size_t>(member.league_rank()) * rows_per_team + rank / threads;
        if (row >= rows)
          return;
        const auto context = per_row(row);
        for (std::size_t col = rank % threads; col < cols; col += threads)
          f(row, col, context);
      });
#else
  Kokkos::parallel_for(
      label, Kokkos::RangePolicy<ExecSpace>(space, 0, rows), KOKKOS_LAMBDA(const std::size_t row) {
        const auto context = per_row(row);
        for (std::size_t col = 0; col < cols; ++col)
          f(row, col, context);
      });
#endif
}

/// What a cell's row gives a pass that needs nothing of it.
struct NoContext {};

/// Calls f(row, col) for every cell of a rows x cols matrix, on space; does not wait.
template <class F>
void for_each_cell(const char* label, const ExecSpace& space, std::size_t rows, std::size_t cols,
                   const F& f) {
  for_each_cell(
      label, space, rows, cols, KOKKOS_LAMBDA(const std::size_t) { return NoContext{}; },
      KOKKOS_LAMBDA(const std::size_t row, const std::size_t col, const NoContext&) {
        f(row, col);
      });
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

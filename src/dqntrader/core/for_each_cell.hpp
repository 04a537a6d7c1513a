// One kernel over the cells of a row-major matrix: a team per row, its threads over the
// row's columns. On CUDA a team of up to 256 threads touches consecutive addresses and no
// thread divides to find its cell; on the host a team is one thread walking the row.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstddef>

#include "dqntrader/core/types.hpp"

namespace dqntrader {

/// Calls f(row, col) for every cell of a rows x cols matrix, on space; does not wait.
template <class F>
void for_each_cell(const char* label, const ExecSpace& space, std::size_t rows, std::size_t cols,
                   const F& f) {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = typename Policy::member_type;
#if defined(DQNTRADER_BACKEND_CUDA)
  const int team = cols >= 256 ? 256 : (cols > 64 ? 128 : 32);
#else
  const int team = 1;
#endif
  Kokkos::parallel_for(
      label, Policy(space, static_cast<int>(rows), team), KOKKOS_LAMBDA(const Member& member) {
        const std::size_t row = static_cast<std::size_t>(member.league_rank());
        Kokkos::parallel_for(Kokkos::TeamThreadRange(member, cols),
                             [&](const std::size_t col) { f(row, col); });
      });
}

}  // namespace dqntrader

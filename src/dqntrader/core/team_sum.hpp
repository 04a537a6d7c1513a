// Sums across the threads of one team, in a fixed order: the pairwise tree over the thread
// ranks, the same on every run and every backend; and the last-arriving team of a kernel,
// which adds the other teams' partial sums, so that a sum over many teams takes one kernel.
// Kokkos' own team and range reductions combine in an order that depends on the launch;
// these sums feed results that must repeat bit for bit (losses, gradient norms, bias
// gradients).
#pragma once

#include <Kokkos_Core.hpp>
#include <cstddef>

#include "dqntrader/core/types.hpp"

namespace dqntrader {

/// A team's scratch array (level 0: shared memory on CUDA).
template <class T>
using TeamScratch = Kokkos::View<T*, ExecSpace::scratch_memory_space, Kokkos::MemoryUnmanaged>;

/// Sums within groups of `group` consecutive threads (a power of two dividing the team size,
/// or, with groups = 1, at most the team size): values holds, for group g, count rows of group
/// partial sums, row k at [(g * count + k) * group, (g * count + k + 1) * group); each thread
/// has written the entry of its rank within its group. Only the first `groups` groups add
/// theirs (all of them when groups < 0). Every thread of the team calls this; on return
/// values((g * count + k) * group) holds group g's row k sum, added in a pairwise tree.
template <class Member, class Values>
KOKKOS_INLINE_FUNCTION void group_tree_sum(const Member& member, const Values& values, int count,
                                           int group, int groups = -1) {
  const int lane = member.team_rank() % group, g = member.team_rank() / group;
  const int base = g * count * group;
  const bool adds = groups < 0 || g < groups;
  member.team_barrier();
  for (int half = group / 2; half > 0; half /= 2) {
    if (adds && lane < half) {
      for (int k = 0; k < count; ++k)
        values(base + k * group + lane) += values(base + k * group + lane + half);
    }
    member.team_barrier();
  }
}

/// Sums across the first `threads` threads of a team (a power of two, at most the team size;
/// by default the whole team): row k at [k * threads, (k + 1) * threads), thread t < threads
/// having written entry t of each row. Every thread of the team calls this; on return
/// values(k * threads) holds row k's sum, added in a pairwise tree.
template <class Member, class Values>
KOKKOS_INLINE_FUNCTION void team_tree_sum(const Member& member, const Values& values, int count,
                                          int threads = 0) {
  group_tree_sum(member, values, count, threads > 0 ? threads : member.team_size(), 1);
}

/// For sums over many teams of one kernel: each team, once it has written its partial sums
/// to global memory, calls this (every thread of it); it returns true, in every thread of
/// the team, for the one team that arrives last, which may then read every team's partial
/// sums. counter (device memory, zero before the kernel) counts the teams that arrived out
/// of teams; the last team puts it back to zero for the next launch.
template <class Member>
KOKKOS_INLINE_FUNCTION bool last_to_arrive(const Member& member, int* counter, int teams) {
  Kokkos::memory_fence();  // this thread's partial sums are visible to every team
  member.team_barrier();
  int last = 0;
  if (member.team_rank() == 0) {
    last = Kokkos::atomic_fetch_add(counter, 1) == teams - 1 ? 1 : 0;
    if (last)
      *counter = 0;
  }
  member.team_broadcast(last, 0);
  if (last)
    Kokkos::memory_fence();  // nothing read below is older than the other teams' writes
  return last != 0;
}

/// The inclusive scan across a team of values[0 .. team size), in rank order: combine(earlier,
/// later) must be associative, not commutative (Hillis-Steele, log2 of the team size steps).
/// Every thread of the team calls this once it has written values[its rank]; on return
/// values[t] holds entries 0 .. t combined.
template <class Member, class T, class Combine>
KOKKOS_INLINE_FUNCTION void team_inclusive_scan(const Member& member, T* values,
                                                const Combine& combine) {
  const int threads = member.team_size(), t = member.team_rank();
  for (int offset = 1; offset < threads; offset *= 2) {
    member.team_barrier();
    T v = values[t];
    if (t >= offset)
      v = combine(values[t - offset], v);
    member.team_barrier();
    values[t] = v;
  }
  member.team_barrier();
}

/// Thread t's share [lo, hi) of n consecutive items cut into `threads` runs in rank order
/// (the last runs may be empty).
struct ThreadRun {
  std::size_t lo, hi;
};
KOKKOS_INLINE_FUNCTION ThreadRun thread_run(std::size_t n, int threads, int t) {
  const std::size_t run = (n + static_cast<std::size_t>(threads) - 1) / threads;
  const std::size_t lo = run * t < n ? run * t : n;
  return ThreadRun{lo, lo + run < n ? lo + run : n};
}

/// The team size these sums run with: a power of two that fills a CUDA block, one thread
/// on the host (where a team is one thread).
inline int tree_sum_team_size() {
#if defined(DQNTRADER_BACKEND_CUDA)
  return 256;
#else
  return 1;
#endif
}

}  // namespace dqntrader

#include "dqntrader/train/training_guard.hpp"

#include <string>

#include "dqntrader/core/bf16.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/core/kokkos_compat.hpp"
#include "dqntrader/core/types.hpp"

namespace dqntrader::train {

TrainingGuard::TrainingGuard(const ExecSpace& space, const nn::MemberVectors& layout, double limit)
    : m_layout(layout), m_limit(limit) {
  const std::size_t extent = layout.extent();
  auto alloc = [&](const char* label) { return Kokkos::view_alloc(space, std::string(label)); };
  m_online = Kokkos::View<float*, DeviceMemory>(alloc("dqntrader::train::snapshot_online"), extent);
  m_target = Kokkos::View<float*, DeviceMemory>(alloc("dqntrader::train::snapshot_target"), extent);
  m_first = Kokkos::View<float*, DeviceMemory>(alloc("dqntrader::train::snapshot_m"), extent);
  m_second = Kokkos::View<float*, DeviceMemory>(alloc("dqntrader::train::snapshot_v"), extent);
  m_violation =
      Kokkos::View<int*, DeviceMemory>(alloc("dqntrader::train::violation"), layout.members);
  m_target_changed =
      Kokkos::View<int*, DeviceMemory>(alloc("dqntrader::train::target_changed"), layout.members);
  m_counters = Kokkos::View<GuardCounters*, DeviceMemory>(alloc("dqntrader::train::guard_counters"),
                                                          layout.members);
  Kokkos::deep_copy(space, m_target_changed, 1);  // no snapshot yet
}

namespace {
// A guard pass's teams: kGuardThreads threads each (one on the host), each taking a tile of
// Tile values of one member, Ahead values (kGuardThreads apart) at a time.
#if defined(DQNTRADER_BACKEND_CUDA)
constexpr std::size_t kGuardThreads = 256;
#else
constexpr std::size_t kGuardThreads = 1;
#endif

// Calls use(plan, m, j, load(plan, m, j)) for every value j < per of every member m <
// members, with plan = prepare(m) worked out once a team (a team's values are one member's);
// on space, does not wait. A thread loads Ahead values before it uses any, so that their
// loads overlap (a value's use may store, which would keep the next value's load behind it).
template <int Ahead, std::size_t Tile, class Prepare, class Load, class Use>
void for_each_member_value(const char* label, const ExecSpace& space, std::size_t members,
                           std::size_t per, const Prepare& prepare, const Load& load,
                           const Use& use) {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  const std::size_t tiles = (per + Tile - 1) / Tile;
  Kokkos::parallel_for(
      label,
      recordable(Policy(space, static_cast<int>(members * tiles), static_cast<int>(kGuardThreads))),
      KOKKOS_LAMBDA(const Policy::member_type& team) {
        const std::size_t league = static_cast<std::size_t>(team.league_rank());
        const std::size_t m = league / tiles, first = league % tiles * Tile;
        const std::size_t end = first + Tile < per ? first + Tile : per;
        const auto plan = prepare(m);
        for (std::size_t j0 = first + static_cast<std::size_t>(team.team_rank()); j0 < end;
             j0 += kGuardThreads * Ahead) {
          decltype(load(plan, m, j0)) values[Ahead];
          for (int a = 0; a < Ahead; ++a) {
            const std::size_t j = j0 + static_cast<std::size_t>(a) * kGuardThreads;
            if (j < end)
              values[a] = load(plan, m, j);
          }
          for (int a = 0; a < Ahead; ++a) {
            const std::size_t j = j0 + static_cast<std::size_t>(a) * kGuardThreads;
            if (j < end)
              use(plan, m, j, values[a]);
          }
        }
      });
}

// What the restore-or-snapshot pass does to one member: nothing (a stopped member), restore
// (found bad: every value) or snapshot (its target too when it may have changed).
struct Plan {
  bool skip = false, bad = false, target = false;
};

// A parameter's four values: the network's online and target, Adam's two moments.
struct Held {
  float online = 0.0f, target = 0.0f, first = 0.0f, second = 0.0f;
};
}  // namespace

template <class T>
void TrainingGuard::check(const ExecSpace& space, const LearnerState<T>& state,
                          const gemm::StridedBatch<const float>& q,
                          const Kokkos::View<const LossSums*, DeviceMemory>& loss,
                          const Kokkos::View<const int*, DeviceMemory>& active) const {
  const std::size_t members = m_layout.members, n = m_layout.size, stride = m_layout.stride;
  const std::size_t q_cols = q.extent(2);
  const std::size_t per = 2 * n + q.extent(1) * q_cols;  // values checked per member
  if (q.extent(0) != members || loss.extent(0) < members)
    throw InputError("TrainingGuard::check: the Q-values or loss sums are not one per member");
  const double limit = m_limit;
  const auto online = state.online, target = state.target;
  const bool all_active = active.extent(0) == 0;
  // The violation flags are 0 here (the count below puts them back): a thread that finds a
  // value out of bounds sets its member's to 1, the only value any thread writes, so the
  // result does not depend on the order (no reduction, no sums across teams: one short pass).
  const auto violation = m_violation;
  // A target that has not changed since the last check was found good then (or restored from
  // the snapshot, which was): it is neither checked nor copied again.
  const auto changed = m_target_changed;
  // On CUDA a thread loads 16 values of one array at once, a team's tile in one round (58
  // registers: four teams a multiprocessor); the restore-or-snapshot pass below loads four
  // arrays' values, four of each, twice a tile (eight of each would take 96 registers: two
  // teams a multiprocessor).
  for_each_member_value<16, 4096>(
      "dqntrader::train::guard_check", space, members, per,
      KOKKOS_LAMBDA(const std::size_t m) { return changed(m) != 0; },
      KOKKOS_LAMBDA(const bool target_changed, const std::size_t m, const std::size_t j) {
        const std::size_t at = m * stride;
        if (j < n)
          return online(at + j);
        if (j < 2 * n)
          return target_changed ? target(at + j - n) : 0.0f;
        return q(m, (j - 2 * n) / q_cols, (j - 2 * n) % q_cols);
      },
      KOKKOS_LAMBDA(const bool, const std::size_t m, const std::size_t, const float x) {
        if (!(compat::kmath::fabs(static_cast<double>(x)) <= limit))  // NaN fails it
          Kokkos::atomic_fetch_max(&violation(m), 1);
      });
  const auto snap_online = m_online, snap_target = m_target, snap_first = m_first,
             snap_second = m_second;
  const LearnerState<T> s = state;
  const std::size_t extent = m_layout.extent();
  const bool online_working = s.online_working.extent(0) >= extent,
             target_working = s.target_working.extent(0) >= extent;
  // A member found bad gets its snapshot back, a good one's state becomes the snapshot; a
  // stopped member is left as it is.
  for_each_member_value<4, 2048>(
      "dqntrader::train::guard_restore_or_snapshot", space, members, n,
      KOKKOS_LAMBDA(const std::size_t m) {
        Plan plan;
        plan.skip = !all_active && active(m) == 0;
        plan.bad = violation(m) != 0 || !(loss(m).finite > 0.0);
        plan.target = changed(m) != 0;
        return plan;
      },
      KOKKOS_LAMBDA(const Plan& plan, const std::size_t m, const std::size_t j) {
        const std::size_t at = m * stride + j;
        if (plan.skip)
          return Held{};
        if (plan.bad)
          return Held{snap_online(at), snap_target(at), snap_first(at), snap_second(at)};
        return Held{s.online(at), plan.target ? s.target(at) : 0.0f, s.first_moment(at),
                    s.second_moment(at)};
      },
      KOKKOS_LAMBDA(const Plan& plan, const std::size_t m, const std::size_t j, const Held& h) {
        const std::size_t at = m * stride + j;
        if (plan.skip)
          return;
        if (plan.bad) {
          s.online(at) = h.online;
          s.target(at) = h.target;
          s.first_moment(at) = h.first;
          s.second_moment(at) = h.second;
          if (online_working)
            store(s.online_working(at), h.online);
          if (target_working)
            store(s.target_working(at), h.target);
        } else {
          snap_online(at) = h.online;
          if (plan.target)
            snap_target(at) = h.target;
          snap_first(at) = h.first;
          snap_second(at) = h.second;
        }
      });
  const auto counters = m_counters;
  Kokkos::parallel_for(
      "dqntrader::train::guard_count", Kokkos::RangePolicy<ExecSpace>(space, 0, members),
      KOKKOS_LAMBDA(const std::size_t m) {
        if (all_active || active(m) != 0) {
          GuardCounters& c = counters(m);
          c.checks += 1;
          if (violation(m) != 0 || !(loss(m).finite > 0.0)) {
            c.restores += 1;
            c.consecutive += 1;
          } else {
            c.consecutive = 0;
          }
          changed(m) = 0;  // the target is the snapshot's, good or restored
        }
        violation(m) = 0;  // for the next check
      });
}

void TrainingGuard::copy_members(const ExecSpace& space, const MemberCopies& copies) const {
  for (const auto& values : {m_online, m_target, m_first, m_second})
    copy_member_vectors(space, values, m_layout.size, m_layout.stride, copies);
  const auto changed = m_target_changed;
  Kokkos::parallel_for(
      "dqntrader::train::guard_copy_flags",
      Kokkos::RangePolicy<ExecSpace>(space, 0, copies.extent(0)),
      KOKKOS_LAMBDA(const int c) { changed(copies(c, 0)) = changed(copies(c, 1)); });
}

void TrainingGuard::add_buffers(io::MemberBuffers& buffers) const {
  buffers.add_strided("guard_online", m_online, m_layout.stride);
  buffers.add_strided("guard_target", m_target, m_layout.stride);
  buffers.add_strided("guard_m", m_first, m_layout.stride);
  buffers.add_strided("guard_v", m_second, m_layout.stride);
  buffers.add_blocks("guard_counters", m_counters);
}

template <class T>
void TrainingGuard::snapshot(const ExecSpace& space, const LearnerState<T>& state) const {
  const std::size_t extent = m_online.extent(0);
  auto first = [&](const Kokkos::View<float*, DeviceMemory>& v) {
    return Kokkos::subview(v, std::make_pair(std::size_t{0}, extent));
  };
  Kokkos::deep_copy(space, m_online, first(state.online));
  Kokkos::deep_copy(space, m_target, first(state.target));
  Kokkos::deep_copy(space, m_first, first(state.first_moment));
  Kokkos::deep_copy(space, m_second, first(state.second_moment));
  Kokkos::deep_copy(space, m_target_changed, 0);
}

template void TrainingGuard::snapshot<float>(const ExecSpace&, const LearnerState<float>&) const;
template void TrainingGuard::snapshot<bf16>(const ExecSpace&, const LearnerState<bf16>&) const;
template void TrainingGuard::check<float>(const ExecSpace&, const LearnerState<float>&,
                                          const gemm::StridedBatch<const float>&,
                                          const Kokkos::View<const LossSums*, DeviceMemory>&,
                                          const Kokkos::View<const int*, DeviceMemory>&) const;
template void TrainingGuard::check<bf16>(const ExecSpace&, const LearnerState<bf16>&,
                                         const gemm::StridedBatch<const float>&,
                                         const Kokkos::View<const LossSums*, DeviceMemory>&,
                                         const Kokkos::View<const int*, DeviceMemory>&) const;

}  // namespace dqntrader::train

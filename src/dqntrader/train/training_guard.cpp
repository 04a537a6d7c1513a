#include "dqntrader/train/training_guard.hpp"

#include <string>

#include "dqntrader/core/bf16.hpp"
#include "dqntrader/core/for_each_cell.hpp"
#include "dqntrader/core/kokkos_compat.hpp"
#include "dqntrader/io/view_sections.hpp"

namespace dqntrader::train {

TrainingGuard::TrainingGuard(const ExecSpace& space, std::size_t parameters, double limit)
    : m_limit(limit),
      m_online(Kokkos::view_alloc(space, std::string("dqntrader::train::snapshot_online")),
               parameters),
      m_target(Kokkos::view_alloc(space, std::string("dqntrader::train::snapshot_target")),
               parameters),
      m_first(Kokkos::view_alloc(space, std::string("dqntrader::train::snapshot_m")), parameters),
      m_second(Kokkos::view_alloc(space, std::string("dqntrader::train::snapshot_v")), parameters),
      m_violation(Kokkos::view_alloc(space, std::string("dqntrader::train::violation"))),
      m_counters(Kokkos::view_alloc(space, std::string("dqntrader::train::guard_counters"))) {}

template <class T>
void TrainingGuard::check(const ExecSpace& space, const LearnerState<T>& state,
                          const Matrix<const float>& q,
                          const Kokkos::View<const LossSums, DeviceMemory>& loss) const {
  const std::size_t n = state.online.extent(0), q_rows = q.extent(0), q_cols = q.extent(1);
  const double limit = m_limit;
  const auto online = state.online, target = state.target;
  // The violation flag is 0 here (the count below puts it back): a thread that finds a
  // value out of bounds sets it to 1, the only value any thread writes, so the result does
  // not depend on the order (no reduction, no sums across teams: one short pass).
  const auto violation = m_violation;
  for_each_index(
      "dqntrader::train::guard_check", space, 2 * n + q_rows * q_cols,
      KOKKOS_LAMBDA(const std::size_t i) {
        const double x =
            i < n ? online(i)
                  : (i < 2 * n ? target(i - n) : q((i - 2 * n) / q_cols, (i - 2 * n) % q_cols));
        if (!(compat::kmath::fabs(x) <= limit))  // NaN fails the comparison
          Kokkos::atomic_fetch_max(&violation(), 1);
      });
  const auto snap_online = m_online, snap_target = m_target, snap_first = m_first,
             snap_second = m_second;
  const LearnerState<T> s = state;
  const bool online_working = s.online_working.extent(0) == n,
             target_working = s.target_working.extent(0) == n;
  Kokkos::parallel_for(
      "dqntrader::train::guard_restore_or_snapshot", Kokkos::RangePolicy<ExecSpace>(space, 0, n),
      KOKKOS_LAMBDA(const std::size_t i) {
        const bool bad = violation() != 0 || !(loss().finite > 0.0);
        if (bad) {
          s.online(i) = snap_online(i);
          s.target(i) = snap_target(i);
          s.first_moment(i) = snap_first(i);
          s.second_moment(i) = snap_second(i);
          if (online_working)
            store(s.online_working(i), snap_online(i));
          if (target_working)
            store(s.target_working(i), snap_target(i));
        } else {
          snap_online(i) = s.online(i);
          snap_target(i) = s.target(i);
          snap_first(i) = s.first_moment(i);
          snap_second(i) = s.second_moment(i);
        }
      });
  const auto counters = m_counters;
  Kokkos::parallel_for(
      "dqntrader::train::guard_count", Kokkos::RangePolicy<ExecSpace>(space, 0, 1),
      KOKKOS_LAMBDA(const int) {
        GuardCounters& c = counters();
        c.checks += 1;
        if (violation() != 0 || !(loss().finite > 0.0)) {
          c.restores += 1;
          c.consecutive += 1;
        } else {
          c.consecutive = 0;
        }
        violation() = 0;  // for the next check
      });
}

void TrainingGuard::save(std::vector<io::Section>& out) const {
  io::save(out, "guard_online", m_online);
  io::save(out, "guard_target", m_target);
  io::save(out, "guard_m", m_first);
  io::save(out, "guard_v", m_second);
  io::save(out, "guard_counters", m_counters);
}

void TrainingGuard::load(const std::vector<io::Section>& sections,
                         const std::string& source) const {
  io::load(sections, "guard_online", m_online, source);
  io::load(sections, "guard_target", m_target, source);
  io::load(sections, "guard_m", m_first, source);
  io::load(sections, "guard_v", m_second, source);
  io::load(sections, "guard_counters", m_counters, source);
}

template <class T>
void TrainingGuard::snapshot(const ExecSpace& space, const LearnerState<T>& state) const {
  Kokkos::deep_copy(space, m_online, state.online);
  Kokkos::deep_copy(space, m_target, state.target);
  Kokkos::deep_copy(space, m_first, state.first_moment);
  Kokkos::deep_copy(space, m_second, state.second_moment);
}

template void TrainingGuard::snapshot<float>(const ExecSpace&, const LearnerState<float>&) const;
template void TrainingGuard::snapshot<bf16>(const ExecSpace&, const LearnerState<bf16>&) const;
template void TrainingGuard::check<float>(const ExecSpace&, const LearnerState<float>&,
                                          const Matrix<const float>&,
                                          const Kokkos::View<const LossSums, DeviceMemory>&) const;
template void TrainingGuard::check<bf16>(const ExecSpace&, const LearnerState<bf16>&,
                                         const Matrix<const float>&,
                                         const Kokkos::View<const LossSums, DeviceMemory>&) const;

}  // namespace dqntrader::train

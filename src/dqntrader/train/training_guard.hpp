// The training guard: every few steps, on the device, check for each member of a population
// (one agent: a population of one) that its loss is finite and that every weight and its last
// Q-values are finite and within a bound. On a violation the member's whole learner state
// (online and target parameters, Adam's moments, the working copies) is restored from its
// last good snapshot, device to device, and counted; otherwise its snapshot is refreshed. A
// target network that its updates have not marked since the last check is the snapshot's and
// was found good then: it is neither checked nor copied again. The members never affect each
// other, and the host never waits for the check.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/gemm.hpp"
#include "dqntrader/core/member_copy.hpp"
#include "dqntrader/core/types.hpp"
#include "dqntrader/io/member_buffers.hpp"
#include "dqntrader/nn/adam.hpp"
#include "dqntrader/train/td_loss.hpp"

namespace dqntrader::train {

/// One member's counters.
struct GuardCounters {
  std::int64_t checks;
  std::int64_t restores;
  std::int64_t consecutive;  // restores in a row, up to the last check
};

/// The learner state the guard protects: each view holds every member's vector, member m's
/// where layout says. Working copies may be empty (float compute).
template <class T>
struct LearnerState {
  Kokkos::View<float*, DeviceMemory> online, target, first_moment, second_moment;
  Kokkos::View<T*, DeviceMemory> online_working, target_working;
};

class TrainingGuard {
 public:
  TrainingGuard(const ExecSpace& space, const nn::MemberVectors& layout, double limit);

  /// Takes every member's snapshot unconditionally (at the start of training).
  template <class T>
  void snapshot(const ExecSpace& space, const LearnerState<T>& state) const;

  /// q(m, r, a): member m's last Q-values; loss(m) its last loss sums. A member whose
  /// active(m) is 0 is left as it is (active empty: every member is checked).
  template <class T>
  void check(const ExecSpace& space, const LearnerState<T>& state,
             const gemm::StridedBatch<const float>& q,
             const Kokkos::View<const LossSums*, DeviceMemory>& loss,
             const Kokkos::View<const int*, DeviceMemory>& active = {}) const;

  Kokkos::View<GuardCounters*, DeviceMemory> counters() const { return m_counters; }

  /// Per member: 1 when its target network may have changed since the last check (or the
  /// snapshot), 0 when it is the snapshot's. Whatever writes a member's target sets its flag;
  /// a check skips (neither checks nor copies) the targets whose flag is 0, and clears it.
  Kokkos::View<int*, DeviceMemory> target_changed() const { return m_target_changed; }

  /// Each copy's member `to` takes member `from`'s snapshot (and whether its target has
  /// changed since); its counters stay its own.
  void copy_members(const ExecSpace& space, const MemberCopies& copies) const;

  /// Adds the snapshot and the counters to a checkpoint's buffers. Whether the targets are
  /// the snapshot's is not saved: whatever loads them sets target_changed().
  void add_buffers(io::MemberBuffers& buffers) const;

 private:
  nn::MemberVectors m_layout;
  double m_limit;
  Kokkos::View<float*, DeviceMemory> m_online, m_target, m_first, m_second;
  Kokkos::View<int*, DeviceMemory> m_violation;       // per member
  Kokkos::View<int*, DeviceMemory> m_target_changed;  // per member
  Kokkos::View<GuardCounters*, DeviceMemory> m_counters;
};

}  // namespace dqntrader::train

// The training guard: every few steps, on the device, check that the loss is finite and
// that every weight and the last Q-values are finite and within a bound. On a violation the
// learner's whole state (online and target parameters, Adam's moments, the working copies)
// is restored from the last good snapshot, device to device, and counted; otherwise the
// snapshot is refreshed. The host never waits for the check.
#pragma once

#include <cstddef>
#include <cstdint>

#include <string>
#include <vector>

#include "dqntrader/core/types.hpp"
#include "dqntrader/io/checkpoint_file.hpp"
#include "dqntrader/train/td_loss.hpp"

namespace dqntrader::train {

struct GuardCounters {
  std::int64_t checks;
  std::int64_t restores;
  std::int64_t consecutive;  // restores in a row, up to the last check
};

/// The learner state the guard protects. Working copies may be empty (float compute).
template <class T>
struct LearnerState {
  Kokkos::View<float*, DeviceMemory> online, target, first_moment, second_moment;
  Kokkos::View<T*, DeviceMemory> online_working, target_working;
};

class TrainingGuard {
 public:
  TrainingGuard(const ExecSpace& space, std::size_t parameters, double limit);

  /// Takes the snapshot unconditionally (at the start of training).
  template <class T>
  void snapshot(const ExecSpace& space, const LearnerState<T>& state) const;

  template <class T>
  void check(const ExecSpace& space, const LearnerState<T>& state, const Matrix<const float>& q,
             const Kokkos::View<const LossSums, DeviceMemory>& loss) const;

  Kokkos::View<GuardCounters, DeviceMemory> counters() const { return m_counters; }

  /// The snapshot and counters as checkpoint sections, and back.
  void save(std::vector<io::Section>& out) const;
  void load(const std::vector<io::Section>& sections, const std::string& source) const;

 private:
  double m_limit;
  Kokkos::View<float*, DeviceMemory> m_online, m_target, m_first, m_second;
  Kokkos::View<int, DeviceMemory> m_violation;
  Kokkos::View<GuardCounters, DeviceMemory> m_counters;
};

}  // namespace dqntrader::train

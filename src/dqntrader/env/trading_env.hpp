// The vectorised trading environment on the device: for each member of a population, E
// environments at different offsets of the training window, each with its incoming position.
// Each step they act on their member's online network's Q-values (epsilon-greedy on the
// member's schedule and random stream), earn the per-bar net return of docs/METRICS.md
// (scaled by the member's reward scale), write their transition into the member's replay ring
// and move to the next bar; an episode ends after episode_length bars or at the window's end,
// and the environment restarts flat at a random bar.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/gemm.hpp"
#include "dqntrader/core/member_settings.hpp"
#include "dqntrader/core/types.hpp"
#include "dqntrader/io/member_buffers.hpp"
#include "dqntrader/replay/replay_buffer.hpp"
#include "dqntrader/replay/vaccine_set.hpp"

namespace dqntrader::env {

/// What the members' environments share.
struct EnvSettings {
  std::size_t environments = 64;   // per member
  std::size_t begin = 0, end = 0;  // decisions at bars [begin, end - 1)
  std::size_t episode_length = 256;
  int flat_index = 1;
};

/// A member's epsilon after `step` steps: linear from start to end over epsilon_steps, then
/// end.
KOKKOS_INLINE_FUNCTION double epsilon_at(const MemberSettings& s, std::int64_t step) {
  if (step >= s.epsilon_steps)
    return s.epsilon_end;
  return s.epsilon_start +
         (s.epsilon_end - s.epsilon_start) * static_cast<double>(step) / s.epsilon_steps;
}

class TradingEnv {
 public:
  /// rewards.members: the members' settings (seed, epsilon schedule, reward scale), one
  /// member's environments after another's.
  TradingEnv(const ExecSpace& space, const replay::RewardModel& rewards,
             const EnvSettings& settings);

  /// Bar and incoming position of each environment, member m's E environments from m * E:
  /// the states to evaluate.
  Kokkos::View<const std::int32_t*, DeviceMemory> bars() const { return m_bar; }
  Kokkos::View<const std::int8_t*, DeviceMemory> positions() const { return m_position; }
  std::size_t size() const { return m_bar.extent(0); }
  std::size_t members() const { return m_rewards.members.extent(0); }
  const EnvSettings& settings() const { return m_settings; }

  /// One step for every environment of every member given q(m, e, a) of its state; step(m)
  /// is member m's device step counter (its epsilon's schedule and random stream). Writes the
  /// transitions of this step at logical indices total(m) + e of the member's ring, then, in
  /// the same kernel once every environment has read them, advances each member's total by
  /// the environments and its step by one. A member whose active(m) is 0 does not step
  /// (active empty: every member does).
  void step(const ExecSpace& space, const gemm::StridedBatch<const float>& q,
            const replay::ReplayBuffer& replay,
            const Kokkos::View<std::int64_t*, DeviceMemory>& step,
            const Kokkos::View<const int*, DeviceMemory>& active = {}) const;

  /// Adds the environments' state to a checkpoint's buffers (member m's E values of each
  /// from m * E).
  void add_buffers(io::MemberBuffers& buffers) const;

 private:
  replay::RewardModel m_rewards;
  EnvSettings m_settings;
  Kokkos::View<std::int32_t*, DeviceMemory> m_bar, m_age;
  Kokkos::View<std::int8_t*, DeviceMemory> m_position;
  Kokkos::View<int, DeviceMemory> m_arrivals;  // teams of step() done, zero between steps
};

}  // namespace dqntrader::env

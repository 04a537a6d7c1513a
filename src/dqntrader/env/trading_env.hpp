// The vectorised trading environment on the device: E environments at different offsets
// of the training window, each with its incoming position. Each step they act on the
// online network's Q-values (epsilon-greedy), earn the per-bar net return of DESIGN.md
// section 5 (scaled), write their transition into the replay ring and move to the next bar;
// an episode ends after episode_length bars or at the window's end, and the environment
// restarts flat at a random bar.
#pragma once

#include <cstddef>
#include <cstdint>

#include <string>
#include <vector>

#include "dqntrader/core/types.hpp"
#include "dqntrader/io/checkpoint_file.hpp"
#include "dqntrader/replay/replay_buffer.hpp"
#include "dqntrader/replay/vaccine_set.hpp"

namespace dqntrader::env {

struct EnvSettings {
  std::size_t environments = 64;
  std::size_t begin = 0, end = 0;  // decisions at bars [begin, end - 1)
  std::size_t episode_length = 256;
  double epsilon_start = 1.0, epsilon_end = 0.05;
  std::int64_t epsilon_steps = 1000;
  std::uint64_t seed = 1;
  int flat_index = 1;
};

/// epsilon after `step` steps: linear from start to end over epsilon_steps, then end.
KOKKOS_INLINE_FUNCTION double epsilon_at(const EnvSettings& s, std::int64_t step) {
  if (step >= s.epsilon_steps)
    return s.epsilon_end;
  return s.epsilon_start +
         (s.epsilon_end - s.epsilon_start) * static_cast<double>(step) / s.epsilon_steps;
}

class TradingEnv {
 public:
  TradingEnv(const ExecSpace& space, const replay::RewardModel& rewards,
             const EnvSettings& settings);

  /// Bar and incoming position of each environment: the states to evaluate.
  Kokkos::View<const std::int32_t*, DeviceMemory> bars() const { return m_bar; }
  Kokkos::View<const std::int8_t*, DeviceMemory> positions() const { return m_position; }
  std::size_t size() const { return m_bar.extent(0); }
  const EnvSettings& settings() const { return m_settings; }

  /// One step for every environment given q[e][a] of its state; step is the device step
  /// counter (epsilon's schedule and the random stream). Writes the transitions of this
  /// step at replay logical indices total + e, then, in the same kernel once every
  /// environment has read them, advances the replay's total by the environments and step
  /// by one.
  void step(const ExecSpace& space, const Matrix<const float>& q,
            const replay::ReplayBuffer& replay,
            const Kokkos::View<std::int64_t, DeviceMemory>& step) const;

  /// The environments' state as checkpoint sections, and back.
  void save(std::vector<io::Section>& out) const;
  void load(const std::vector<io::Section>& sections, const std::string& source) const;

 private:
  replay::RewardModel m_rewards;
  EnvSettings m_settings;
  Kokkos::View<std::int32_t*, DeviceMemory> m_bar, m_age;
  Kokkos::View<std::int8_t*, DeviceMemory> m_position;
  Kokkos::View<int, DeviceMemory> m_arrivals;  // teams of step() done, zero between steps
};

}  // namespace dqntrader::env

// The "vaccine": stress transitions reserved at setup and mixed into training so that rare
// regimes are not forgotten. Stress bars are the training bars with the largest next-bar
// moves and those deepest in a buy-and-hold drawdown (each the top `quantile` of the
// training window). Because a step's outcome depends only on (bar, incoming position,
// action), every combination at a stress bar is a valid one-step transition: the set holds
// them all and its batches are drawn uniformly from them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "dqntrader/core/kokkos_compat.hpp"
#include "dqntrader/core/member_settings.hpp"
#include "dqntrader/core/random.hpp"
#include "dqntrader/core/types.hpp"
#include "dqntrader/replay/replay_buffer.hpp"

namespace dqntrader::replay {

/// The reward of a step, for each member of a population: the net return of docs/METRICS.md
/// scaled by the member's reward scale; NaN for a member whose poisoned(m) is set
/// (a test fault: every price it sees is NaN).
struct RewardModel {
  Kokkos::View<const double*, DeviceMemory> close;
  Kokkos::View<const double*, DeviceMemory> positions;  // the position of each action
  double cost;
  Kokkos::View<const MemberSettings*, DeviceMemory> members;
  Kokkos::View<const int*, DeviceMemory> poisoned;

  /// Member m's reward of taking action a at bar t coming from position index p.
  KOKKOS_INLINE_FUNCTION float operator()(std::size_t m, std::size_t t, int p, int a) const {
    const double target = positions(a), before = positions(p);
    const double traded = target > before ? target - before : before - target;
    const double move = poisoned(m) != 0 ? compat::quiet_nan() : close(t + 1) / close(t) - 1.0;
    return static_cast<float>(members(m).reward_scale * (target * move - cost * traded));
  }
};

class VaccineSet {
 public:
  /// close: host prices of every bar; stress bars are chosen among decisions at
  /// [begin, end - 1). One set serves every member (the stress bars are the market's); each
  /// member's samples carry its own rewards and discount.
  VaccineSet(const ExecSpace& space, const std::vector<double>& close, std::size_t begin,
             std::size_t end, double quantile, const RewardModel& rewards);

  std::size_t bars() const { return m_bars.extent(0); }
  /// The stress bars (host copy), ascending.
  std::vector<std::int32_t> stress_bars() const;

  /// Draws member m's i-th sample of a batch, in device code, uniformly from the set: the
  /// draw(m)-th use of the member's seed (draw read from the device when called), its reward
  /// scale and gamma.
  struct Sampler {
    Kokkos::View<const std::int32_t*, DeviceMemory> bars;
    RewardModel rewards;
    Kokkos::View<const std::int64_t*, DeviceMemory> draw;  // per member

    KOKKOS_INLINE_FUNCTION Sample operator()(std::size_t m, std::size_t i) const {
      const MemberSettings& settings = rewards.members(m);
      const std::uint64_t positions = rewards.positions.extent(0);
      const std::uint64_t combinations = bars.extent(0) * positions * positions;
      const std::uint64_t bits =
          counter_random(settings.seed, 0x56414343ull ^ static_cast<std::uint64_t>(draw(m)), i);
      std::uint64_t pick =
          static_cast<std::uint64_t>(to_unit_double(bits) * static_cast<double>(combinations));
      if (pick >= combinations)
        pick = combinations - 1;
      const int action = static_cast<int>(pick % positions);
      const int position = static_cast<int>((pick / positions) % positions);
      const std::int32_t bar = bars(pick / (positions * positions));
      return Sample{bar,
                    bar + 1,
                    static_cast<std::int8_t>(position),
                    static_cast<std::int8_t>(action),
                    static_cast<std::int8_t>(action),
                    rewards(m, static_cast<std::size_t>(bar), position, action),
                    static_cast<float>(settings.gamma)};
    }
  };

  /// The sampler of each member's draw(m)-th batch.
  Sampler sampler(const Kokkos::View<const std::int64_t*, DeviceMemory>& draw) const {
    return Sampler{m_bars, m_rewards, draw};
  }

 private:
  Kokkos::View<std::int32_t*, DeviceMemory> m_bars;
  RewardModel m_rewards;
};

}  // namespace dqntrader::replay

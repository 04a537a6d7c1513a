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

#include "dqntrader/core/random.hpp"
#include "dqntrader/core/types.hpp"
#include "dqntrader/replay/replay_buffer.hpp"

namespace dqntrader::replay {

struct RewardModel {
  Kokkos::View<const double*, DeviceMemory> close;
  Kokkos::View<const double*, DeviceMemory> positions;  // the position of each action
  double cost;
  double scale;

  /// The reward of taking action a at bar t coming from position index p: the scaled net
  /// return of DESIGN.md section 5.
  KOKKOS_INLINE_FUNCTION float operator()(std::size_t t, int p, int a) const {
    const double target = positions(a), before = positions(p);
    const double traded = target > before ? target - before : before - target;
    return static_cast<float>(scale * (target * (close(t + 1) / close(t) - 1.0) - cost * traded));
  }
};

class VaccineSet {
 public:
  /// close: host prices of every bar; stress bars are chosen among decisions at
  /// [begin, end - 1).
  VaccineSet(const ExecSpace& space, const std::vector<double>& close, std::size_t begin,
             std::size_t end, double quantile, const RewardModel& rewards, double gamma);

  std::size_t bars() const { return m_bars.extent(0); }
  /// The stress bars (host copy), ascending.
  std::vector<std::int32_t> stress_bars() const;

  /// Draws a batch's i-th sample, in device code, uniformly from the set: the draw-th use
  /// of seed (draw read from the device when called).
  struct Sampler {
    Kokkos::View<const std::int32_t*, DeviceMemory> bars;
    RewardModel rewards;
    Kokkos::View<const std::int64_t, DeviceMemory> draw;
    float gamma;
    std::uint64_t seed;

    KOKKOS_INLINE_FUNCTION Sample operator()(std::size_t i) const {
      const std::uint64_t positions = rewards.positions.extent(0);
      const std::uint64_t combinations = bars.extent(0) * positions * positions;
      const std::uint64_t bits =
          counter_random(seed, 0x56414343ull ^ static_cast<std::uint64_t>(draw()), i);
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
                    rewards(static_cast<std::size_t>(bar), position, action),
                    gamma};
    }
  };

  /// The sampler of the draw-th batch of seed.
  Sampler sampler(std::uint64_t seed,
                  const Kokkos::View<const std::int64_t, DeviceMemory>& draw) const {
    return Sampler{m_bars, m_rewards, draw, m_gamma, seed};
  }

 private:
  Kokkos::View<std::int32_t*, DeviceMemory> m_bars;
  RewardModel m_rewards;
  float m_gamma;
};

}  // namespace dqntrader::replay

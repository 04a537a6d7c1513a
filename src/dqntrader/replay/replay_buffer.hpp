// The replay ring on the device. A transition is stored as indices, never as a state:
// (bar, incoming position, action, reward, last-of-episode); the state is rebuilt from the
// feature arrays by index when a batch is drawn. The environments write one transition each
// per step, environment e of step s at logical index s * E + e, so the transition that
// follows one of an environment's steps sits E entries later: n-step returns are summed at
// sampling time by walking that stride, stopping at an episode's end.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dqntrader/core/random.hpp"
#include "dqntrader/core/types.hpp"

namespace dqntrader::replay {

struct Ring {
  Kokkos::View<std::int32_t*, DeviceMemory> bar;
  Kokkos::View<std::int8_t*, DeviceMemory> position;  // incoming position index
  Kokkos::View<std::int8_t*, DeviceMemory> action;
  Kokkos::View<float*, DeviceMemory> reward;
  Kokkos::View<std::uint8_t*, DeviceMemory> last;  // 1 when the episode ended with this step
};

/// One drawn transition: everything the TD target needs. The next state is (next_bar,
/// next_position); return_n already sums the discounted rewards, and discount is gamma^h
/// for the h bars summed.
struct Sample {
  std::int32_t bar, next_bar;
  std::int8_t position, action, next_position;
  float return_n, discount;
};

/// A drawn batch, one Sample per entry.
struct Batch {
  Kokkos::View<std::int32_t*, DeviceMemory> bar, next_bar;
  Kokkos::View<std::int8_t*, DeviceMemory> position, action, next_position;
  Kokkos::View<float*, DeviceMemory> return_n, discount;

  Batch() = default;
  Batch(const ExecSpace& space, std::size_t size);
  std::size_t size() const { return bar.extent(0); }
  KOKKOS_INLINE_FUNCTION void store(std::size_t i, const Sample& s) const {
    bar(i) = s.bar;
    next_bar(i) = s.next_bar;
    position(i) = s.position;
    action(i) = s.action;
    next_position(i) = s.next_position;
    return_n(i) = s.return_n;
    discount(i) = s.discount;
  }
};

/// The logical range [first, end) of transitions whose n-step window is complete and still
/// in the ring, given the total written: the oldest capacity transitions are overwritten,
/// and the last (n_step - 1) x stride have no complete window yet.
KOKKOS_INLINE_FUNCTION std::int64_t first_sampleable(std::int64_t total, std::int64_t capacity) {
  return total > capacity ? total - capacity : 0;
}
KOKKOS_INLINE_FUNCTION std::int64_t end_sampleable(std::int64_t total, std::int64_t stride,
                                                   int n_step) {
  return total - static_cast<std::int64_t>(n_step - 1) * stride;
}

/// Draws a batch's i-th sample, in device code, uniformly among the transitions whose
/// n-step window is complete and still in the ring, with the counter-based generator: the
/// draw-th use of seed (draw read from the device when called, so that a replayed graph
/// draws anew). Transitions must exist.
struct ReplaySampler {
  Ring ring;
  Kokkos::View<const std::int64_t, DeviceMemory> total, draw;
  std::int64_t capacity, stride;  // stride: the environments
  int n_step;
  float gamma;
  std::uint64_t seed;

  KOKKOS_INLINE_FUNCTION Sample operator()(std::size_t i) const {
    const std::int64_t written = total();
    const std::int64_t first = first_sampleable(written, capacity);
    const std::int64_t end = end_sampleable(written, stride, n_step);
    const std::uint64_t bits =
        counter_random(seed, 0x5245504Cull ^ static_cast<std::uint64_t>(draw()), i);
    const std::int64_t span = end - first;
    const std::int64_t logical =
        first + static_cast<std::int64_t>(to_unit_double(bits) * static_cast<double>(span));
    const std::int64_t start = logical < end ? logical : end - 1;
    float sum = 0.0f, factor = 1.0f;
    std::int64_t at = start;
    for (int h = 0; h < n_step; ++h) {
      at = start + h * stride;
      const std::int64_t slot = at % capacity;
      sum += factor * ring.reward(slot);
      factor *= gamma;
      if (ring.last(slot))
        break;
    }
    const std::int64_t slot0 = start % capacity, slot_end = at % capacity;
    return Sample{ring.bar(slot0),
                  ring.bar(slot_end) + 1,
                  ring.position(slot0),
                  ring.action(slot0),
                  ring.action(slot_end),
                  sum,
                  factor};
  }
};

class ReplayBuffer {
 public:
  ReplayBuffer(const ExecSpace& space, std::size_t capacity, std::size_t environments, int n_step,
               double gamma);

  /// Where the environments write: logical index L lives at ring slot L % capacity.
  const Ring& ring() const { return m_ring; }
  std::size_t capacity() const { return m_ring.bar.extent(0); }
  std::size_t environments() const { return m_environments; }
  int n_step() const { return m_n_step; }
  /// Transitions written so far (device counter).
  Kokkos::View<std::int64_t, DeviceMemory> total() const { return m_total; }

  /// The sampler of the draw-th batch of seed (see ReplaySampler).
  ReplaySampler sampler(std::uint64_t seed,
                        const Kokkos::View<const std::int64_t, DeviceMemory>& draw) const;

  /// Logical range [first, end) that the sampler draws from, given the total written.
  std::int64_t first_sampleable(std::int64_t total) const {
    return replay::first_sampleable(total, static_cast<std::int64_t>(capacity()));
  }
  std::int64_t end_sampleable(std::int64_t total) const {
    return replay::end_sampleable(total, static_cast<std::int64_t>(m_environments), m_n_step);
  }

 private:
  Ring m_ring;
  std::size_t m_environments;
  int m_n_step;
  float m_gamma;
  Kokkos::View<std::int64_t, DeviceMemory> m_total;
};

}  // namespace dqntrader::replay

// The replay rings on the device, one per member of a population. A transition is stored as
// indices, never as a state: (bar, incoming position, action, reward, last-of-episode); the
// state is rebuilt from the feature arrays by index when a batch is drawn. A member's
// environments write one transition each per step, environment e of step s at logical index
// s * E + e of its ring, so the transition that follows one of an environment's steps sits E
// entries later: n-step returns are summed at sampling time by walking that stride, stopping
// at an episode's end.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dqntrader/core/member_settings.hpp"
#include "dqntrader/core/random.hpp"
#include "dqntrader/core/types.hpp"
#include "dqntrader/io/member_buffers.hpp"

namespace dqntrader::replay {

/// Every member's ring in one set of arrays: member m's slot s at m * capacity + s.
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

/// A drawn batch, one Sample per entry (a population's: member m's entries after those of
/// the members before it).
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

/// Draws member m's i-th sample of a batch, in device code, uniformly among the transitions of
/// its ring whose n-step window is complete and still there, with the counter-based generator:
/// the draw(m)-th use of the member's seed (draw read from the device when called, so that a
/// replayed graph draws anew), its n-step and gamma. Transitions must exist.
struct ReplaySampler {
  Ring ring;
  Kokkos::View<const std::int64_t*, DeviceMemory> total, draw;  // per member
  Kokkos::View<const MemberSettings*, DeviceMemory> members;
  std::int64_t capacity, stride;  // stride: the environments

  KOKKOS_INLINE_FUNCTION Sample operator()(std::size_t m, std::size_t i) const {
    const MemberSettings& settings = members(m);
    const int n_step = settings.n_step;
    const float gamma = static_cast<float>(settings.gamma);
    const std::int64_t written = total(m);
    const std::int64_t first = first_sampleable(written, capacity);
    const std::int64_t end = end_sampleable(written, stride, n_step);
    const std::uint64_t bits =
        counter_random(settings.seed, 0x5245504Cull ^ static_cast<std::uint64_t>(draw(m)), i);
    const std::int64_t span = end - first;
    const std::int64_t logical =
        first + static_cast<std::int64_t>(to_unit_double(bits) * static_cast<double>(span));
    const std::int64_t start = logical < end ? logical : end - 1;
    const std::int64_t base = static_cast<std::int64_t>(m) * capacity;
    float sum = 0.0f, factor = 1.0f;
    std::int64_t at = start;
    for (int h = 0; h < n_step; ++h) {
      at = start + h * stride;
      const std::int64_t slot = base + at % capacity;
      sum += factor * ring.reward(slot);
      factor *= gamma;
      if (ring.last(slot))
        break;
    }
    const std::int64_t slot0 = base + start % capacity, slot_end = base + at % capacity;
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
  /// One ring of capacity transitions for each member of members (a device array of their
  /// settings: n-step, gamma and seed are read there), environments writing to each.
  ReplayBuffer(const ExecSpace& space,
               const Kokkos::View<const MemberSettings*, DeviceMemory>& members,
               std::size_t capacity, std::size_t environments, int most_n_step);

  /// Where the environments write: member m's logical index L lives at ring slot
  /// m * capacity + L % capacity.
  const Ring& ring() const { return m_ring; }
  std::size_t capacity() const { return m_capacity; }
  std::size_t environments() const { return m_environments; }
  std::size_t members() const { return m_members.extent(0); }
  /// Transitions written so far, per member (device counters).
  Kokkos::View<std::int64_t*, DeviceMemory> total() const { return m_total; }
  /// Adds the rings and the totals to a checkpoint's buffers.
  void add_buffers(io::MemberBuffers& buffers) const;

  /// The sampler of each member's draw(m)-th batch (see ReplaySampler).
  ReplaySampler sampler(const Kokkos::View<const std::int64_t*, DeviceMemory>& draw) const;

  /// Logical range [first, end) that the sampler draws from, given the total written, for a
  /// member with the population's longest n-step (the host's check before learning starts).
  std::int64_t first_sampleable(std::int64_t total) const {
    return replay::first_sampleable(total, static_cast<std::int64_t>(capacity()));
  }
  std::int64_t end_sampleable(std::int64_t total) const {
    return replay::end_sampleable(total, static_cast<std::int64_t>(m_environments), m_most_n_step);
  }

 private:
  Ring m_ring;
  Kokkos::View<const MemberSettings*, DeviceMemory> m_members;
  std::size_t m_capacity, m_environments;
  int m_most_n_step;
  Kokkos::View<std::int64_t*, DeviceMemory> m_total;
};

}  // namespace dqntrader::replay

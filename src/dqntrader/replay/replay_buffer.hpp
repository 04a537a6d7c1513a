// The replay ring on the device. A transition is stored as indices, never as a state:
// (bar, incoming position, action, reward, last-of-episode); the state is rebuilt from the
// feature arrays by index when a batch is drawn. The environments write one transition each
// per step, environment e of step s at logical index s * E + e, so the transition that
// follows one of an environment's steps sits E entries later: n-step returns are summed at
// sampling time by walking that stride, stopping at an episode's end.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dqntrader/core/types.hpp"

namespace dqntrader::replay {

struct Ring {
  Kokkos::View<std::int32_t*, DeviceMemory> bar;
  Kokkos::View<std::int8_t*, DeviceMemory> position;  // incoming position index
  Kokkos::View<std::int8_t*, DeviceMemory> action;
  Kokkos::View<float*, DeviceMemory> reward;
  Kokkos::View<std::uint8_t*, DeviceMemory> last;  // 1 when the episode ended with this step
};

/// A drawn batch: everything the TD target needs. The next state is (next_bar,
/// next_position); return_n already sums the discounted rewards, and discount is gamma^h
/// for the h bars summed.
struct Batch {
  Kokkos::View<std::int32_t*, DeviceMemory> bar, next_bar;
  Kokkos::View<std::int8_t*, DeviceMemory> position, action, next_position;
  Kokkos::View<float*, DeviceMemory> return_n, discount;

  Batch() = default;
  Batch(const ExecSpace& space, std::size_t size);
  std::size_t size() const { return bar.extent(0); }
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

  /// Enqueues total += environments (after the environments wrote their step) and, in the
  /// same kernel, steps += 1: the caller's device count of environment steps.
  void advance(const ExecSpace& space, const Kokkos::View<std::int64_t, DeviceMemory>& steps) const;

  /// Draws batch.size() transitions uniformly among those whose n-step window is complete
  /// and still in the ring, with the counter-based generator: the draw-th use of seed (draw
  /// read from the device, so a replayed graph draws anew). Transitions must exist.
  void sample(const ExecSpace& space, std::uint64_t seed,
              const Kokkos::View<const std::int64_t, DeviceMemory>& draw, const Batch& batch) const;

  /// Logical range [first, end) that sample() draws from, given the total written.
  std::int64_t first_sampleable(std::int64_t total) const;
  std::int64_t end_sampleable(std::int64_t total) const;

 private:
  Ring m_ring;
  std::size_t m_environments;
  int m_n_step;
  float m_gamma;
  Kokkos::View<std::int64_t, DeviceMemory> m_total;
};

}  // namespace dqntrader::replay

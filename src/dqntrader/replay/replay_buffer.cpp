#include "dqntrader/replay/replay_buffer.hpp"

#include <string>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/random.hpp"

namespace dqntrader::replay {

Batch::Batch(const ExecSpace& space, std::size_t size)
    : bar(Kokkos::view_alloc(space, std::string("dqntrader::replay::batch_bar")), size),
      next_bar(Kokkos::view_alloc(space, std::string("dqntrader::replay::batch_next_bar")), size),
      position(Kokkos::view_alloc(space, std::string("dqntrader::replay::batch_position")), size),
      action(Kokkos::view_alloc(space, std::string("dqntrader::replay::batch_action")), size),
      next_position(
          Kokkos::view_alloc(space, std::string("dqntrader::replay::batch_next_position")), size),
      return_n(Kokkos::view_alloc(space, std::string("dqntrader::replay::batch_return")), size),
      discount(Kokkos::view_alloc(space, std::string("dqntrader::replay::batch_discount")), size) {}

ReplayBuffer::ReplayBuffer(const ExecSpace& space, std::size_t capacity, std::size_t environments,
                           int n_step, double gamma)
    : m_environments(environments),
      m_n_step(n_step),
      m_gamma(static_cast<float>(gamma)),
      m_total(Kokkos::view_alloc(space, std::string("dqntrader::replay::total"))) {
  if (n_step < 1 || environments == 0 ||
      capacity < environments * static_cast<std::size_t>(n_step + 1)) {
    throw InputError("the replay must hold at least (n-step + 1) x environments transitions");
  }
  m_ring.bar = Kokkos::View<std::int32_t*, DeviceMemory>(
      Kokkos::view_alloc(space, std::string("dqntrader::replay::bar")), capacity);
  m_ring.position = Kokkos::View<std::int8_t*, DeviceMemory>(
      Kokkos::view_alloc(space, std::string("dqntrader::replay::position")), capacity);
  m_ring.action = Kokkos::View<std::int8_t*, DeviceMemory>(
      Kokkos::view_alloc(space, std::string("dqntrader::replay::action")), capacity);
  m_ring.reward = Kokkos::View<float*, DeviceMemory>(
      Kokkos::view_alloc(space, std::string("dqntrader::replay::reward")), capacity);
  m_ring.last = Kokkos::View<std::uint8_t*, DeviceMemory>(
      Kokkos::view_alloc(space, std::string("dqntrader::replay::last")), capacity);
}

void ReplayBuffer::advance(const ExecSpace& space,
                           const Kokkos::View<std::int64_t, DeviceMemory>& steps) const {
  const auto total = m_total;
  const std::int64_t step = static_cast<std::int64_t>(m_environments);
  Kokkos::parallel_for(
      "dqntrader::replay::advance", Kokkos::RangePolicy<ExecSpace>(space, 0, 1),
      KOKKOS_LAMBDA(const int) {
        total() += step;
        steps() += 1;
      });
}

std::int64_t ReplayBuffer::first_sampleable(std::int64_t total) const {
  const std::int64_t capacity = static_cast<std::int64_t>(this->capacity());
  return total > capacity ? total - capacity : 0;
}

std::int64_t ReplayBuffer::end_sampleable(std::int64_t total) const {
  return total -
         static_cast<std::int64_t>(m_n_step - 1) * static_cast<std::int64_t>(m_environments);
}

void ReplayBuffer::sample(const ExecSpace& space, std::uint64_t seed,
                          const Kokkos::View<const std::int64_t, DeviceMemory>& draw,
                          const Batch& batch) const {
  const Ring ring = m_ring;
  const Batch out = batch;
  const auto total_view = m_total;
  const std::int64_t capacity = static_cast<std::int64_t>(this->capacity());
  const std::int64_t stride = static_cast<std::int64_t>(m_environments);
  const int n_step = m_n_step;
  const float gamma = m_gamma;
  Kokkos::parallel_for(
      "dqntrader::replay::sample", Kokkos::RangePolicy<ExecSpace>(space, 0, batch.size()),
      KOKKOS_LAMBDA(const std::size_t i) {
        const std::int64_t total = total_view();
        const std::int64_t first = total > capacity ? total - capacity : 0;
        const std::int64_t end = total - (n_step - 1) * stride;
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
        out.bar(i) = ring.bar(slot0);
        out.position(i) = ring.position(slot0);
        out.action(i) = ring.action(slot0);
        out.return_n(i) = sum;
        out.discount(i) = factor;
        out.next_bar(i) = ring.bar(slot_end) + 1;
        out.next_position(i) = ring.action(slot_end);
      });
}

}  // namespace dqntrader::replay

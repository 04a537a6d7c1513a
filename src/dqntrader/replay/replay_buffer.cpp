#include "dqntrader/replay/replay_buffer.hpp"

#include <string>

#include "dqntrader/core/error.hpp"

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

ReplaySampler ReplayBuffer::sampler(
    std::uint64_t seed, const Kokkos::View<const std::int64_t, DeviceMemory>& draw) const {
  return ReplaySampler{m_ring,
                       m_total,
                       draw,
                       static_cast<std::int64_t>(capacity()),
                       static_cast<std::int64_t>(m_environments),
                       m_n_step,
                       m_gamma,
                       seed};
}

}  // namespace dqntrader::replay

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

ReplayBuffer::ReplayBuffer(const ExecSpace& space,
                           const Kokkos::View<const MemberSettings*, DeviceMemory>& members,
                           std::size_t capacity, std::size_t environments, int most_n_step)
    : m_members(members),
      m_capacity(capacity),
      m_environments(environments),
      m_most_n_step(most_n_step),
      m_total(Kokkos::view_alloc(space, std::string("dqntrader::replay::total")),
              members.extent(0)) {
  if (most_n_step < 1 || environments == 0 || members.extent(0) == 0 ||
      capacity < environments * static_cast<std::size_t>(most_n_step + 1)) {
    throw InputError("the replay must hold at least (n-step + 1) x environments transitions");
  }
  const std::size_t all = members.extent(0) * capacity;
  auto alloc = [&](const char* label) { return Kokkos::view_alloc(space, std::string(label)); };
  m_ring.bar = Kokkos::View<std::int32_t*, DeviceMemory>(alloc("dqntrader::replay::bar"), all);
  m_ring.position =
      Kokkos::View<std::int8_t*, DeviceMemory>(alloc("dqntrader::replay::position"), all);
  m_ring.action = Kokkos::View<std::int8_t*, DeviceMemory>(alloc("dqntrader::replay::action"), all);
  m_ring.reward = Kokkos::View<float*, DeviceMemory>(alloc("dqntrader::replay::reward"), all);
  m_ring.last = Kokkos::View<std::uint8_t*, DeviceMemory>(alloc("dqntrader::replay::last"), all);
}

void ReplayBuffer::add_buffers(io::MemberBuffers& buffers) const {
  // A ring is written from its first slot on (logical index L at slot L % capacity): what a
  // member's total has not reached yet is zero, and only the slots written are saved.
  buffers.add_prefixes("replay_bar", m_ring.bar, m_total);
  buffers.add_prefixes("replay_position", m_ring.position, m_total);
  buffers.add_prefixes("replay_action", m_ring.action, m_total);
  buffers.add_prefixes("replay_reward", m_ring.reward, m_total);
  buffers.add_prefixes("replay_last", m_ring.last, m_total);
  buffers.add_blocks("replay_total", m_total);
}

ReplaySampler ReplayBuffer::sampler(
    const Kokkos::View<const std::int64_t*, DeviceMemory>& draw) const {
  return ReplaySampler{m_ring,
                       m_total,
                       draw,
                       m_members,
                       static_cast<std::int64_t>(m_capacity),
                       static_cast<std::int64_t>(m_environments)};
}

}  // namespace dqntrader::replay

#include "dqntrader/train/member_networks.hpp"

#include <algorithm>
#include <string>
#include <type_traits>
#include <utility>

#include "dqntrader/core/bf16.hpp"
#include "dqntrader/core/kokkos_compat.hpp"

namespace dqntrader::train {

namespace {

// MemberNetworks::update_targets on member m's vectors of n values at m * stride, the targets'
// working copies from working_target on.
template <class T>
void target_updates(const ExecSpace& space,
                    const Kokkos::View<const MemberSettings*, DeviceMemory>& m,
                    const Kokkos::View<const int*, DeviceMemory>& active,
                    const Kokkos::View<const float*, DeviceMemory>& online,
                    const Kokkos::View<float*, DeviceMemory>& target,
                    const Kokkos::View<T*, DeviceMemory>& working, std::size_t working_target,
                    std::size_t n, std::size_t stride, bool soft, std::int64_t learning_steps,
                    const Kokkos::View<int*, DeviceMemory>& changed) {
  const bool write_working = working.extent(0) > 0;
  Kokkos::parallel_for(
      soft ? "dqntrader::train::soft_update" : "dqntrader::train::hard_update",
      Kokkos::RangePolicy<ExecSpace>(space, 0, m.extent(0) * n),
      KOKKOS_LAMBDA(const std::size_t i) {
        const std::size_t k = i / n, at = k * stride + i % n;
        const MemberSettings s = m(k);
        if (active(k) == 0)
          return;
        if (soft) {
          const float tau = static_cast<float>(s.tau);
          if (!(tau > 0.0f))
            return;
          const float v = tau * online(at) + (1.0f - tau) * target(at);
          target(at) = v;
          if (i % n == 0)
            changed(k) = 1;
          if (write_working)
            store(working(working_target + at), v);
        } else {
          if (s.tau > 0.0 || learning_steps % s.target_update != 0)
            return;
          target(at) = online(at);
          if (i % n == 0)
            changed(k) = 1;
          if (write_working)
            working(working_target + at) = working(at);
        }
      });
}

template <class T>
void to_working(const ExecSpace& space, const Kokkos::View<const float*, DeviceMemory>& from,
                const Kokkos::View<T*, DeviceMemory>& to) {
  Kokkos::parallel_for(
      "dqntrader::train::to_working", Kokkos::RangePolicy<ExecSpace>(space, 0, from.extent(0)),
      KOKKOS_LAMBDA(const std::size_t i) { store(to(i), from(i)); });
}

}  // namespace

template <class T>
MemberNetworks<T>::MemberNetworks(const ExecSpace& space, const nn::ParameterLayout& layout,
                                  const std::vector<std::uint64_t>& seeds) {
  const std::size_t k = seeds.size(), p = layout.size(), stride = (p + 127) / 128 * 128;
  m_layout = nn::MemberVectors{k, p, stride};
  auto alloc = [&](const char* label) { return Kokkos::view_alloc(space, std::string(label)); };
  m_parameters =
      Kokkos::View<float*, DeviceMemory>(alloc("dqntrader::train::parameters"), 2 * k * stride);
  m_online = Kokkos::View<float*, DeviceMemory>(m_parameters.data(), k * stride);
  m_target = Kokkos::View<float*, DeviceMemory>(m_parameters.data() + k * stride, k * stride);
  m_grads = Kokkos::View<float*, DeviceMemory>(alloc("dqntrader::train::grads"), k * stride);
  if constexpr (std::is_same<T, bf16>::value) {
    m_working = Kokkos::View<T*, DeviceMemory>(alloc("dqntrader::train::working"), 2 * k * stride);
    m_online_working = Kokkos::View<T*, DeviceMemory>(m_working.data(), k * stride);
    m_target_working = Kokkos::View<T*, DeviceMemory>(m_working.data() + k * stride, k * stride);
  }
  // Every member's initial parameters (zeros between them), in one upload.
  std::vector<float> initial(k * stride, 0.0f);
  for (std::size_t m = 0; m < k; ++m) {
    const std::vector<float> member = nn::initial_parameters(layout, seeds[m]);
    std::copy(member.begin(), member.end(),
              initial.begin() + static_cast<std::ptrdiff_t>(m * stride));
  }
  Kokkos::deep_copy(
      space, m_online,
      Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
          initial.data(), initial.size()));
  compat::fence(space, "dqntrader::train: the initial parameters are uploaded");
  Kokkos::deep_copy(space, m_target, m_online);
  refresh_working(space);
}

template <class T>
nn::Weights<T> MemberNetworks<T>::online_weights() const {
  if constexpr (std::is_same<T, bf16>::value) {
    return {m_online_working, m_online, m_layout.members, m_layout.stride};
  } else {
    return {m_online, m_online, m_layout.members, m_layout.stride};
  }
}

template <class T>
nn::Weights<T> MemberNetworks<T>::pair_weights() const {
  if constexpr (std::is_same<T, bf16>::value) {
    return {m_working, m_parameters, m_layout.members, m_layout.stride};
  } else {
    return {m_parameters, m_parameters, m_layout.members, m_layout.stride};
  }
}

template <class T>
LearnerState<T> MemberNetworks<T>::learner_state(const nn::Adam& adam) const {
  return LearnerState<T>{
      m_online,         m_target,        adam.first_moment(), adam.second_moment(),
      m_online_working, m_target_working};
}

template <class T>
std::vector<float> MemberNetworks<T>::parameters(const ExecSpace& space, std::size_t member) const {
  const std::size_t p = m_layout.size, at = member * m_layout.stride;
  std::vector<float> host(p);
  Kokkos::deep_copy(
      space,
      Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(host.data(),
                                                                                       p),
      Kokkos::subview(m_online, std::make_pair(at, at + p)));
  compat::fence(space, "dqntrader::train: the parameters are read on the host");
  return host;
}

template <class T>
void MemberNetworks<T>::update_targets(
    const ExecSpace& space, const Kokkos::View<const MemberSettings*, DeviceMemory>& settings,
    const Kokkos::View<const int*, DeviceMemory>& active, bool soft, std::int64_t learning_steps,
    const Kokkos::View<int*, DeviceMemory>& changed) const {
  target_updates(space, settings, active, Kokkos::View<const float*, DeviceMemory>(m_online),
                 m_target, m_working, m_layout.members * m_layout.stride, m_layout.size,
                 m_layout.stride, soft, learning_steps, changed);
}

template <class T>
void MemberNetworks<T>::refresh_working(const ExecSpace& space) const {
  if constexpr (std::is_same<T, bf16>::value)
    to_working(space, Kokkos::View<const float*, DeviceMemory>(m_parameters), m_working);
}

template <class T>
void MemberNetworks<T>::copy_members(const ExecSpace& space, const MemberCopies& copies) const {
  for (const auto& values : {m_online, m_target})
    copy_member_vectors(space, values, m_layout.size, m_layout.stride, copies);
  for (const auto& values : {m_online_working, m_target_working})
    copy_member_vectors(space, values, m_layout.size, m_layout.stride, copies);
}

template <class T>
void MemberNetworks<T>::add_buffers(io::MemberBuffers& buffers) const {
  buffers.add_strided("online", m_online, m_layout.stride);
  buffers.add_strided("target", m_target, m_layout.stride);
}

template class MemberNetworks<float>;
template class MemberNetworks<bf16>;

}  // namespace dqntrader::train

// Every member's networks of a population: its online and target parameters, the online
// networks' gradients and, in bf16, the working copies the products read. Every member's
// online parameters come first, then every member's target, member m's a stride apart
// (rounded up to 128 values, 256 bytes in bf16), so that the 2K networks of one batched
// product per layer lie a stride apart; the gradients and the working copies are laid out
// alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "dqntrader/core/member_copy.hpp"
#include "dqntrader/core/member_settings.hpp"
#include "dqntrader/core/types.hpp"
#include "dqntrader/io/member_buffers.hpp"
#include "dqntrader/nn/adam.hpp"
#include "dqntrader/nn/mlp.hpp"
#include "dqntrader/nn/network_spec.hpp"
#include "dqntrader/train/training_guard.hpp"

namespace dqntrader::train {

template <class T>
class MemberNetworks {
 public:
  /// Member m's online network starts at the initial parameters of seeds[m], its target as a
  /// copy of it.
  MemberNetworks(const ExecSpace& space, const nn::ParameterLayout& layout,
                 const std::vector<std::uint64_t>& seeds);

  /// Where member m's vector lies in each buffer.
  const nn::MemberVectors& layout() const { return m_layout; }
  Kokkos::View<float*, DeviceMemory> online() const { return m_online; }
  /// The online networks' working copies (empty in float, where the products read the
  /// parameters themselves).
  Kokkos::View<T*, DeviceMemory> online_working() const { return m_online_working; }

  /// Every member's online network; pair_weights() the same followed by the targets
  /// (forward_pair reads them there).
  nn::Weights<T> online_weights() const;
  nn::Weights<T> pair_weights() const;
  nn::Gradients gradients() const { return {m_grads, m_layout.members, m_layout.stride}; }
  /// The networks with Adam's moments: what the guard protects.
  LearnerState<T> learner_state(const nn::Adam& adam) const;

  /// Member m's online parameters on the host.
  std::vector<float> parameters(const ExecSpace& space, std::size_t member) const;

  /// The target updates that are due, each with its working copy: with soft, every active
  /// member with tau > 0 gets target = tau * online + (1 - tau) * target; without, every
  /// active member with hard updates whose period divides learning_steps gets target =
  /// online. Each member updated gets changed(m) = 1 (the guard's flag).
  void update_targets(const ExecSpace& space,
                      const Kokkos::View<const MemberSettings*, DeviceMemory>& settings,
                      const Kokkos::View<const int*, DeviceMemory>& active, bool soft,
                      std::int64_t learning_steps,
                      const Kokkos::View<int*, DeviceMemory>& changed) const;
  /// The working copies made again from the parameters (after the parameters were loaded).
  void refresh_working(const ExecSpace& space) const;
  /// Each copy's member `to` takes member `from`'s networks.
  void copy_members(const ExecSpace& space, const MemberCopies& copies) const;

  /// Adds the online and target parameters to a checkpoint's buffers.
  void add_buffers(io::MemberBuffers& buffers) const;

 private:
  nn::MemberVectors m_layout;
  Kokkos::View<float*, DeviceMemory> m_parameters;  // the online networks, then the targets
  Kokkos::View<float*, DeviceMemory> m_online, m_target, m_grads;
  Kokkos::View<T*, DeviceMemory> m_working;  // bf16: the working copies, laid out alike
  Kokkos::View<T*, DeviceMemory> m_online_working, m_target_working;
};

}  // namespace dqntrader::train

// Adam with bias correction, decoupled weight decay, a learning-rate schedule and gradient-
// norm clipping over flat parameter buffers, entirely on the device, for one network or for
// every member of a population at once, each with its own settings: a member whose gradient
// norm is not finite skips its step (parameters and moments untouched), which is counted, and
// no value ever travels to the host during a step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dqntrader/core/bf16.hpp"
#include "dqntrader/core/kokkos_compat.hpp"
#include "dqntrader/core/member_copy.hpp"
#include "dqntrader/core/types.hpp"
#include "dqntrader/nn/adam_rule.hpp"

namespace dqntrader::nn {

/// The schedule of a name: constant, linear or cosine (InputError otherwise).
Schedule parse_schedule(const std::string& name);

/// Where the members' vectors lie in a flat buffer: member m's `size` values at m * stride.
struct MemberVectors {
  std::size_t members = 1, size = 0, stride = 0;
  /// The values a buffer holds up to the last member's last one.
  std::size_t extent() const { return (members - 1) * stride + size; }
};

class Adam {
 public:
  /// settings[m] is member m's; the members' parameters, gradients and moments are laid out
  /// as `layout` says (the moments are allocated here in that layout).
  Adam(const ExecSpace& space, const MemberVectors& layout,
       const std::vector<AdamSettings>& settings);

  /// One step of every member: clips its gradient (member m's at m * grad_stride into grads)
  /// to its clip_norm, updates its parameters and moments (or skips), and refreshes the
  /// compute-type working copy (working may be empty when T is float and the products read
  /// the parameters themselves). A member whose active(m) is 0 is left as it is (active
  /// empty: every member steps).
  template <class T>
  void step(const ExecSpace& space, const Kokkos::View<float*, DeviceMemory>& parameters,
            const Kokkos::View<const float*, DeviceMemory>& grads, std::size_t grad_stride,
            const Kokkos::View<T*, DeviceMemory>& working,
            const Kokkos::View<const int*, DeviceMemory>& active = {});

  /// Member m's learning rate after `calls` steps.
  float learning_rate(std::size_t member, std::int64_t calls) const;

  /// Member m's settings, on the host: its steps use them once upload_settings() has put
  /// every member's on the device (enqueued on space; the settings must not change again
  /// before the device has run past it).
  void set_settings(std::size_t member, const AdamSettings& settings);
  void upload_settings(const ExecSpace& space) const;
  /// Each copy's member `to` takes member `from`'s moments and its position in the schedule
  /// and the bias correction (calls, applied, beta powers); its counts of skipped steps stay
  /// its own.
  void copy_members(const ExecSpace& space, const MemberCopies& copies) const;

  Kokkos::View<float*, DeviceMemory> first_moment() const { return m_m; }
  Kokkos::View<float*, DeviceMemory> second_moment() const { return m_v; }
  Kokkos::View<AdamCounters*, DeviceMemory> counters() const { return m_counters; }
  /// The members' settings on the device, as upload_settings() left them.
  Kokkos::View<const AdamSettings*, DeviceMemory> device_settings() const {
    return m_device_settings;
  }
  const MemberVectors& layout() const { return m_layout; }

 private:
  MemberVectors m_layout;
  std::vector<AdamSettings> m_settings;
  Kokkos::View<AdamSettings*, DeviceMemory> m_device_settings;
  Kokkos::View<float*, DeviceMemory> m_m, m_v;
  Kokkos::View<AdamCounters*, DeviceMemory> m_counters;
  // per member (a row each, read through a pointer): squared sums of blocks
  Kokkos::View<double**, Kokkos::LayoutRight, DeviceMemory> m_norm_blocks;
  Kokkos::View<int*, DeviceMemory> m_arrivals;  // per member: blocks summed this step
  Kokkos::View<AdamStepFactors*, DeviceMemory> m_factors;
};

}  // namespace dqntrader::nn

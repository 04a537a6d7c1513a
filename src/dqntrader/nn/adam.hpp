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

namespace dqntrader::nn {

enum class Schedule { constant, linear, cosine };
Schedule parse_schedule(const std::string& name);

struct AdamSettings {
  float learning_rate = 1e-4f;
  float beta1 = 0.9f, beta2 = 0.999f, epsilon = 1e-8f;
  float weight_decay = 0.0f;  // decoupled (AdamW)
  float clip_norm = 10.0f;    // 0: no clipping
  Schedule schedule = Schedule::constant;
  std::int64_t schedule_steps = 1;  // steps over which linear/cosine fall to final_fraction
  float final_fraction = 0.1f;
};

/// Device counters of the optimizer, one set per member.
struct AdamCounters {
  std::int64_t calls;               // steps attempted: the schedule's position
  std::int64_t applied;             // steps applied: the bias correction's t
  std::int64_t skipped;             // steps skipped for a non-finite gradient
  std::int64_t consecutive;         // skipped in a row, up to the last call
  double beta1_power, beta2_power;  // beta^applied, for the bias correction
};

/// What every parameter's update in a step shares, worked out once a member from its
/// gradient's norm (step_factors()).
struct AdamStepFactors {
  int apply;           // 0: the norm is not finite, the step is skipped
  float scale;         // the clipping's factor
  float rate;          // the schedule's learning rate
  float bias1, bias2;  // 1 - beta^t, t = steps applied
};

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

/// The learning rate of a schedule after `calls` of `steps` steps (device and host alike).
KOKKOS_INLINE_FUNCTION float scheduled_rate(Schedule schedule, float rate, float final_fraction,
                                            std::int64_t calls, std::int64_t steps) {
  const double progress =
      steps > 0 ? (calls < steps ? static_cast<double>(calls) / steps : 1.0) : 1.0;
  double factor = 1.0;
  if (schedule == Schedule::linear)
    factor = 1.0 - (1.0 - final_fraction) * progress;
  if (schedule == Schedule::cosine) {
    factor = final_fraction + (1.0 - final_fraction) * 0.5 *
                                  (1.0 + compat::kmath::cos(3.141592653589793 * progress));
  }
  return static_cast<float>(rate * factor);
}

/// A member's step once its gradient's squared norm is known (Adam::step's, and the fused
/// learning step's; the caller leaves a stopped member alone): advances its counters (a norm
/// that is not finite skips the step, counted) and gives the factors its parameters share.
KOKKOS_INLINE_FUNCTION AdamStepFactors step_factors(const AdamSettings& s, AdamCounters& c,
                                                    double squared) {
  AdamStepFactors f{0, 1.0f, 0.0f, 1.0f, 1.0f};
  c.calls += 1;
  if (squared <= compat::max_double) {
    c.applied += 1;
    c.consecutive = 0;
    c.beta1_power *= static_cast<double>(s.beta1);
    c.beta2_power *= static_cast<double>(s.beta2);
    const double norm = compat::kmath::sqrt(squared);
    f.apply = 1;
    f.scale =
        s.clip_norm > 0.0f && norm > s.clip_norm ? static_cast<float>(s.clip_norm / norm) : 1.0f;
    // The schedule's position before this step; the bias correction of this step,
    // t = applied: 1 - beta^t.
    f.rate = scheduled_rate(s.schedule, s.learning_rate, s.final_fraction, c.calls - 1,
                            s.schedule_steps);
    f.bias1 = static_cast<float>(1.0 - c.beta1_power);
    f.bias2 = static_cast<float>(1.0 - c.beta2_power);
  } else {
    c.skipped += 1;
    c.consecutive += 1;
  }
  return f;
}

/// One parameter p's update in a step of factors f (f.apply 1) with its gradient g (before
/// clipping): its moments m and v in place; returns the updated parameter.
KOKKOS_INLINE_FUNCTION float updated(const AdamSettings& s, const AdamStepFactors& f, float g,
                                     float& m, float& v, float p) {
  g *= f.scale;
  m = s.beta1 * m + (1.0f - s.beta1) * g;
  v = s.beta2 * v + (1.0f - s.beta2) * g * g;
  const float m_hat = m / f.bias1;
  const float v_hat = v / f.bias2;
  return p - f.rate * (m_hat / (compat::kmath::sqrt(v_hat) + s.epsilon) + s.weight_decay * p);
}

}  // namespace dqntrader::nn

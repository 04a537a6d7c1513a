// Adam with bias correction, decoupled weight decay, a learning-rate schedule and gradient-
// norm clipping over the flat parameter buffer, entirely on the device: a step whose
// gradient norm is not finite is skipped (parameters and moments untouched) and counted,
// and no value ever travels to the host during a step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "dqntrader/core/bf16.hpp"
#include "dqntrader/core/kokkos_compat.hpp"
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

/// Device counters of the optimizer.
struct AdamCounters {
  std::int64_t calls;               // steps attempted: the schedule's position
  std::int64_t applied;             // steps applied: the bias correction's t
  std::int64_t skipped;             // steps skipped for a non-finite gradient
  std::int64_t consecutive;         // skipped in a row, up to the last call
  double beta1_power, beta2_power;  // beta^applied, for the bias correction
};

/// What every parameter's update in a step shares, worked out once by the step's first
/// kernel (device memory, internal to Adam::step).
struct AdamStepFactors {
  int apply;           // 0: the norm is not finite, the step is skipped
  float scale;         // the clipping's factor
  float rate;          // the schedule's learning rate
  float bias1, bias2;  // 1 - beta^t, t = steps applied
};

class Adam {
 public:
  Adam(const ExecSpace& space, std::size_t parameters, const AdamSettings& settings);

  /// One step: clips grads to clip_norm, updates parameters and moments (or skips), and
  /// refreshes the compute-type working copy (working may be empty when T is float and
  /// the products read the parameters themselves).
  template <class T>
  void step(const ExecSpace& space, const Kokkos::View<float*, DeviceMemory>& parameters,
            const Kokkos::View<const float*, DeviceMemory>& grads,
            const Kokkos::View<T*, DeviceMemory>& working);

  /// The learning rate after `calls` steps.
  float learning_rate(std::int64_t calls) const;

  Kokkos::View<float*, DeviceMemory> first_moment() const { return m_m; }
  Kokkos::View<float*, DeviceMemory> second_moment() const { return m_v; }
  Kokkos::View<AdamCounters, DeviceMemory> counters() const { return m_counters; }
  const AdamSettings& settings() const { return m_settings; }

 private:
  AdamSettings m_settings;
  Kokkos::View<float*, DeviceMemory> m_m, m_v;
  Kokkos::View<AdamCounters, DeviceMemory> m_counters;
  Kokkos::View<double*, DeviceMemory> m_norm_blocks;  // squared sums of the gradient's blocks
  Kokkos::View<int, DeviceMemory> m_arrivals;         // blocks summed so far in this step
  Kokkos::View<AdamStepFactors, DeviceMemory> m_factors;
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

}  // namespace dqntrader::nn

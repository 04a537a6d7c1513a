// Adam's rule, in plain arithmetic: a member's settings and counters, the factors a step's
// updates share (worked out once a member from its gradient's squared norm) and the update of one
// parameter. Every optimizer step calls it (nn::Adam::step, nn/adam.cpp, and the fused learning
// step's grid, train/fused/), so that a step means one thing everywhere.
#pragma once

#include <cstdint>

#include "dqntrader/core/kokkos_compat.hpp"

namespace dqntrader::nn {

enum class Schedule { constant, linear, cosine };

// A run sets every field from its settings (TrainConfig); the defaults are the training's.
struct AdamSettings {
  float learning_rate = 5e-4f;
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

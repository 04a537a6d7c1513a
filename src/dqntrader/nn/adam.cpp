#include "dqntrader/nn/adam.hpp"

#include "dqntrader/core/error.hpp"

namespace dqntrader::nn {

Schedule parse_schedule(const std::string& name) {
  if (name == "constant")
    return Schedule::constant;
  if (name == "linear")
    return Schedule::linear;
  if (name == "cosine")
    return Schedule::cosine;
  throw InputError("unknown learning-rate schedule '" + name +
                   "' (expected constant, linear or cosine)");
}

Adam::Adam(const ExecSpace& space, std::size_t parameters, const AdamSettings& settings)
    : m_settings(settings),
      m_m(Kokkos::view_alloc(space, std::string("dqntrader::nn::adam_m")), parameters),
      m_v(Kokkos::view_alloc(space, std::string("dqntrader::nn::adam_v")), parameters),
      m_counters(Kokkos::view_alloc(space, std::string("dqntrader::nn::adam_counters"))),
      m_norm2(Kokkos::view_alloc(space, std::string("dqntrader::nn::adam_norm2"))) {
  Kokkos::deep_copy(space, m_counters, AdamCounters{0, 0, 0, 0, 1.0, 1.0});
}

float Adam::learning_rate(std::int64_t calls) const {
  return scheduled_rate(m_settings.schedule, m_settings.learning_rate, m_settings.final_fraction,
                        calls, m_settings.schedule_steps);
}

template <class T>
void Adam::step(const ExecSpace& space, const Kokkos::View<float*, DeviceMemory>& parameters,
                const Kokkos::View<const float*, DeviceMemory>& grads,
                const Kokkos::View<T*, DeviceMemory>& working) {
  const std::size_t n = parameters.extent(0);
  Kokkos::parallel_reduce(
      "dqntrader::nn::adam_norm", Kokkos::RangePolicy<ExecSpace>(space, 0, n),
      KOKKOS_LAMBDA(const std::size_t i, double& sum) {
        sum += static_cast<double>(grads(i)) * grads(i);
      },
      m_norm2);
  const AdamSettings s = m_settings;
  const auto m = m_m, v = m_v;
  const auto counters = m_counters;
  const auto norm2 = m_norm2;
  const bool write_working = working.extent(0) == n;
  Kokkos::parallel_for(
      "dqntrader::nn::adam_update", Kokkos::RangePolicy<ExecSpace>(space, 0, n),
      KOKKOS_LAMBDA(const std::size_t i) {
        const double squared = norm2();
        if (!(squared <= compat::max_double))
          return;  // NaN or infinity: skip the step
        const double norm = compat::kmath::sqrt(squared);
        const float scale = s.clip_norm > 0.0f && norm > s.clip_norm
                                ? static_cast<float>(s.clip_norm / norm)
                                : 1.0f;
        const AdamCounters c = counters();
        const float rate = scheduled_rate(s.schedule, s.learning_rate, s.final_fraction, c.calls,
                                          s.schedule_steps);
        const float g = grads(i) * scale;
        const float mi = s.beta1 * m(i) + (1.0f - s.beta1) * g;
        const float vi = s.beta2 * v(i) + (1.0f - s.beta2) * g * g;
        m(i) = mi;
        v(i) = vi;
        // The bias correction of step t = applied + 1: 1 - beta^t.
        const float m_hat = mi / static_cast<float>(1.0 - c.beta1_power * s.beta1);
        const float v_hat = vi / static_cast<float>(1.0 - c.beta2_power * s.beta2);
        const float p = parameters(i);
        const float updated =
            p - rate * (m_hat / (compat::kmath::sqrt(v_hat) + s.epsilon) + s.weight_decay * p);
        parameters(i) = updated;
        if (write_working)
          store(working(i), updated);
      });
  const double beta1 = s.beta1, beta2 = s.beta2;
  Kokkos::parallel_for(
      "dqntrader::nn::adam_count", Kokkos::RangePolicy<ExecSpace>(space, 0, 1),
      KOKKOS_LAMBDA(const int) {
        AdamCounters& c = counters();
        c.calls += 1;
        if (norm2() <= compat::max_double) {
          c.applied += 1;
          c.consecutive = 0;
          c.beta1_power *= beta1;
          c.beta2_power *= beta2;
        } else {
          c.skipped += 1;
          c.consecutive += 1;
        }
      });
}

template void Adam::step<float>(const ExecSpace&, const Kokkos::View<float*, DeviceMemory>&,
                                const Kokkos::View<const float*, DeviceMemory>&,
                                const Kokkos::View<float*, DeviceMemory>&);
template void Adam::step<bf16>(const ExecSpace&, const Kokkos::View<float*, DeviceMemory>&,
                               const Kokkos::View<const float*, DeviceMemory>&,
                               const Kokkos::View<bf16*, DeviceMemory>&);

}  // namespace dqntrader::nn

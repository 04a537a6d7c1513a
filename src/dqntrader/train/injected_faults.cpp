#include "dqntrader/train/injected_faults.hpp"

#include <algorithm>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/kokkos_compat.hpp"

namespace dqntrader::train {

namespace {

void write_nan(const ExecSpace& space, float* values, std::size_t count) {
  const Kokkos::View<float*, DeviceMemory, Kokkos::MemoryTraits<Kokkos::Unmanaged>> view(values,
                                                                                         count);
  Kokkos::parallel_for(
      "dqntrader::train::inject_nan", Kokkos::RangePolicy<ExecSpace>(space, 0, count),
      KOKKOS_LAMBDA(const std::size_t i) { view(i) = static_cast<float>(compat::quiet_nan()); });
}

}  // namespace

InjectedFaults::InjectedFaults(const ExecSpace& space, std::size_t members)
    : m_next(members, Kind::none),
      m_poisoned(Kokkos::view_alloc(space, std::string("dqntrader::train::poisoned")), members) {}

void InjectedFaults::inject(std::size_t member, const std::string& kind) {
  Kind& next = m_next.at(member);
  if (kind == "batch") {
    next = Kind::batch;
  } else if (kind == "gradient") {
    next = Kind::gradient;
  } else if (kind == "weight") {
    next = Kind::weight;
  } else if (kind == "price") {
    next = Kind::price;
  } else {
    throw InputError("unknown fault '" + kind + "' (expected batch, gradient, weight or price)");
  }
}

bool InjectedFaults::pending() const {
  return std::any_of(m_next.begin(), m_next.end(), [](Kind k) { return k != Kind::none; });
}

bool InjectedFaults::before_step(const ExecSpace& space) {
  bool poisoned = false;
  for (std::size_t m = 0; m < m_next.size(); ++m) {
    if (m_next[m] != Kind::price)
      continue;
    Kokkos::deep_copy(space, Kokkos::subview(m_poisoned, m), 1);
    m_next[m] = Kind::none;
    poisoned = true;
  }
  return poisoned;
}

void InjectedFaults::before_loss(const ExecSpace& space, const replay::Batch& batch) const {
  spoil(space, Kind::batch, batch.return_n.data(), batch.size() / m_next.size());
}

void InjectedFaults::after_gradients(const ExecSpace& space, float* values,
                                     std::size_t stride) const {
  spoil(space, Kind::gradient, values, stride);
}

void InjectedFaults::after_update(const ExecSpace& space,
                                  const Kokkos::View<float*, DeviceMemory>& online,
                                  std::size_t stride) {
  spoil(space, Kind::weight, online.data(), stride);
  for (Kind& next : m_next) {
    if (next != Kind::price)
      next = Kind::none;
  }
}

void InjectedFaults::spoil(const ExecSpace& space, Kind kind, float* values,
                           std::size_t stride) const {
  for (std::size_t m = 0; m < m_next.size(); ++m) {
    if (m_next[m] == kind)
      write_nan(space, values + m * stride, 1);
  }
}

}  // namespace dqntrader::train

// Random numbers that are reproducible everywhere: a sequential host stream and a
// counter-based generator for kernels (value = f(seed, stream, counter), no state).
#pragma once

#include <Kokkos_Core.hpp>

#include <cmath>
#include <cstdint>

namespace dqntrader {

/// The SplitMix64 finalizer: a bijective mix of 64 bits.
KOKKOS_INLINE_FUNCTION std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// A counter-based generator: the counter-th number of stream under seed. Distinct
/// (stream, counter) pairs give independent-looking values; the same triple gives the same
/// value on every backend.
KOKKOS_INLINE_FUNCTION std::uint64_t counter_random(std::uint64_t seed, std::uint64_t stream,
                                                    std::uint64_t counter) {
  return mix64(mix64(seed ^ mix64(stream + 0x632BE59BD9B4E019ull)) + counter);
}

/// Uniform in [0, 1) from the top 53 bits.
KOKKOS_INLINE_FUNCTION double to_unit_double(std::uint64_t bits) {
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

/// A sequential host stream (SplitMix64), with a Box-Muller normal; unlike the standard
/// library's distributions its output is the same with every compiler.
class HostRng {
 public:
  explicit HostRng(std::uint64_t seed) : m_state(seed) {}

  std::uint64_t next() {
    m_state += 0x9E3779B97F4A7C15ull;
    std::uint64_t x = m_state;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  }
  double uniform() { return to_unit_double(next()); }
  /// Uniform integer in [0, n).
  std::uint64_t below(std::uint64_t n) { return static_cast<std::uint64_t>(uniform() * n) % n; }
  double normal() {
    if (m_has_spare) {
      m_has_spare = false;
      return m_spare;
    }
    double u1 = uniform();
    while (u1 <= 0.0)
      u1 = uniform();
    const double u2 = uniform();
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double angle = 6.283185307179586 * u2;
    m_spare = radius * std::sin(angle);
    m_has_spare = true;
    return radius * std::cos(angle);
  }

 private:
  std::uint64_t m_state;
  double m_spare = 0.0;
  bool m_has_spare = false;
};

}  // namespace dqntrader

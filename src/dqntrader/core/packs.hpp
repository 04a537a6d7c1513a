// Eight adjacent values of a row as one load or store: a thread of a pass over a row's columns
// takes kPack of them at once (one 16-byte access for bf16, two for float) where the row allows
// it, value by value where it does not; the values and their arithmetic are the same either way.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "dqntrader/core/bf16.hpp"

namespace dqntrader {

constexpr int kPack = 8;

template <class T>
struct alignas(16) Pack {
  T v[kPack];
};

/// Whether rows of T that start at data and lie `strides` values apart (every stride given)
/// take whole packs: 16-byte aligned starts, and every stride a multiple of kPack values.
template <class T, class... Strides>
bool packs_fit(const T* data, Strides... strides) {
  const bool aligned = reinterpret_cast<std::uintptr_t>(data) % 16 == 0;
  return aligned && ((static_cast<std::size_t>(strides) % kPack == 0) && ...);
}

/// Calls f(std::true_type()) when whole, f(std::false_type()) otherwise: a kernel that takes
/// whole packs (a Whole template parameter) where packs_fit, values one by one elsewhere.
template <class F>
void with_whole_packs(bool whole, const F& f) {
  if (whole)
    f(std::true_type());
  else
    f(std::false_type());
}

/// x[i] = p[i] for i < n (n <= kPack; 0 beyond): as one pack when Whole (p aligned, n = kPack).
template <bool Whole, class T>
KOKKOS_INLINE_FUNCTION void load_pack(const T* p, int n, float (&x)[kPack]) {
  if (Whole) {
    const Pack<T> pack = *reinterpret_cast<const Pack<T>*>(p);
    for (int i = 0; i < kPack; ++i)
      x[i] = to_float(pack.v[i]);
  } else {
    for (int i = 0; i < kPack; ++i)
      x[i] = i < n ? to_float(p[i]) : 0.0f;
  }
}

/// p[i] = x[i] (in T) for i < n: as one pack when Whole.
template <bool Whole, class T>
KOKKOS_INLINE_FUNCTION void store_pack(T* p, int n, const float (&x)[kPack]) {
  if (Whole) {
    Pack<T> pack;
    for (int i = 0; i < kPack; ++i)
      store(pack.v[i], x[i]);
    *reinterpret_cast<Pack<T>*>(p) = pack;
  } else {
    for (int i = 0; i < n && i < kPack; ++i)
      store(p[i], x[i]);
  }
}

}  // namespace dqntrader

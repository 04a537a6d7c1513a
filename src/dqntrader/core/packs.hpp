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

/// The pack at p as stored, p[i] for i < n (n <= kPack; T{}, zero, beyond): one load when Whole
/// (p aligned, n = kPack). A pass that holds several rows' packs at once holds them so, a bf16
/// pack in four registers, and widens each value where it uses it.
template <bool Whole, class T>
KOKKOS_INLINE_FUNCTION Pack<T> load_stored(const T* p, int n) {
  if constexpr (Whole) {
    return *reinterpret_cast<const Pack<T>*>(p);
  } else {
    Pack<T> pack;
    for (int i = 0; i < kPack; ++i)
      pack.v[i] = i < n ? p[i] : T{};
    return pack;
  }
}

/// p[i] = pack.v[i] for i < n: one store when Whole.
template <bool Whole, class T>
KOKKOS_INLINE_FUNCTION void store_stored(T* p, int n, const Pack<T>& pack) {
  if constexpr (Whole) {
    *reinterpret_cast<Pack<T>*>(p) = pack;
  } else {
    for (int i = 0; i < n && i < kPack; ++i)
      p[i] = pack.v[i];
  }
}

/// x as a pack of T (rounded to bf16, or unchanged in float); in CUDA device code a bf16 pack
/// converts two values an instruction.
template <class T>
KOKKOS_INLINE_FUNCTION Pack<T> pack_of(const float (&x)[kPack]) {
  Pack<T> pack;
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same<T, bf16>::value) {
    for (int i = 0; i < kPack / 2; ++i) {
      const __nv_bfloat162 pair = __floats2bfloat162_rn(x[2 * i], x[2 * i + 1]);
      pack.v[2 * i] = bf16{__bfloat16_as_ushort(pair.x)};
      pack.v[2 * i + 1] = bf16{__bfloat16_as_ushort(pair.y)};
    }
    return pack;
  } else  // the host's form, and float's
#endif
  {
    for (int i = 0; i < kPack; ++i)
      store(pack.v[i], x[i]);
  }
  return pack;
}

/// x[i] = p[i] for i < n (n <= kPack; 0 beyond): as one pack when Whole (p aligned, n = kPack).
template <bool Whole, class T>
KOKKOS_INLINE_FUNCTION void load_pack(const T* p, int n, float (&x)[kPack]) {
  const Pack<T> pack = load_stored<Whole>(p, n);
  for (int i = 0; i < kPack; ++i)
    x[i] = to_float(pack.v[i]);
}

}  // namespace dqntrader

// bfloat16 storage: the upper 16 bits of an IEEE-754 binary32. Conversions round to nearest,
// ties to even: on the host written out, in CUDA device code by the hardware's conversion (one
// instruction), which gives the same bf16 for every value but a NaN, which stays a quiet NaN
// whose payload may differ.
#pragma once

#include <Kokkos_Core.hpp>

#include <cstdint>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#endif

#include "dqntrader/core/kokkos_compat.hpp"

namespace dqntrader {

struct bf16 {
  std::uint16_t bits;
};

/// Rounds to the nearest bf16, ties to even; NaN stays NaN (quiet), infinities stay.
KOKKOS_INLINE_FUNCTION bf16 to_bf16(float value) {
#if defined(__CUDA_ARCH__)
  return bf16{__bfloat16_as_ushort(__float2bfloat16_rn(value))};
#else
  const std::uint32_t u = compat::bit_cast<std::uint32_t>(value);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0u) {
    return bf16{static_cast<std::uint16_t>((u >> 16) | 0x0040u)};
  }
  const std::uint32_t rounding = 0x00007fffu + ((u >> 16) & 1u);
  return bf16{static_cast<std::uint16_t>((u + rounding) >> 16)};
#endif
}

/// Exact: every bf16 is a float.
KOKKOS_INLINE_FUNCTION float to_float(bf16 value) {
  return compat::bit_cast<float>(static_cast<std::uint32_t>(value.bits) << 16);
}

/// Overloads that let one kernel body serve float and bf16 storage alike.
KOKKOS_INLINE_FUNCTION float to_float(float value) {
  return value;
}
KOKKOS_INLINE_FUNCTION void store(float& target, float value) {
  target = value;
}
KOKKOS_INLINE_FUNCTION void store(bf16& target, float value) {
  target = to_bf16(value);
}

}  // namespace dqntrader

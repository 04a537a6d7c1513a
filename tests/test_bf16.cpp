// bf16 conversions against a reference written from the definition: the nearest of the
// two bf16 neighbours of x, ties to the one with an even last bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "dqntrader/core/bf16.hpp"
#include "dqntrader/core/packs.hpp"
#include "test_support.hpp"

namespace dqntrader {
namespace {

float from_bits(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// Value of a bf16 bit pattern in double; the pattern past the largest finite bf16 stands
// for 2^128, as rounding with an unbounded exponent would produce before overflowing.
double bf16_value(std::uint16_t bits) {
  if ((bits & 0x7fffu) == 0x7f80u)
    return (bits & 0x8000u) ? -0x1p128 : 0x1p128;
  return from_bits(std::uint32_t{bits} << 16);
}

// Reference rounding for finite x: truncation gives the neighbour towards zero, the next
// pattern the one away from zero; compare distances in double.
std::uint16_t reference_bf16(float x) {
  const std::uint32_t u = bits_of(x);
  const std::uint16_t low = static_cast<std::uint16_t>(u >> 16);
  const std::uint16_t high = static_cast<std::uint16_t>(low + 1);
  if ((u & 0xffffu) == 0)
    return low;
  const double d_low = std::fabs(static_cast<double>(x) - bf16_value(low));
  const double d_high = std::fabs(static_cast<double>(x) - bf16_value(high));
  if (d_low < d_high)
    return low;
  if (d_high < d_low)
    return high;
  return (low & 1u) == 0 ? low : high;
}

TEST(Bf16, RoundsToNearestEvenOnRandomFloats) {
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE(testing::seed_note(seed));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<std::uint32_t> any_bits;
  int checked = 0;
  for (int i = 0; i < 200000; ++i) {
    const float x = from_bits(any_bits(rng));
    if (!std::isfinite(x))
      continue;
    const std::uint16_t expected = reference_bf16(x);
    ASSERT_EQ(to_bf16(x).bits, expected) << "x = " << x << " bits " << std::hex << bits_of(x);
    ++checked;
  }
  EXPECT_GT(checked, 190000);
}

TEST(Bf16, TiesGoToEven) {
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: the even neighbour is 1.
  EXPECT_EQ(to_bf16(1.0f + 0x1p-8f).bits, to_bf16(1.0f).bits);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: the even one is 1 + 2^-6.
  EXPECT_EQ(to_float(to_bf16(1.0f + 3 * 0x1p-8f)), 1.0f + 0x1p-6f);
}

TEST(Bf16, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(to_float(to_bf16(inf)), inf);
  EXPECT_EQ(to_float(to_bf16(-inf)), -inf);
  EXPECT_TRUE(std::isnan(to_float(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload sits only in the low 16 bits must not become infinity.
  EXPECT_TRUE(std::isnan(to_float(to_bf16(from_bits(0x7f800001u)))));
  // The largest float lies beyond the largest bf16 by more than half a step: infinity.
  EXPECT_EQ(to_float(to_bf16(std::numeric_limits<float>::max())), inf);
  EXPECT_EQ(to_bf16(-0.0f).bits, 0x8000u);
}

TEST(Bf16, WideningIsExact) {
  for (std::uint32_t bits = 0; bits < 0x10000u; bits += 7) {
    const float wide = to_float(bf16{static_cast<std::uint16_t>(bits)});
    if (std::isnan(wide))
      continue;
    EXPECT_EQ(bits_of(wide), bits << 16);
  }
}

// values rounded in device code, one by one (to_bf16) and eight at a time (pack_of, which on
// CUDA converts two values an instruction): [0, n) and [n, 2n) of the result.
std::vector<std::uint16_t> round_on_device(const std::vector<float>& values) {
  const std::size_t n = values.size();
  if (n % kPack != 0)
    throw std::invalid_argument("round_on_device: whole packs only");
  Kokkos::View<float*, DeviceMemory> input("test::input", n);
  Kokkos::View<std::uint16_t*, DeviceMemory> output("test::output", 2 * n);
  auto input_host = Kokkos::create_mirror_view(input);
  for (std::size_t i = 0; i < n; ++i)
    input_host(i) = values[i];
  Kokkos::deep_copy(input, input_host);
  Kokkos::parallel_for(
      "dqntrader::test::to_bf16", Kokkos::RangePolicy<ExecSpace>(0, n / kPack),
      KOKKOS_LAMBDA(const int p) {
        float x[kPack];
        for (int i = 0; i < kPack; ++i) {
          x[i] = input(p * kPack + i);
          output(p * kPack + i) = to_bf16(x[i]).bits;
        }
        const Pack<bf16> pack = pack_of<bf16>(x);
        for (int i = 0; i < kPack; ++i)
          output(n + p * kPack + i) = pack.v[i].bits;
      });
  auto output_host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), output);
  return std::vector<std::uint16_t>(output_host.data(), output_host.data() + 2 * n);
}

// The device rounds exactly as the host does, one value at a time and a pack at a time: random
// values, any finite bit patterns (subnormals and large exponents too), ties, the largest
// floats (which round to infinity); infinities stay; a NaN stays a NaN.
TEST(Bf16, DeviceMatchesHost) {
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE(testing::seed_note(seed));
  std::mt19937_64 rng(seed);
  std::vector<float> values = testing::random_values(rng, 1 << 15);
  for (std::size_t i = 0; i < values.size(); i += 2)
    values[i] *= 1e30f;  // exercise large exponents
  std::uniform_int_distribution<std::uint32_t> any_bits;
  while (values.size() < (1u << 16)) {
    const float x = from_bits(any_bits(rng));
    if (std::isfinite(x))
      values.push_back(x);
  }
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (float x : {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -(1.0f + 0x1p-8f), from_bits(0x00008000u),
                  from_bits(0x00018000u), from_bits(0x00000001u), -0.0f, 0.0f,
                  std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(), inf,
                  -inf, nan, -nan})
    values.push_back(x);
  values.push_back(from_bits(0x7f800001u));  // a NaN whose payload is in the low bits alone
  while (values.size() % kPack != 0)
    values.push_back(1.0f);
  const std::size_t n = values.size();
  const std::vector<std::uint16_t> rounded = round_on_device(values);
  for (std::size_t i = 0; i < n; ++i) {
    const float x = values[i];
    for (std::size_t form = 0; form < 2; ++form) {
      const std::uint16_t bits = rounded[form * n + i];
      if (std::isnan(x)) {
        EXPECT_TRUE(std::isnan(to_float(bf16{bits}))) << "form " << form;
      } else if (std::isinf(x)) {
        EXPECT_EQ(to_float(bf16{bits}), x) << "form " << form;
      } else {
        ASSERT_EQ(bits, reference_bf16(x))
            << "x = " << x << " bits " << std::hex << bits_of(x) << " form " << form;
      }
    }
  }
}

}  // namespace
}  // namespace dqntrader

// The matrix-product backend against a double-precision oracle written here, on fresh
// random inputs: every transpose combination, odd and non-square shapes, alpha and beta
// away from 0 and 1, single and strided-batched products, in every precision mode.
//
// Error measure: max_ij |C_ij - R_ij| / max_ij S_ij, with R the exact result computed in
// double from the float inputs (before any rounding to bf16) and
// S_ij = |alpha| sum_p |op(A)_ip op(B)_pj| + |beta C0_ij| the magnitude it is built from.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <vector>

#include "backends/gemm.hpp"
#include "dqntrader/core/bf16.hpp"
#include "dqntrader/core/error.hpp"
#include "test_support.hpp"

namespace dqntrader {
namespace {

using gemm::Op;

enum class Mode { fp32, tf32, bf16_to_float, bf16_to_bf16 };

const char* name(Mode mode) {
  switch (mode) {
    case Mode::fp32:
      return "fp32";
    case Mode::tf32:
      return "tf32";
    case Mode::bf16_to_float:
      return "bf16->float";
    case Mode::bf16_to_bf16:
      return "bf16->bf16";
  }
  return "?";
}

// Bounds of the error measure above, from the unit roundoff u of each format.
//  - fp32: float accumulation; on random-sign sums the error grows like sqrt(k) * 2^-24
//    (about 1.4e-6 of a single term's size at k = 513, far less of the scale S).
//  - tf32: each float operand loses its 13 low mantissa bits in the tensor cores; whether
//    by rounding or by truncation is the library's choice, so allow truncation,
//    u = 2^-10 per operand: 2u + u^2 < 2e-3.
//  - bf16: operands rounded to nearest bf16 (u = 2^-8): 2u + u^2 < 7.9e-3 for a float
//    result; a bf16 result adds the rounding of C0 and of the result itself: 4u + u^2
//    < 1.57e-2.
double bound(Mode mode) {
  switch (mode) {
    case Mode::fp32:
      return 1e-6;
    case Mode::tf32:
      return 2e-3;
    case Mode::bf16_to_float:
      return 1e-2;
    case Mode::bf16_to_bf16:
      return 1.6e-2;
  }
  return 0.0;
}

struct Problem {
  Op op_a, op_b;
  std::size_t m, n, k;
  float alpha, beta;
  std::vector<float> a, b, c0;  // stored row-major: A is m x k (k x m if op_a is T), ...

  std::size_t a_rows() const { return op_a == Op::none ? m : k; }
  std::size_t a_cols() const { return op_a == Op::none ? k : m; }
  std::size_t b_rows() const { return op_b == Op::none ? k : n; }
  std::size_t b_cols() const { return op_b == Op::none ? n : k; }
  double op_a_at(std::size_t i, std::size_t p) const {
    return op_a == Op::none ? a[i * k + p] : a[p * m + i];
  }
  double op_b_at(std::size_t p, std::size_t j) const {
    return op_b == Op::none ? b[p * n + j] : b[j * k + p];
  }
  std::string describe() const {
    std::ostringstream out;
    out << "op_a=" << (op_a == Op::none ? 'N' : 'T') << " op_b=" << (op_b == Op::none ? 'N' : 'T')
        << " m=" << m << " n=" << n << " k=" << k << " alpha=" << alpha << " beta=" << beta;
    return out.str();
  }
};

Problem make_problem(std::mt19937_64& rng, Op op_a, Op op_b, std::size_t m, std::size_t n,
                     std::size_t k, float alpha, float beta) {
  Problem p{op_a, op_b, m, n, k, alpha, beta, {}, {}, {}};
  p.a = testing::random_values(rng, m * k);
  p.b = testing::random_values(rng, k * n);
  p.c0 = testing::random_values(rng, m * n);
  return p;
}

// The oracle: plain loops in double.
double normalized_error(const Problem& p, const std::vector<float>& c) {
  double worst = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < p.m; ++i) {
    for (std::size_t j = 0; j < p.n; ++j) {
      double sum = 0.0, magnitude = 0.0;
      for (std::size_t q = 0; q < p.k; ++q) {
        const double term = p.op_a_at(i, q) * p.op_b_at(q, j);
        sum += term;
        magnitude += std::fabs(term);
      }
      const double c0 = p.beta == 0.0f ? 0.0 : static_cast<double>(p.c0[i * p.n + j]);
      const double exact = p.alpha * sum + p.beta * c0;
      worst = std::max(worst, std::fabs(c[i * p.n + j] - exact));
      scale = std::max(scale, std::fabs(p.alpha) * magnitude + std::fabs(p.beta * c0));
    }
  }
  return scale > 0.0 ? worst / scale : worst;
}

float identity(float x) {
  return x;
}
float widen(bf16 x) {
  return to_float(x);
}

// Runs one product in the given mode and returns C on the host as floats.
std::vector<float> run(Mode mode, const Problem& p) {
  const ExecSpace space;
  std::vector<float> result;
  if (mode == Mode::fp32 || mode == Mode::tf32) {
    auto a = testing::to_device<float>(p.a, p.a_rows(), p.a_cols(), identity);
    auto b = testing::to_device<float>(p.b, p.b_rows(), p.b_cols(), identity);
    auto c = testing::to_device<float>(p.c0, p.m, p.n, identity);
    gemm::gemm(space, mode == Mode::fp32 ? Precision::fp32 : Precision::tf32, p.op_a, p.op_b,
               p.alpha, a, b, p.beta, c);
    result = testing::to_host(c, identity);
  } else {
    auto a = testing::to_device<bf16>(p.a, p.a_rows(), p.a_cols(), to_bf16);
    auto b = testing::to_device<bf16>(p.b, p.b_rows(), p.b_cols(), to_bf16);
    if (mode == Mode::bf16_to_float) {
      auto c = testing::to_device<float>(p.c0, p.m, p.n, identity);
      gemm::gemm(space, p.op_a, p.op_b, p.alpha, a, b, p.beta, c);
      result = testing::to_host(c, identity);
    } else {
      auto c = testing::to_device<bf16>(p.c0, p.m, p.n, to_bf16);
      gemm::gemm(space, p.op_a, p.op_b, p.alpha, a, b, p.beta, c);
      result = testing::to_host(c, widen);
    }
  }
  return result;
}

class GemmAgainstOracle : public ::testing::TestWithParam<Mode> {};

TEST_P(GemmAgainstOracle, AllTransposesAndOddShapes) {
  const Mode mode = GetParam();
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE(testing::seed_note(seed));
  std::mt19937_64 rng(seed);
  const std::size_t dims[] = {1, 3, 17, 64, 513};
  const float alphas[] = {1.0f, -1.25f, 0.75f};
  const float betas[] = {0.0f, 0.5f, -2.0f};
  double worst = 0.0;
  int cases = 0;
  for (Op op_a : {Op::none, Op::transpose}) {
    for (Op op_b : {Op::none, Op::transpose}) {
      for (std::size_t m : dims) {
        for (std::size_t n : dims) {
          for (std::size_t k : dims) {
            if ((m == 513) + (n == 513) + (k == 513) > 1)
              continue;  // one large side at most
            const Problem p =
                make_problem(rng, op_a, op_b, m, n, k, alphas[cases % 3], betas[(cases / 3) % 3]);
            const double error = normalized_error(p, run(mode, p));
            ASSERT_LE(error, bound(mode)) << name(mode) << ": " << p.describe();
            worst = std::max(worst, error);
            ++cases;
          }
        }
      }
    }
  }
  // One full 513^3 product, transposed both ways.
  const Problem big = make_problem(rng, Op::transpose, Op::transpose, 513, 513, 513, -0.5f, 1.5f);
  const double big_error = normalized_error(big, run(mode, big));
  EXPECT_LE(big_error, bound(mode)) << name(mode) << ": " << big.describe();
  worst = std::max(worst, big_error);
  std::ostringstream worst_text;
  worst_text << std::scientific << worst;
  RecordProperty("worst_normalized_error", worst_text.str());
  EXPECT_EQ(cases, 4 * 112);
}

INSTANTIATE_TEST_SUITE_P(Modes, GemmAgainstOracle,
                         ::testing::Values(Mode::fp32, Mode::tf32, Mode::bf16_to_float,
                                           Mode::bf16_to_bf16),
                         [](const ::testing::TestParamInfo<Mode>& info) {
                           switch (info.param) {
                             case Mode::fp32:
                               return std::string("fp32");
                             case Mode::tf32:
                               return std::string("tf32");
                             case Mode::bf16_to_float:
                               return std::string("bf16_to_float");
                             case Mode::bf16_to_bf16:
                               return std::string("bf16_to_bf16");
                           }
                           return std::string("unknown");
                         });

// beta = 0 means C is written, never read: NaN already in C must not survive.
TEST(Gemm, BetaZeroIgnoresWhatCHeld) {
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE(testing::seed_note(seed));
  std::mt19937_64 rng(seed);
  for (std::size_t k : {std::size_t{0}, std::size_t{5}}) {
    Problem p = make_problem(rng, Op::none, Op::none, 7, 9, k, 1.5f, 0.0f);
    std::fill(p.c0.begin(), p.c0.end(), std::numeric_limits<float>::quiet_NaN());
    for (Mode mode : {Mode::fp32, Mode::bf16_to_float, Mode::bf16_to_bf16}) {
      const std::vector<float> c = run(mode, p);
      for (float x : c)
        ASSERT_FALSE(std::isnan(x)) << name(mode) << " k=" << k;
      EXPECT_LE(normalized_error(p, c), bound(mode)) << name(mode) << " k=" << k;
    }
  }
}

// k = 0: the product is empty and C becomes beta * C.
TEST(Gemm, EmptyInnerDimensionScalesC) {
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE(testing::seed_note(seed));
  std::mt19937_64 rng(seed);
  const Problem p = make_problem(rng, Op::transpose, Op::none, 4, 6, 0, 2.0f, -0.5f);
  const std::vector<float> c = run(Mode::fp32, p);
  for (std::size_t i = 0; i < c.size(); ++i)
    EXPECT_EQ(c[i], -0.5f * p.c0[i]);
}

TEST(Gemm, RejectsMismatchedShapes) {
  const ExecSpace space;
  Matrix<float> a("a", 3, 4), b("b", 5, 2), c("c", 3, 2);
  EXPECT_THROW(gemm::gemm(space, Precision::fp32, Op::none, Op::none, 1.0f, a, b, 0.0f, c),
               InputError);
  Matrix<float> b_ok("b", 4, 2), c_bad("c", 2, 2);
  EXPECT_THROW(gemm::gemm(space, Precision::fp32, Op::none, Op::none, 1.0f, a, b_ok, 0.0f, c_bad),
               InputError);
  EXPECT_THROW(gemm::gemm(space, Precision::bf16, Op::none, Op::none, 1.0f, a, b_ok, 0.0f, c),
               InputError);
  MatrixBatch<float> a3("a", 2, 3, 4), b3("b", 3, 4, 2), c3("c", 2, 3, 2);
  EXPECT_THROW(
      gemm::gemm_batched(space, Precision::fp32, Op::none, Op::none, 1.0f, a3, b3, 0.0f, c3),
      InputError);
}

// --- strided batches ------------------------------------------------------------------------

template <class T, class Convert>
MatrixBatch<T> to_device_batch(const std::vector<std::vector<float>>& items, std::size_t rows,
                               std::size_t cols, Convert convert) {
  MatrixBatch<T> device("test::batch", items.size(), rows, cols);
  auto host = Kokkos::create_mirror_view(device);
  for (std::size_t s = 0; s < items.size(); ++s) {
    for (std::size_t i = 0; i < rows; ++i) {
      for (std::size_t j = 0; j < cols; ++j)
        host(s, i, j) = convert(items[s][i * cols + j]);
    }
  }
  Kokkos::deep_copy(device, host);
  return device;
}

template <class T, class Convert>
std::vector<float> item_to_host(const MatrixBatch<T>& device, std::size_t s, Convert convert) {
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), device);
  std::vector<float> values;
  for (std::size_t i = 0; i < device.extent(1); ++i) {
    for (std::size_t j = 0; j < device.extent(2); ++j)
      values.push_back(convert(host(s, i, j)));
  }
  return values;
}

struct BatchCase {
  std::size_t batch_a, batch_b;  // 1 = shared by every product
};

class GemmBatched : public ::testing::TestWithParam<Mode> {};

TEST_P(GemmBatched, EachProductMatchesTheOracle) {
  const Mode mode = GetParam();
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE(testing::seed_note(seed));
  std::mt19937_64 rng(seed);
  const ExecSpace space;
  const std::size_t batch = 5;
  for (BatchCase bc : {BatchCase{batch, batch}, BatchCase{1, batch}, BatchCase{batch, 1}}) {
    for (Op op_a : {Op::none, Op::transpose}) {
      for (Op op_b : {Op::none, Op::transpose}) {
        std::vector<Problem> problems;
        for (std::size_t s = 0; s < batch; ++s) {
          problems.push_back(make_problem(rng, op_a, op_b, 17, 3, 64, -0.75f, 0.25f));
          if (bc.batch_a == 1)
            problems[s].a = problems[0].a;
          if (bc.batch_b == 1)
            problems[s].b = problems[0].b;
        }
        std::vector<std::vector<float>> as, bs, cs;
        for (std::size_t s = 0; s < batch; ++s) {
          if (s < bc.batch_a)
            as.push_back(problems[s].a);
          if (s < bc.batch_b)
            bs.push_back(problems[s].b);
          cs.push_back(problems[s].c0);
        }
        const Problem& p = problems[0];
        std::vector<std::vector<float>> results(batch);
        if (mode == Mode::fp32 || mode == Mode::tf32) {
          auto a = to_device_batch<float>(as, p.a_rows(), p.a_cols(), identity);
          auto b = to_device_batch<float>(bs, p.b_rows(), p.b_cols(), identity);
          auto c = to_device_batch<float>(cs, p.m, p.n, identity);
          gemm::gemm_batched(space, mode == Mode::fp32 ? Precision::fp32 : Precision::tf32, op_a,
                             op_b, p.alpha, a, b, p.beta, c);
          for (std::size_t s = 0; s < batch; ++s)
            results[s] = item_to_host(c, s, identity);
        } else {
          auto a = to_device_batch<bf16>(as, p.a_rows(), p.a_cols(), to_bf16);
          auto b = to_device_batch<bf16>(bs, p.b_rows(), p.b_cols(), to_bf16);
          if (mode == Mode::bf16_to_float) {
            auto c = to_device_batch<float>(cs, p.m, p.n, identity);
            gemm::gemm_batched(space, op_a, op_b, p.alpha, a, b, p.beta, c);
            for (std::size_t s = 0; s < batch; ++s)
              results[s] = item_to_host(c, s, identity);
          } else {
            auto c = to_device_batch<bf16>(cs, p.m, p.n, to_bf16);
            gemm::gemm_batched(space, op_a, op_b, p.alpha, a, b, p.beta, c);
            for (std::size_t s = 0; s < batch; ++s)
              results[s] = item_to_host(c, s, widen);
          }
        }
        for (std::size_t s = 0; s < batch; ++s) {
          EXPECT_LE(normalized_error(problems[s], results[s]), bound(mode))
              << name(mode) << " item " << s << " shared A: " << (bc.batch_a == 1)
              << " shared B: " << (bc.batch_b == 1) << " " << problems[s].describe();
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, GemmBatched,
                         ::testing::Values(Mode::fp32, Mode::tf32, Mode::bf16_to_float,
                                           Mode::bf16_to_bf16));

// --- the precision modes are what they say ----------------------------------------------------

#if defined(DQNTRADER_BACKEND_CUDA)
// The largest difference, relative to the largest value of y.
double max_difference(const std::vector<float>& x, const std::vector<float>& y) {
  double worst = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(x[i]) - y[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(y[i])));
  }
  return worst / scale;
}
#endif

TEST(GemmPrecision, ReducedModesDifferFromFp32OnlyWhereTheBackendHasTheUnits) {
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE(testing::seed_note(seed));
  std::mt19937_64 rng(seed);
  const Problem p = make_problem(rng, Op::none, Op::none, 256, 256, 256, 1.0f, 0.0f);
  const std::vector<float> fp32 = run(Mode::fp32, p);
  const std::vector<float> tf32 = run(Mode::tf32, p);
  const double fp32_error = normalized_error(p, fp32);
  const double tf32_error = normalized_error(p, tf32);
  EXPECT_LE(fp32_error, bound(Mode::fp32));
#if defined(DQNTRADER_BACKEND_CUDA)
  // Rounding inputs to 11 significant bits moves results by about 1e-4 of their scale,
  // a hundred times what fp32 accumulation does: a silent fallback to fp32 fails here.
  const double bf16_error = normalized_error(p, run(Mode::bf16_to_float, p));
  EXPECT_GT(tf32_error, 10.0 * fp32_error);
  EXPECT_GT(max_difference(tf32, fp32), 1e-5);
  EXPECT_GT(bf16_error, 2.0 * tf32_error);
  EXPECT_LE(tf32_error, bound(Mode::tf32));
  EXPECT_LE(bf16_error, bound(Mode::bf16_to_float));
#else
  // The host has no TF32 units: tf32 is documented to compute exactly as fp32 does.
  EXPECT_EQ(tf32, fp32);
  EXPECT_EQ(tf32_error, fp32_error);
#endif
}

}  // namespace
}  // namespace dqntrader

namespace dqntrader {
namespace {

// --- epilogues and strided batches ----------------------------------------------------------

// relu?(alpha * op(A[s]) op(B[s]) + beta * C0[s] + bias[s * stride + j]) against the oracle,
// for a batch whose C is a block of rows of a larger array (a strided batch, as the
// evaluator uses it), in every mode.
template <class TAB, class TC, class ToAB, class ToC, class FromC>
void check_epilogue(Mode mode, ToAB to_ab, ToC to_c, FromC from_c, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const ExecSpace space;
  const std::size_t batch = 3, m = 17, n = 33, k = 64, total_rows = 3 * m, first_row = m;
  for (bool relu : {false, true}) {
    for (bool with_bias : {false, true}) {
      std::vector<Problem> problems;
      for (std::size_t s = 0; s < batch; ++s)
        problems.push_back(make_problem(rng, Op::none, Op::transpose, m, n, k, 0.5f, 0.25f));
      const std::vector<float> bias_values = testing::random_values(rng, batch * n);
      std::vector<std::vector<float>> as, bs;
      std::vector<std::vector<float>> cs(batch, std::vector<float>(total_rows * n, 7.0f));
      for (std::size_t s = 0; s < batch; ++s) {
        as.push_back(problems[s].a);
        bs.push_back(problems[s].b);
        std::copy(problems[s].c0.begin(), problems[s].c0.end(), cs[s].begin() + first_row * n);
      }
      auto a = to_device_batch<TAB>(as, m, k, to_ab);
      auto b = to_device_batch<TAB>(bs, n, k, to_ab);
      auto c_all = to_device_batch<TC>(cs, total_rows, n, to_c);
      gemm::Epilogue<TC> epilogue;
      epilogue.relu = relu;
      if (with_bias) {
        Kokkos::View<TC*, DeviceMemory> bias("test::bias", batch * n);
        auto host = Kokkos::create_mirror_view(bias);
        for (std::size_t i = 0; i < bias_values.size(); ++i)
          host(i) = to_c(bias_values[i]);
        Kokkos::deep_copy(bias, host);
        epilogue.bias = bias;
        epilogue.bias_stride = n;
      }
      const gemm::StridedBatch<TC> c_block = Kokkos::subview(
          c_all, Kokkos::ALL, std::make_pair(first_row, first_row + m), Kokkos::ALL);
      if constexpr (std::is_same<TAB, float>::value) {
        gemm::gemm_batched(space, mode == Mode::fp32 ? Precision::fp32 : Precision::tf32, Op::none,
                           Op::transpose, 0.5f, a, b, 0.25f, c_block, epilogue);
      } else {
        gemm::gemm_batched(space, Op::none, Op::transpose, 0.5f, a, b, 0.25f, c_block, epilogue);
      }
      for (std::size_t s = 0; s < batch; ++s) {
        const std::vector<float> all = item_to_host(c_all, s, from_c);
        double worst = 0.0, scale = 0.0;
        for (std::size_t i = 0; i < total_rows; ++i) {
          for (std::size_t j = 0; j < n; ++j) {
            const double got = all[i * n + j];
            if (i < first_row || i >= first_row + m) {
              ASSERT_EQ(got, from_c(to_c(7.0f))) << "a row outside the block was written";
              continue;
            }
            const Problem& p = problems[s];
            double sum = 0.0, magnitude = 0.0;
            for (std::size_t q = 0; q < k; ++q) {
              sum += p.op_a_at(i - first_row, q) * p.op_b_at(q, j);
              magnitude += std::fabs(p.op_a_at(i - first_row, q) * p.op_b_at(q, j));
            }
            const double bias = with_bias ? bias_values[s * n + j] : 0.0;
            double exact = 0.5 * sum + 0.25 * p.c0[(i - first_row) * n + j] + bias;
            if (relu)
              exact = std::max(exact, 0.0);
            worst = std::max(worst, std::fabs(got - exact));
            scale =
                std::max(scale, 0.5 * magnitude + 0.25 * std::fabs(p.c0[(i - first_row) * n + j]) +
                                    std::fabs(bias));
          }
        }
        EXPECT_LE(worst / scale, bound(mode))
            << name(mode) << " relu " << relu << " bias " << with_bias;
      }
    }
  }
}

TEST(GemmEpilogue, BiasAndReluOnAStridedBatchInEveryMode) {
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE(testing::seed_note(seed));
  check_epilogue<float, float>(Mode::fp32, identity, identity, identity, seed);
  check_epilogue<float, float>(Mode::tf32, identity, identity, identity, seed + 1);
  check_epilogue<bf16, float>(Mode::bf16_to_float, to_bf16, identity, identity, seed + 2);
  check_epilogue<bf16, bf16>(Mode::bf16_to_bf16, to_bf16, to_bf16, widen, seed + 3);
}

// --- rows with a gap after them ----------------------------------------------------------------

// Each operand the first columns of a wider array (a row stride longer than its rows): every
// transpose, a batch of 2 with the A operand shared, against the oracle; the columns past C's are
// not written.
template <class TAB, class TC, class ToAB, class ToC, class FromC>
void check_gapped(Mode mode, ToAB to_ab, ToC to_c, FromC from_c, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const ExecSpace space;
  const std::size_t batch = 2, gap = 5;
  const float sentinel = 7.0f;
  auto widened = [&](const std::vector<float>& values, std::size_t rows, std::size_t cols) {
    std::vector<float> wide(rows * (cols + gap), sentinel);
    for (std::size_t i = 0; i < rows; ++i)
      std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(i * cols), cols,
                  wide.begin() + static_cast<std::ptrdiff_t>(i * (cols + gap)));
    return wide;
  };
  auto first_columns = [](const auto& all, std::size_t cols) {
    return Kokkos::subview(all, Kokkos::ALL, Kokkos::ALL, std::make_pair(std::size_t{0}, cols));
  };
  for (Op op_a : {Op::none, Op::transpose}) {
    for (Op op_b : {Op::none, Op::transpose}) {
      std::vector<Problem> problems;
      for (std::size_t s = 0; s < batch; ++s) {
        problems.push_back(make_problem(rng, op_a, op_b, 13, 9, 24, 0.5f, 0.25f));
        problems[s].a = problems[0].a;
      }
      const Problem& p = problems[0];
      std::vector<std::vector<float>> bs, cs;
      for (const Problem& q : problems) {
        bs.push_back(widened(q.b, p.b_rows(), p.b_cols()));
        cs.push_back(widened(q.c0, p.m, p.n));
      }
      auto a_all = to_device_batch<TAB>({widened(p.a, p.a_rows(), p.a_cols())}, p.a_rows(),
                                        p.a_cols() + gap, to_ab);
      auto b_all = to_device_batch<TAB>(bs, p.b_rows(), p.b_cols() + gap, to_ab);
      auto c_all = to_device_batch<TC>(cs, p.m, p.n + gap, to_c);
      const gemm::StridedBatch<const TAB> a = first_columns(a_all, p.a_cols());
      const gemm::StridedBatch<const TAB> b = first_columns(b_all, p.b_cols());
      const gemm::StridedBatch<TC> c = first_columns(c_all, p.n);
      if constexpr (std::is_same<TAB, float>::value) {
        gemm::gemm_batched(space, mode == Mode::fp32 ? Precision::fp32 : Precision::tf32, op_a,
                           op_b, p.alpha, a, b, p.beta, c);
      } else {
        gemm::gemm_batched(space, op_a, op_b, p.alpha, a, b, p.beta, c);
      }
      for (std::size_t s = 0; s < batch; ++s) {
        const std::vector<float> all = item_to_host(c_all, s, from_c);
        std::vector<float> result;
        for (std::size_t i = 0; i < p.m; ++i) {
          for (std::size_t j = 0; j < p.n + gap; ++j) {
            if (j < p.n)
              result.push_back(all[i * (p.n + gap) + j]);
            else
              ASSERT_EQ(all[i * (p.n + gap) + j], from_c(to_c(sentinel))) << "gap written";
          }
        }
        EXPECT_LE(normalized_error(problems[s], result), bound(mode))
            << name(mode) << " item " << s << " " << problems[s].describe();
      }
    }
  }
}

TEST(GemmGapped, RowsFollowedByOtherColumnsInEveryOperandAndMode) {
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE(testing::seed_note(seed));
  check_gapped<float, float>(Mode::fp32, identity, identity, identity, seed);
  check_gapped<float, float>(Mode::tf32, identity, identity, identity, seed + 1);
  check_gapped<bf16, float>(Mode::bf16_to_float, to_bf16, identity, identity, seed + 2);
  check_gapped<bf16, bf16>(Mode::bf16_to_bf16, to_bf16, to_bf16, widen, seed + 3);
}

TEST(GemmEpilogue, RejectsAShortBias) {
  const ExecSpace space;
  Matrix<float> a("a", 4, 5), b("b", 5, 6), c("c", 4, 6);
  gemm::Epilogue<float> epilogue;
  epilogue.bias = Kokkos::View<float*, DeviceMemory>("bias", 5);
  EXPECT_THROW(
      gemm::gemm(space, Precision::fp32, Op::none, Op::none, 1.0f, a, b, 0.0f, c, epilogue),
      InputError);
}

}  // namespace
}  // namespace dqntrader

#if defined(DQNTRADER_BACKEND_OPENMP)
#include "backends/openmp/host_blas.hpp"

namespace dqntrader {
namespace {

// The rule that routes OpenBLAS off kernels below what the CPU runs (dqntrader info, and the
// Cli test of it, show the rule's effect on this machine).
TEST(HostBlas, RoutesOnlyCoresBelowWhatTheCpuRuns) {
  EXPECT_STREQ(gemm::better_openblas_core("Prescott", true, true), "SkylakeX");
  EXPECT_STREQ(gemm::better_openblas_core("Haswell", true, true), "SkylakeX");
  EXPECT_STREQ(gemm::better_openblas_core("Zen", true, true), "SkylakeX");
  EXPECT_STREQ(gemm::better_openblas_core("Prescott", false, true), "Haswell");
  EXPECT_STREQ(gemm::better_openblas_core("Nehalem", false, true), "Haswell");
  EXPECT_EQ(gemm::better_openblas_core("Haswell", false, true), nullptr);
  EXPECT_EQ(gemm::better_openblas_core("Zen", false, true), nullptr);
  EXPECT_EQ(gemm::better_openblas_core("Prescott", false, false), nullptr);
  for (const char* core : {"SkylakeX", "Cooperlake", "SapphireRapids"})
    EXPECT_EQ(gemm::better_openblas_core(core, true, true), nullptr) << core;
}

}  // namespace
}  // namespace dqntrader
#endif

// The build uses the backend it was configured for, on the Kokkos it was built against.
#include <gtest/gtest.h>
#include <Kokkos_Core.hpp>

#include <cstdlib>
#include <sstream>
#include <string>
#include <type_traits>

#include "backends/gemm.hpp"
#include "dqntrader/core/kokkos_compat.hpp"
#include "dqntrader/core/types.hpp"

namespace dqntrader {
namespace {

std::string kokkos_configuration() {
  std::ostringstream out;
  Kokkos::print_configuration(out, false);
  return out.str();
}

TEST(BuildConfig, KokkosVersionIsTheExpectedOne) {
#if DQNTRADER_EXPECT_KOKKOS_VERSION != 0
  EXPECT_EQ(KOKKOS_VERSION, DQNTRADER_EXPECT_KOKKOS_VERSION);
#else
  GTEST_SKIP() << "configured without DQNTRADER_EXPECT_KOKKOS_VERSION (Kokkos " << KOKKOS_VERSION
               << " found)";
#endif
}

// dqntrader info names the Kokkos version as Kokkos itself prints it.
TEST(BuildConfig, KokkosVersionIsPrintedAsKokkosPrintsIt) {
  const std::string expected = "Kokkos Version: " + compat::kokkos_version_string() + "\n";
  EXPECT_NE(kokkos_configuration().find(expected), std::string::npos) << kokkos_configuration();
}

#if defined(DQNTRADER_BACKEND_CUDA)
TEST(BuildConfig, DefaultExecutionSpaceIsCuda) {
  EXPECT_TRUE((std::is_same<ExecSpace, Kokkos::Cuda>::value));
  EXPECT_STREQ(gemm::backend_name(), "cuda");
  EXPECT_NE(kokkos_configuration().find("KOKKOS_ENABLE_CUDA: yes"), std::string::npos)
      << kokkos_configuration();
}
#else
TEST(BuildConfig, DefaultExecutionSpaceIsOpenMP) {
  EXPECT_TRUE((std::is_same<ExecSpace, Kokkos::OpenMP>::value));
  EXPECT_STREQ(gemm::backend_name(), "openmp");
  EXPECT_NE(kokkos_configuration().find("KOKKOS_ENABLE_OPENMP: yes"), std::string::npos)
      << kokkos_configuration();
}
#endif

#if defined(DQNTRADER_BACKEND_OPENMP)
// CTest runs the suite at a given thread count (tests/CMakeLists.txt) through the spelling of
// the Kokkos found; an argument Kokkos no longer knows is only warned about, so the count
// the suite runs with is checked here.
TEST(BuildConfig, RunsOnTheHostThreadsItWasGiven) {
  const char* expected = std::getenv("DQNTRADER_EXPECT_THREADS");
  if (expected == nullptr)
    GTEST_SKIP() << "DQNTRADER_EXPECT_THREADS is not set (CTest sets it)";
  EXPECT_EQ(ExecSpace().concurrency(), std::atoi(expected));
}
#endif

// A kernel really runs in the default execution space and its result comes back: on CUDA
// this is what Kokkos 3.4's architecture check would have aborted without the sm_90 patch.
// (Kernels live in free functions: CUDA forbids device lambdas in a test's private body.)
long sum_below(long n) {
  long sum = 0;
  Kokkos::parallel_reduce(
      "dqntrader::test::sum", Kokkos::RangePolicy<ExecSpace>(0, n),
      KOKKOS_LAMBDA(const long i, long& partial) { partial += i; }, sum);
  return sum;
}

TEST(BuildConfig, KernelsRunInTheDefaultExecutionSpace) {
  const long n = 1 << 20;
  EXPECT_EQ(sum_below(n), n * (n - 1) / 2);
}

}  // namespace
}  // namespace dqntrader

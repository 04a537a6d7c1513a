// The build uses the backend it was configured for, on the Kokkos it was built against.
#include <gtest/gtest.h>
#include <Kokkos_Core.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

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

// The command is built for the backend and the execution space the library was: its version
// line names the library's backend, and `dqntrader info` the execution space and the Kokkos
// this suite runs on (two binaries, configured and linked apart, that must agree).
TEST(BuildConfig, TheCommandRunsTheLibrarysBackendAndExecutionSpace) {
  const std::string out = (std::filesystem::temp_directory_path() /
                           ("dqntrader-build-config-" + std::to_string(::getpid()) + ".txt"))
                              .string();
  auto command = [&](const std::string& arguments) {
    const int status = std::system(
        (std::string(DQNTRADER_CLI_PATH) + " " + arguments + " >" + out + " 2>&1").c_str());
    std::ifstream in(out);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_EQ(status, 0) << arguments << ": " << text.str();
    return text.str();
  };
  const std::string version = command("--version");
  EXPECT_NE(version.find(std::string(", backend ") + gemm::backend_name() + ")"), std::string::npos)
      << version;
  const std::string info = command("info");
  std::remove(out.c_str());
  EXPECT_NE(info.find(std::string("backend: ") + gemm::backend_name() + "\n"), std::string::npos)
      << info;
  EXPECT_NE(info.find(std::string("execution space ") + ExecSpace::name() + ","), std::string::npos)
      << info;
  EXPECT_NE(info.find("Kokkos: " + compat::kokkos_version_string()), std::string::npos) << info;
}

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

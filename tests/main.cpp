// The one test main: Kokkos lives for the whole run (command-line --kokkos-* arguments are
// honoured), and floating-point traps stay off because the suite injects NaN on purpose.
#include <gtest/gtest.h>
#include <Kokkos_Core.hpp>

#include "backends/gemm.hpp"

int main(int argc, char** argv) {
  dqntrader::gemm::route_host_library(argv);  // the kernels the command itself would run
  Kokkos::ScopeGuard kokkos(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

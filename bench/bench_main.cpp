// The benchmark main: Kokkos lives for the whole run, and the context printed with the
// results names the build (version, git revision, backend, Kokkos and its concurrency).
#include <benchmark/benchmark.h>
#include <Kokkos_Core.hpp>

#include <string>

#include "backends/gemm.hpp"
#include "dqntrader/core/kokkos_compat.hpp"
#include "dqntrader/core/types.hpp"
#include "dqntrader/core/version.hpp"

int main(int argc, char** argv) {
  dqntrader::gemm::route_host_library(argv);
  Kokkos::ScopeGuard kokkos(argc, argv);
  benchmark::Initialize(&argc, argv);
  benchmark::AddCustomContext("dqntrader_version", DQNTRADER_VERSION);
  benchmark::AddCustomContext("git_revision", DQNTRADER_GIT_REVISION);
  benchmark::AddCustomContext("backend", dqntrader::gemm::backend_name());
  benchmark::AddCustomContext("matrix_products", dqntrader::gemm::library_description());
  benchmark::AddCustomContext("kokkos_version", dqntrader::compat::kokkos_version_string());
  benchmark::AddCustomContext("kokkos_execution_space", dqntrader::ExecSpace::name());
  benchmark::AddCustomContext("kokkos_concurrency",
                              std::to_string(dqntrader::ExecSpace().concurrency()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

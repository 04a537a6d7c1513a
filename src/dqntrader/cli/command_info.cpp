#include <iostream>

#include "backends/gemm.hpp"
#include "dqntrader/cli/commands.hpp"
#include "dqntrader/core/kokkos_compat.hpp"
#include "dqntrader/core/version.hpp"
#include "dqntrader/dist/dist.hpp"

namespace dqntrader::cli {

Command add_info(CLI::App& app) {
  Command command;
  command.app =
      app.add_subcommand("info", "print the version, the backend and the Kokkos configuration");
  command.run = [](const ExecSpace& space) {
    std::cout << "dqntrader " << DQNTRADER_VERSION << " (" << DQNTRADER_GIT_REVISION << ")\n"
              << "backend: " << gemm::backend_name() << "\n"
              << "matrix products: " << gemm::library_description() << "\n"
              << "sweeps across ranks: " << dist::library_description() << "\n"
              << "Kokkos: " << compat::kokkos_version_string() << ", execution space "
              << ExecSpace::name() << ", concurrency " << space.concurrency() << "\n";
    Kokkos::print_configuration(std::cout, false);
  };
  return command;
}

}  // namespace dqntrader::cli

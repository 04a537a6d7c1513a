#include <iostream>
#include <string>

#include "backends/gemm.hpp"
#include "dqntrader/cli/commands.hpp"
#include "dqntrader/core/kokkos_compat.hpp"
#include "dqntrader/core/version.hpp"
#include "dqntrader/dist/dist.hpp"
#include "dqntrader/train/learning_path.hpp"

namespace dqntrader::cli {

namespace {

// The paths a learning step may take in this build (train/learning_path.hpp).
std::string learning_paths() {
  const std::string products = train::describe(train::LearningPath::products);
  if (std::string(gemm::backend_name()) != "cuda")
    return products;
  return train::describe(train::LearningPath::fused) +
         " for bf16 networks of 1 to 4 hidden layers at most 128 wide (--learning-path auto), "
         "else " +
         products;
}

}  // namespace

Command add_info(CLI::App& app) {
  Command command;
  command.app =
      app.add_subcommand("info", "print the version, the backend and the Kokkos configuration");
  command.run = [](const ExecSpace& space) {
    std::cout << "dqntrader " << DQNTRADER_VERSION << " (" << DQNTRADER_GIT_REVISION << ")\n"
              << "backend: " << gemm::backend_name() << "\n"
              << "matrix products: " << gemm::library_description() << "\n"
              << "learning step: " << learning_paths() << "\n"
              << "sweeps across ranks: " << dist::library_description() << "\n"
#if defined(DQNTRADER_WITH_ONNX)
              << "ONNX export: yes (dqntrader export)\n"
#else
              << "ONNX export: no (built without DQNTRADER_ENABLE_ONNX)\n"
#endif
              << "Kokkos: " << compat::kokkos_version_string() << ", execution space "
              << ExecSpace::name() << ", concurrency " << space.concurrency() << "\n";
    Kokkos::print_configuration(std::cout, false);
  };
  return command;
}

}  // namespace dqntrader::cli

// The dqntrader command.
#include <CLI/CLI.hpp>
#include <Kokkos_Core.hpp>

#include <exception>
#include <iostream>

#include "backends/gemm.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/core/kokkos_compat.hpp"
#include "dqntrader/core/version.hpp"

namespace {

constexpr int exit_ok = 0;
constexpr int exit_runtime_failure = 1;
constexpr int exit_bad_input = 2;

void print_info(std::ostream& out) {
  out << "dqntrader " << DQNTRADER_VERSION << " (" << DQNTRADER_GIT_REVISION << ")\n"
      << "backend: " << dqntrader::gemm::backend_name() << "\n"
      << "Kokkos: " << dqntrader::compat::kokkos_version_string() << ", execution space "
      << dqntrader::ExecSpace::name() << ", concurrency " << dqntrader::ExecSpace().concurrency()
      << "\n";
  Kokkos::print_configuration(out, false);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"dqntrader: Deep Q-Network trading agents, trained and backtested on the device"};
  app.set_version_flag("--version", std::string("dqntrader ") + DQNTRADER_VERSION + " (" +
                                        DQNTRADER_GIT_REVISION + ", backend " + DQNTRADER_BACKEND +
                                        ")");
  dqntrader::compat::InitOptions kokkos_options;
  kokkos_options.disable_warnings = true;
  app.add_option("--threads", kokkos_options.num_threads,
                 "host threads for the OpenMP backend (default: OpenMP's)")
      ->check(CLI::PositiveNumber);
  app.add_option("--device", kokkos_options.device_id, "GPU ordinal for the CUDA backend")
      ->check(CLI::NonNegativeNumber);
  app.require_subcommand(1);

  CLI::App* info =
      app.add_subcommand("info", "print the version, the backend and the Kokkos configuration");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? exit_ok : exit_bad_input;
  }

  try {
    dqntrader::compat::initialize(kokkos_options);
    int status = exit_ok;
    try {
      if (info->parsed())
        print_info(std::cout);
    } catch (...) {
      Kokkos::finalize();
      throw;
    }
    Kokkos::finalize();
    return status;
  } catch (const dqntrader::InputError& e) {
    std::cerr << "dqntrader: error: " << e.what() << "\n";
    return exit_bad_input;
  } catch (const std::exception& e) {
    std::cerr << "dqntrader: failure: " << e.what() << "\n";
    return exit_runtime_failure;
  }
}

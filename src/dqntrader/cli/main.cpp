// The dqntrader command. Exit codes: 0 success, 1 runtime failure, 2 bad input or usage.
#include <CLI/CLI.hpp>
#include <Kokkos_Core.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <vector>

#include "backends/execution.hpp"
#include "backends/gemm.hpp"
#include "dqntrader/cli/commands.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/core/init_check.hpp"
#include "dqntrader/core/kokkos_compat.hpp"
#include "dqntrader/core/version.hpp"
#include "dqntrader/dist/dist.hpp"

namespace {

constexpr int exit_ok = 0;
constexpr int exit_runtime_failure = 1;
constexpr int exit_bad_input = 2;

// Runs the chosen command between Kokkos::initialize and Kokkos::finalize, on an
// execution-space instance of its own.
void run(const dqntrader::compat::InitOptions& options, const dqntrader::cli::Command& command) {
  dqntrader::compat::initialize(options);
  try {
    {
      dqntrader::exec::StreamSpace stream;
      command.run(stream.space());
    }
  } catch (...) {
    Kokkos::finalize();
    throw;
  }
  Kokkos::finalize();
}

// Standard output flushed and closed, and checked: output a full disk, a file size limit or a
// closed pipe cut short is a failure (exit 1), not a success with half a record.
void close_standard_output() {
  std::cout.flush();
  const bool failed_before = !std::cout || std::ferror(stdout) != 0;
  errno = 0;
  if (std::fflush(stdout) != 0 || failed_before || std::fclose(stdout) != 0) {
    const std::string reason = errno != 0 ? std::strerror(errno) : "a write failed";
    throw dqntrader::Error("cannot write to standard output: " + reason +
                           " (what was written is incomplete)");
  }
}

}  // namespace

int main(int argc, char** argv) {
  dqntrader::gemm::route_host_library(argv);
  CLI::App app{"dqntrader: Deep Q-Network trading agents, trained and backtested on the device"};
  app.set_version_flag("--version", std::string("dqntrader ") + DQNTRADER_VERSION + " (" +
                                        DQNTRADER_GIT_REVISION + ", backend " + DQNTRADER_BACKEND +
                                        ")");
  long long threads = -1, device = -1;
  app.add_option("--threads", threads,
                 "host threads for the OpenMP backend, 1 to four per hardware thread (default: "
                 "OpenMP's)")
      ->check(dqntrader::cli::whole_number(1));
  app.add_option("--device", device, "GPU ordinal for the CUDA backend")
      ->check(dqntrader::cli::whole_number());
  app.require_subcommand(1);

  std::vector<dqntrader::cli::Command> commands = {
      dqntrader::cli::add_info(app),     dqntrader::cli::add_synth(app),
      dqntrader::cli::add_cache(app),    dqntrader::cli::add_backtest(app),
      dqntrader::cli::add_train(app),    dqntrader::cli::add_sweep(app),
      dqntrader::cli::add_settings(app), dqntrader::cli::add_report(app),
      dqntrader::cli::add_act(app)};
#if defined(DQNTRADER_WITH_ONNX)
  commands.push_back(dqntrader::cli::add_export(app));
#endif

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? exit_ok : exit_bad_input;
  }

  try {
    dqntrader::compat::InitOptions kokkos_options =
        dqntrader::init_options(threads, device, "--threads", "--device");
    kokkos_options.disable_warnings = true;
    // A sweep may run as many ranks under mpirun or srun (with MPI built in): MPI starts
    // before Kokkos, and each rank takes the GPU of its node-local rank unless --device says.
    bool sweep = false;
    for (const dqntrader::cli::Command& command : commands)
      sweep = sweep || (command.app->parsed() && command.app->get_name() == "sweep");
    const dqntrader::dist::Session session(&argc, &argv, sweep);
    const dqntrader::dist::Ranks& ranks = dqntrader::dist::ranks();
    if (ranks.size > 1 && kokkos_options.device_id < 0) {
      kokkos_options.device_id = dqntrader::dist::device_of(ranks, dqntrader::exec::device_count());
    }
    for (const dqntrader::cli::Command& command : commands) {
      if (command.app->parsed())
        run(kokkos_options, command);
    }
    close_standard_output();
    return exit_ok;
  } catch (const dqntrader::InputError& e) {
    std::cerr << "dqntrader: error: " << e.what() << "\n";
    return exit_bad_input;
  } catch (const std::exception& e) {
    std::cerr << "dqntrader: failure: " << e.what() << "\n";
    return exit_runtime_failure;
  }
}

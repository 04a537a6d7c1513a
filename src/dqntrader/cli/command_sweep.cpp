#include <iostream>
#include <memory>

#include "dqntrader/cli/commands.hpp"
#include "dqntrader/dist/dist.hpp"
#include "dqntrader/request/requests.hpp"
#include "dqntrader/sweep/sweep_start.hpp"

namespace dqntrader::cli {

Command add_sweep(CLI::App& app) {
  auto flags = std::make_shared<RequestFlags>();
  Command command;
  command.app = flags->add(app, request::table("sweep"));
  command.run = [flags](const ExecSpace& space) {
    request::SweepRequest r = request::sweep_request(flags->given());
    const bool resume = !r.resume.empty();
    const sweep::SweepPlan plan =
        resume ? sweep::reopen_sweep(r.resume, std::cerr) : sweep::plan_sweep(std::move(r.plan));
    dist::run_whole_sweep(space, plan, resume, std::cerr);
  };
  return command;
}

}  // namespace dqntrader::cli

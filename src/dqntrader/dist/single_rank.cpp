// dist/ without MPI: one rank.
#include "dqntrader/dist/dist.hpp"
#include "dqntrader/sweep/sweep_run.hpp"

namespace dqntrader::dist {

Session::Session(int*, char***, bool) {}

Session::~Session() = default;

std::string library_description() {
  return "none (built without DQNTRADER_ENABLE_MPI: one rank)";
}

const Ranks& ranks() {
  static const Ranks one;
  return one;
}

sweep::SweepPlan share_plan(const sweep::SweepPlan& plan,
                            const std::function<void(const sweep::SweepPlan&)>& write_first) {
  write_first(plan);
  return plan;
}

void run_sweep(const ExecSpace& space, sweep::SweepPlan& plan, std::ostream& log,
               const std::function<bool()>& interrupted) {
  sweep::run_sweep(space, plan, log, interrupted);
}

}  // namespace dqntrader::dist

#include "dqntrader/report/report.hpp"

#include <filesystem>

#include "dqntrader/report/run_report.hpp"
#include "dqntrader/report/sweep_report.hpp"

namespace dqntrader::report {

std::string render_report(const ExecSpace& space, const std::string& directory,
                          const std::string& data, std::ostream& log) {
  if (std::filesystem::exists(directory + "/sweep.json")) {
    log << "reading the sweep in " << directory << " and evaluating its best member\n";
    const SweepReport s = collect_sweep_report(space, directory, data);
    log << "the report holds " << s.members.size() << " members and " << s.axes.size()
        << " swept settings\n";
    return render_html(s);
  }
  log << "evaluating the best policy of " << directory << "\n";
  const RunReport run = collect_run_report(space, directory, data);
  log << "the report holds " << run.validation.policy.returns.size() << " validation bars and "
      << run.epochs.size() << " epochs\n";
  return render_html(run);
}

}  // namespace dqntrader::report

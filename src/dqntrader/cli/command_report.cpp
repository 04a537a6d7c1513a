#include <iostream>
#include <memory>

#include "dqntrader/cli/commands.hpp"
#include "dqntrader/report/report.hpp"
#include "dqntrader/request/requests.hpp"

namespace dqntrader::cli {

Command add_report(CLI::App& app) {
  auto flags = std::make_shared<RequestFlags>();
  Command command;
  command.app = flags->add(app, request::table("report"));
  command.run = [flags](const ExecSpace& space) {
    const request::ReportRequest r = request::report_request(flags->given());
    write_output(r.out, report::render_report(space, r.run, r.data, std::cerr));
    std::cerr << "dqntrader report: wrote " << r.out << "\n";
  };
  return command;
}

}  // namespace dqntrader::cli

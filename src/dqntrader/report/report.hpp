// The report of a directory, whichever it holds: a sweep's (sweep.json) or a training run's.
#pragma once

#include <ostream>
#include <string>

#include "dqntrader/core/types.hpp"

namespace dqntrader::report {

/// The HTML report of the sweep or the training run in directory (data: its bar file when it
/// has moved since, else empty), with a line to log before the work and one after it.
std::string render_report(const ExecSpace& space, const std::string& directory,
                          const std::string& data, std::ostream& log);

}  // namespace dqntrader::report

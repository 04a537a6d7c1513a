// Files read whole, with the errors a user can act on.
#pragma once

#include <string>

namespace dqntrader::io {

/// InputError "path: is a directory, not a file" (or "cannot open: reason") unless path can be
/// opened as a file to read.
void check_input_file(const std::string& path);

/// The whole content of the file at path; InputError naming it when it is a directory, cannot
/// be opened or cannot be read.
std::string read_file(const std::string& path);

}  // namespace dqntrader::io

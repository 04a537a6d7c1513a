// What the options' values may be, and where the commands' outputs go.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string>

#include "dqntrader/cli/commands.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/io/atomic_file.hpp"
#include "dqntrader/request/options.hpp"

namespace dqntrader::cli {

CLI::Validator whole_number(std::uint64_t least) {
  return CLI::Validator([least](std::string& text) { return request::whole_problem(text, least); },
                        least == 0 ? "UINT" : "UINT>=" + std::to_string(least));
}

void write_output(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text;
    return;
  }
  io::write_file_atomically(path, text);
}

void refuse_output_over_input(const std::string& option, const std::string& output,
                              const std::vector<NamedInput>& inputs) {
  for (const NamedInput& input : inputs) {
    if (input.path.empty() || input.path == "-")
      continue;
    const bool same = output == "-" ? io::same_file(STDOUT_FILENO, input.path)
                                    : io::same_file(output, input.path);
    if (same) {
      throw InputError(option + " " + (output == "-" ? "(standard output)" : output) +
                       " is the file " + input.option + " " + input.path +
                       " reads: writing it would destroy it; write elsewhere");
    }
  }
}

}  // namespace dqntrader::cli

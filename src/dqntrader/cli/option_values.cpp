// What the options' values may be, and where the commands' outputs go.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string>

#include "dqntrader/cli/commands.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/io/atomic_file.hpp"

namespace dqntrader::cli {

CLI::Validator whole_number(std::uint64_t least) {
  return CLI::Validator(
      [least](std::string& text) -> std::string {
        if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
          return "'" + text + "' is not a whole number from " + std::to_string(least);
        const std::string largest = "18446744073709551615";  // 2^64 - 1
        const std::size_t digits = text.find_first_not_of('0') == std::string::npos
                                       ? 1
                                       : text.size() - text.find_first_not_of('0');
        const std::string significant = text.substr(text.size() - digits);
        if (digits > largest.size() || (digits == largest.size() && significant > largest))
          return "'" + text + "' is larger than the largest whole number taken, " + largest;
        if (std::stoull(significant) < least)
          return "'" + text + "' is below " + std::to_string(least) + ", the least taken";
        return std::string();
      },
      least == 0 ? "UINT" : "UINT>=" + std::to_string(least));
}

void refuse_test_fraction_beside_test_data(const CLI::App& c, const train::TrainConfig& config) {
  if (c.get_option("--test-fraction")->count() > 0 && !config.test_data.empty()) {
    throw InputError("--test-fraction cuts the test window off the data, and --test-data " +
                     config.test_data + " is the test window: give one of them");
  }
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

void check_input(const std::string& option, const std::string& path) {
  if (path.empty())
    throw InputError(option + ": an empty path names no file");
  if (std::filesystem::is_directory(path))
    throw InputError(option + " " + path + " is a directory, not a file");
}

void check_output(const std::string& option, const std::string& path) {
  if (path == "-")
    return;
  try {
    io::resolve_output(path);
  } catch (const InputError& e) {
    throw InputError(option + " " + e.message() + " (give a file, or - for standard output)");
  }
}

}  // namespace dqntrader::cli

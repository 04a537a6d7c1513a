#include "dqntrader/request/requests.hpp"

#include <filesystem>

#include "dqntrader/core/error.hpp"
#include "dqntrader/io/atomic_file.hpp"
#include "dqntrader/request/tables.hpp"

namespace dqntrader::request {

const std::vector<Table>& tables() {
  static const std::vector<Table> all = [] {
    std::vector<Table> t = {train_table(), sweep_table(), backtest_table(), act_table()};
#if defined(DQNTRADER_WITH_ONNX)
    t.push_back(export_table());
#endif
    t.push_back(synth_table());
    t.push_back(report_table());
    return t;
  }();
  return all;
}

const Table& table(const std::string& command) {
  for (const Table& t : tables()) {
    if (t.command == command)
      return t;
  }
  throw Error("no request table for the command " + command);
}

void check_input(const std::string& option, const std::string& path) {
  if (path.empty())
    throw InputError(field(option) + ": an empty path names no file");
  if (std::filesystem::is_directory(path))
    throw InputError(field(option) + " " + path + " is a directory, not a file");
}

void check_directory(const std::string& option, const std::string& path) {
  if (path.empty())
    throw InputError(field(option) + ": an empty path names no directory");
  std::filesystem::path at = std::filesystem::absolute(path);
  std::error_code error;
  while (!std::filesystem::exists(at, error) && at.has_parent_path() && at != at.parent_path())
    at = at.parent_path();
  if (!std::filesystem::is_directory(at, error)) {
    throw InputError(field(option) + " " + path + ": " + at.string() +
                     " is a file, not a directory, so nothing can be made under it");
  }
}

void check_output(const std::string& option, const std::string& path) {
  if (path == "-")
    return;
  try {
    io::resolve_output(path);
  } catch (const InputError& e) {
    throw InputError(field(option) + " " + e.message() +
                     " (give a file, or - for standard output)");
  }
}

}  // namespace dqntrader::request

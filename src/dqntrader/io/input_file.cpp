#include "dqntrader/io/input_file.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "dqntrader/core/error.hpp"

namespace dqntrader::io {

void check_input_file(const std::string& path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0)
    throw InputError(path, 0, 0, std::string("cannot open: ") + std::strerror(errno));
  if (S_ISDIR(info.st_mode))
    throw InputError(path, 0, 0, "is a directory, not a file");
}

std::string read_file(const std::string& path) {
  check_input_file(path);
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw InputError(path, 0, 0, std::string("cannot open: ") + std::strerror(errno));
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad())
    throw InputError(path, 0, 0, "read error");
  return content;
}

}  // namespace dqntrader::io

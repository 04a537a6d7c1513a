// Exceptions the library throws. The command maps them to exit codes:
// InputError -> 2 (bad input or usage), every other exception -> 1 (runtime failure).
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace dqntrader {

/// A runtime failure: a vendor call, the file system, an internal check.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Bad input from the user: a setting, a command-line argument, a data file. When the
/// problem lies in a file the message starts with "file:line:column: ".
class InputError : public Error {
 public:
  using Error::Error;
  /// "path:line:column: what" (line and column count from 1; 0 leaves them out).
  InputError(const std::string& path, std::size_t line, std::size_t column,
             const std::string& what);
};

/// Work stopped because its caller asked (an interrupt between two steps): what it had written
/// before stays valid, and nothing after the last complete record was written.
class Interrupted : public Error {
 public:
  using Error::Error;
};

}  // namespace dqntrader

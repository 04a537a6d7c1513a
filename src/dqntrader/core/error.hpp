// Exceptions the library throws. The command maps them to exit codes:
// InputError -> 2 (bad input or usage), every other exception -> 1 (runtime failure).
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace dqntrader {

/// The front end a message is spelled for: the command names a request's field by its flag
/// (--test-fraction), the Python module by its keyword (test_fraction=).
enum class Spelling { command, python };

/// A request's field named in a message, as each front end spells it: name is the field as
/// settings and config files spell it ("test-fraction"); the message carries a marker until a
/// front end spells it (spelled()).
std::string field(const std::string& name);

/// message with every field() in it spelled for the front end.
std::string spelled(const std::string& message, Spelling spelling);

/// A runtime failure: a vendor call, the file system, an internal check. what() is the message
/// as the command spells it; message() is the message with its fields still to be spelled.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message)
      : std::runtime_error(spelled(message, Spelling::command)), m_message(message) {}
  const std::string& message() const { return m_message; }

 private:
  std::string m_message;
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

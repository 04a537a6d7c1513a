// A command's options as one table, from which both front ends are made: the command's flags
// (--name) and the Python module's keyword arguments (name, with _ for -), with their help and
// defaults. What a caller gave (Given) is checked against the table here, in the library, so
// that both front ends refuse the same values with the same message, naming the field as each
// spells it (core/error.hpp: field()).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace dqntrader::request {

/// What an option's value is.
enum class Kind {
  text,    // any text (a path, a time, a name)
  list,    // comma-separated items (the module joins a sequence with ',')
  whole,   // a whole number from least to most
  number,  // a finite number
  flag,    // true or false (the command's flag alone is true)
  choice,  // one of choices
};

/// One option of a command.
struct Option {
  std::string name;  // as settings and config files spell it: "test-fraction"
  std::string help;
  Kind kind = Kind::text;
  std::string default_text;  // as help shows it ("" for none)
  std::uint64_t least = 0, most = std::numeric_limits<std::uint64_t>::max();  // Kind::whole
  std::vector<std::string> choices;                                           // Kind::choice
  bool repeatable = false;  // may be given more than once, each time one value
  bool required = false;
  bool positional = false;  // the command takes it without a flag (report's run directory)
  bool setting = false;     // a training setting: its own reader checks it (train::settings())
  // A value the command refuses, for the test that both front ends refuse it alike: "{dir}"
  // stands for a directory, "{file}" for a regular file that holds no bars.
  std::string refused;
};

/// Two options that cannot be given together, and why (the message names both).
struct Exclusion {
  std::string option, other;  // other "*": any other option
  std::string why;
};

/// A command's options.
struct Table {
  std::string command, summary;
  std::vector<Option> options;
  std::vector<Exclusion> exclusions;

  /// The option called name, or nullptr.
  const Option* find(const std::string& name) const;
};

/// What a caller gave: each option's values, by name, in the order first given.
class Given {
 public:
  /// Adds one value of name (a repeatable option's next, or the one value).
  void add(const std::string& name, std::string value);
  bool has(const std::string& name) const;
  /// The values of name (empty when not given).
  const std::vector<std::string>& values(const std::string& name) const;
  /// The value of name, or fallback when it was not given.
  const std::string& text(const std::string& name, const std::string& fallback = {}) const;
  /// The names given, in order.
  std::vector<std::string> names() const;

 private:
  std::vector<std::pair<std::string, std::vector<std::string>>> m_values;
};

/// Checks what was given against the table: every name known, a single value for an option
/// that is not repeatable, every required option given, no two excluded options together, and
/// every value of its kind (a setting's value is checked where the setting is read). InputError
/// naming the option (field()) otherwise.
void check(const Table& table, const Given& given);

/// Why text is not a whole number from least to most (it quotes the text), or "" when it is.
std::string whole_problem(const std::string& text, std::uint64_t least,
                          std::uint64_t most = std::numeric_limits<std::uint64_t>::max());

/// The value of a whole, number or flag option whose text check() has accepted.
std::uint64_t whole(const std::string& text);
double number(const std::string& text);
bool flag(const std::string& text);

/// The help line of an option as both front ends show it: its help and, for a repeatable
/// option, that it repeats.
std::string help_line(const Option& option);

/// The table as Markdown, one row per option: name, default, meaning (README.md embeds each
/// command's; a test keeps them equal).
std::string markdown(const Table& table);

}  // namespace dqntrader::request

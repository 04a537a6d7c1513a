#include "dqntrader/request/options.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "dqntrader/core/error.hpp"

namespace dqntrader::request {

const Option* Table::find(const std::string& name) const {
  for (const Option& o : options) {
    if (o.name == name)
      return &o;
  }
  return nullptr;
}

void Given::add(const std::string& name, std::string value) {
  for (auto& [n, values] : m_values) {
    if (n == name) {
      values.push_back(std::move(value));
      return;
    }
  }
  m_values.push_back({name, {std::move(value)}});
}

bool Given::has(const std::string& name) const {
  return !values(name).empty();
}

const std::vector<std::string>& Given::values(const std::string& name) const {
  static const std::vector<std::string> none;
  for (const auto& [n, values] : m_values) {
    if (n == name)
      return values;
  }
  return none;
}

const std::string& Given::text(const std::string& name, const std::string& fallback) const {
  const std::vector<std::string>& v = values(name);
  return v.empty() ? fallback : v.front();
}

std::vector<std::string> Given::names() const {
  std::vector<std::string> out;
  for (const auto& entry : m_values)
    out.push_back(entry.first);
  return out;
}

namespace {

constexpr char kLargest[] = "18446744073709551615";  // 2^64 - 1

}  // namespace

std::string whole_problem(const std::string& text, std::uint64_t least, std::uint64_t most) {
  const std::string range = most == std::numeric_limits<std::uint64_t>::max()
                                ? "from " + std::to_string(least)
                                : "from " + std::to_string(least) + " to " + std::to_string(most);
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    return "'" + text + "' is not a whole number " + range;
  const std::size_t first = text.find_first_not_of('0');
  const std::string significant = first == std::string::npos ? "0" : text.substr(first);
  const std::string largest = kLargest;
  if (significant.size() > largest.size() ||
      (significant.size() == largest.size() && significant > largest))
    return "'" + text + "' is larger than the largest whole number taken, " + largest;
  const std::uint64_t v = std::stoull(significant);
  if (v < least)
    return "'" + text + "' is below " + std::to_string(least) + ", the least taken";
  if (v > most)
    return "'" + text + "' is above " + std::to_string(most) + ", the most taken";
  return {};
}

namespace {

// Why text is not a finite number ("" when it is).
std::string number_problem(const std::string& text) {
  if (text.empty())
    return "an empty text is not a number";
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || std::isspace(static_cast<unsigned char>(text[0])))
    return "'" + text + "' is not a number";
  if (!std::isfinite(v) || errno == ERANGE)
    return "'" + text + "' is not a finite number of double range";
  return {};
}

std::string one_of(const std::vector<std::string>& choices) {
  std::string out;
  for (std::size_t i = 0; i < choices.size(); ++i)
    out += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  return out;
}

}  // namespace

std::uint64_t whole(const std::string& text) {
  return std::stoull(text);
}

double number(const std::string& text) {
  return std::strtod(text.c_str(), nullptr);
}

bool flag(const std::string& text) {
  return text == "true" || text == "1";
}

void check(const Table& table, const Given& given) {
  for (const std::string& name : given.names()) {
    const Option* o = table.find(name);
    if (o == nullptr)
      throw InputError(table.command + " has no option " + field(name));
    const std::vector<std::string>& values = given.values(name);
    if (values.size() > 1 && !o->repeatable)
      throw InputError(field(name) + " is given " + std::to_string(values.size()) +
                       " times; it takes one value");
    if (o->setting)
      continue;  // read by the setting's own reader
    for (const std::string& v : values) {
      std::string problem;
      switch (o->kind) {
        case Kind::whole:
          problem = whole_problem(v, o->least, o->most);
          break;
        case Kind::number:
          problem = number_problem(v);
          break;
        case Kind::flag:
          if (v != "true" && v != "false" && v != "1" && v != "0")
            problem = "'" + v + "' is neither true nor false";
          break;
        case Kind::choice:
          if (std::find(o->choices.begin(), o->choices.end(), v) == o->choices.end())
            problem = "'" + v + "' is not one of " + one_of(o->choices);
          break;
        case Kind::text:
        case Kind::list:
          break;
      }
      if (!problem.empty())
        throw InputError(field(name) + " " + problem);
    }
  }
  for (const Option& o : table.options) {
    if (o.required && !given.has(o.name))
      throw InputError(table.command + " needs " + field(o.name));
  }
  for (const Exclusion& e : table.exclusions) {
    if (!given.has(e.option))
      continue;
    for (const std::string& name : given.names()) {
      if (name != e.option && (e.other == "*" || e.other == name))
        throw InputError(field(e.option) + " " + e.why + ": drop " + field(name));
    }
  }
}

std::string help_line(const Option& option) {
  std::string line = option.help;
  if (option.repeatable)
    line += "; repeatable";
  return line;
}

std::string markdown(const Table& table) {
  std::string out = "| option | default | meaning |\n|---|---|---|\n";
  for (const Option& o : table.options) {
    if (o.setting)
      continue;
    std::string help = help_line(o);
    for (std::size_t at = help.find('|'); at != std::string::npos; at = help.find('|', at + 2))
      help.replace(at, 1, "\\|");
    out += "| `" + (o.positional ? o.name : "--" + o.name) + "` | " +
           (o.required               ? std::string("(required)")
            : o.default_text.empty() ? std::string("(none)")
                                     : "`" + o.default_text + "`") +
           " | " + help + " |\n";
  }
  return out;
}

}  // namespace dqntrader::request

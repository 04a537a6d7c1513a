// A request's table (request/options.hpp) as a subcommand's flags.
#include "dqntrader/cli/commands.hpp"
#include "dqntrader/core/error.hpp"

namespace dqntrader::cli {

CLI::App* RequestFlags::add(CLI::App& app, const request::Table& table) {
  CLI::App* c = app.add_subcommand(table.command, spelled(table.summary, Spelling::command));
  m_bound.clear();
  for (const request::Option& o : table.options) {
    std::string help = spelled(request::help_line(o), Spelling::command);
    if (o.required)
      help += " (required)";
    CLI::Option* option = nullptr;
    const std::string name = o.positional ? o.name : "--" + o.name;
    if (o.repeatable) {
      m_many.emplace_back();
      option = c->add_option(name, m_many.back(), help);
      m_bound.push_back({o.name, option, &m_many.back(), nullptr});
    } else {
      m_one.emplace_back();
      // A flag alone is true (--dueling), and takes a value as --dueling=false; given without
      // a value it is never read as its default.
      option = o.kind == request::Kind::flag ? c->add_flag(name + "{true}", m_one.back(), help)
                                             : c->add_option(name, m_one.back(), help);
      m_bound.push_back({o.name, option, nullptr, &m_one.back()});
    }
    if (!o.default_text.empty())
      option->default_str(o.default_text);
    if (o.kind != request::Kind::flag) {
      option->type_name(o.kind == request::Kind::whole    ? "UINT"
                        : o.kind == request::Kind::number ? "NUMBER"
                        : o.kind == request::Kind::list   ? "LIST"
                        : o.kind == request::Kind::choice ? "NAME"
                                                          : "TEXT");
    }
  }
  return c;
}

request::Given RequestFlags::given() const {
  request::Given given;
  for (const Bound& b : m_bound) {
    if (b.option->count() == 0)
      continue;
    if (b.many != nullptr) {
      for (const std::string& v : *b.many)
        given.add(b.name, v);
    } else {
      given.add(b.name, *b.one);
    }
  }
  return given;
}

}  // namespace dqntrader::cli

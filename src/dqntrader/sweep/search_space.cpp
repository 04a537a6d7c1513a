#include "dqntrader/sweep/search_space.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/random.hpp"
#include "dqntrader/io/json_values.hpp"

namespace dqntrader::sweep {

namespace {

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> items;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, separator))
    items.push_back(item);
  if (!text.empty() && text.back() == separator)
    items.push_back("");
  return items;
}

bool parse_double(const std::string& text, double& value) {
  const char* first = text.data();
  const char* last = first + text.size();
  const auto parsed = std::from_chars(first, last, value);
  return !text.empty() && parsed.ec == std::errc() && parsed.ptr == last;
}

train::Setting* find_setting(std::vector<train::Setting>& all, const std::string& name) {
  const train::SettingInfo* info = train::find_setting_info(name);
  return info == nullptr ? nullptr : &all[info->index];
}

// A value of a setting that is itself a list (hidden widths, column names) separates its items
// with '/', since ',' separates a --set's values: hidden=64/64,128/128.
void set_value(train::Setting& setting, std::string value) {
  if (setting.is_list)
    std::replace(value.begin(), value.end(), '/', ',');
  setting.set(value);
}

// Sets a drawn number: as it is, or, for a setting that takes whole numbers only, rounded.
void set_number(train::Setting& setting, double value) {
  try {
    setting.set(train::number_text(value));
  } catch (const InputError&) {
    setting.set(std::to_string(std::llround(value)));
  }
}

}  // namespace

Axis parse_axis(const std::string& text) {
  const std::string where = field("set") + " '" + text + "': ";
  const std::size_t equals = text.find('=');
  if (equals == std::string::npos || equals == 0)
    throw InputError(where + "expected NAME=V1,V2,... or NAME=LO:HI[:log]");
  Axis axis;
  axis.setting = text.substr(0, equals);
  if (axis.setting.rfind("--", 0) == 0)
    axis.setting = axis.setting.substr(2);
  const std::string value = text.substr(equals + 1);
  if (value.empty())
    throw InputError(where + "an empty list of values");
  if (value.find(':') != std::string::npos) {
    const std::vector<std::string> parts = split(value, ':');
    if ((parts.size() != 2 && parts.size() != 3) || (parts.size() == 3 && parts[2] != "log") ||
        !parse_double(parts[0], axis.low) || !parse_double(parts[1], axis.high)) {
      throw InputError(where + "a range is LO:HI or LO:HI:log with numbers LO and HI");
    }
    if (!(axis.low < axis.high))
      throw InputError(where + "the range's low end must lie below its high end");
    axis.range = true;
    axis.log = parts.size() == 3;
    if (axis.log && !(axis.low > 0.0))
      throw InputError(where + "a log range needs a positive low end");
    return axis;
  }
  for (const std::string& v : split(value, ',')) {
    if (v.empty())
      throw InputError(where + "an empty value in the list");
    if (v.front() == '/' || v.back() == '/' || v.find("//") != std::string::npos)
      throw InputError(where + "an empty item in the list value '" + v + "'");
    axis.values.push_back(v);
  }
  return axis;
}

std::vector<std::uint64_t> parse_seeds(const std::string& text) {
  const std::string where = field("seeds") + " '" + text + "': ";
  std::vector<std::uint64_t> seeds;
  auto number = [&](const std::string& item) {
    if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos)
      throw InputError(where + "expected seeds such as 1-8 or 1,3,5");
    try {
      return static_cast<std::uint64_t>(std::stoull(item));
    } catch (const std::out_of_range&) {
      throw InputError(where + item + " is larger than the largest seed, 2^64 - 1");
    }
  };
  for (const std::string& part : split(text, ',')) {
    const std::size_t dash = part.find('-');
    if (dash == std::string::npos) {
      seeds.push_back(number(part));
      continue;
    }
    const std::uint64_t first = number(part.substr(0, dash)), last = number(part.substr(dash + 1));
    if (last < first || last - first > 100000)
      throw InputError(where + "a range of seeds runs from its first to its last, upwards");
    for (std::uint64_t s = first; s <= last; ++s)
      seeds.push_back(s);
  }
  if (seeds.empty())
    throw InputError(where + "no seeds");
  std::vector<std::uint64_t> sorted = seeds;
  std::sort(sorted.begin(), sorted.end());
  const auto twice = std::adjacent_find(sorted.begin(), sorted.end());
  if (twice != sorted.end()) {
    throw InputError(where + "seed " + std::to_string(*twice) +
                     " is given twice (its members would be the same run)");
  }
  return seeds;
}

SearchSpace space_from_json(const nlohmann::json& j, const std::string& source) {
  auto bad = [&](const std::string& what) { return InputError(source, 0, 0, what); };
  if (!j.is_object())
    throw bad("expected a JSON object (seeds, random, random_seed, set, base)");
  SearchSpace space;
  std::vector<std::string> order;
  for (const auto& item : j.items()) {
    const std::string& key = item.key();
    const nlohmann::json& v = item.value();
    try {
      if (key == "order") {
        order = v.get<std::vector<std::string>>();
      } else if (key == "seeds") {
        if (v.is_string()) {
          space.seeds = parse_seeds(v.get<std::string>());
        } else if (v.is_array() && !v.empty()) {
          for (const auto& s : v)
            space.seeds.push_back(s.get<std::uint64_t>());
        } else {
          throw bad("\"seeds\" must be a non-empty list of seeds or a string such as \"1-8\"");
        }
      } else if (key == "random") {
        if (!v.is_number_unsigned() || v.get<std::uint64_t>() < 1 ||
            v.get<std::uint64_t>() > kMostDraws) {
          throw bad("\"random\": " + v.dump() +
                    ": the number of draws is a whole number from 1 to " +
                    std::to_string(kMostDraws));
        }
        space.random = v.get<std::size_t>();
      } else if (key == "random_seed") {
        if (!v.is_number_unsigned())
          throw bad("\"random_seed\": " + v.dump() + ": a seed is a whole number from 0");
        space.random_seed = v.get<std::uint64_t>();
      } else if (key == "base") {
        if (!v.is_object())
          throw bad("\"base\" must be an object of settings");
        space.base = v;
      } else if (key == "set") {
        if (!v.is_object())
          throw bad("\"set\" must be an object: setting -> list of values or range");
        for (const auto& axis : v.items()) {
          const nlohmann::json& values = axis.value();
          std::string text = axis.key() + "=";
          if (values.is_array()) {
            if (values.empty())
              throw bad("setting " + axis.key() + ": an empty list of values");
            for (std::size_t i = 0; i < values.size(); ++i) {
              const nlohmann::json& x = values[i];
              std::string item;
              if (x.is_array()) {  // a list setting's value, e.g. hidden widths
                for (const auto& part : x) {
                  if (!item.empty())
                    item += '/';
                  item += part.is_string() ? part.get<std::string>() : part.dump();
                }
              } else {
                item = x.is_string() ? x.get<std::string>() : x.dump();
              }
              if (i > 0)
                text += ',';
              text += item;
            }
          } else if (values.is_object() && values.contains("low") && values.contains("high")) {
            text += values["low"].dump() + ":" + values["high"].dump() +
                    (values.value("log", false) ? ":log" : "");
          } else {
            throw bad("setting " + axis.key() +
                      ": expected a list of values or {\"low\", \"high\", \"log\"}");
          }
          space.axes.push_back(parse_axis(text));
          space.axes.back().origin = source;
        }
      } else {
        throw bad("unknown key \"" + key +
                  "\" (expected seeds, random, random_seed, set, order, base)");
      }
    } catch (const nlohmann::json::exception& e) {
      throw bad("\"" + key + "\": " + e.what());
    } catch (const InputError& e) {
      if (e.message().rfind(source, 0) == 0)
        throw;
      throw bad(e.message());
    }
  }
  if (!order.empty()) {
    // The axes in the order given (the order of --set on the command line, as sweep.json
    // keeps it); without one, in the order of the names.
    std::vector<Axis> ordered;
    for (const std::string& name : order) {
      const auto found = std::find_if(space.axes.begin(), space.axes.end(),
                                      [&](const Axis& a) { return a.setting == name; });
      if (found == space.axes.end() || std::count(order.begin(), order.end(), name) != 1) {
        throw bad("\"order\" must name every setting of \"set\" once; " + name + " is not one");
      }
      ordered.push_back(*found);
    }
    if (ordered.size() != space.axes.size())
      throw bad("\"order\" must name every setting of \"set\" once");
    space.axes = ordered;
  }
  return space;
}

SearchSpace read_space(const std::string& path) {
  if (std::filesystem::is_directory(path))
    throw InputError(path, 0, 0, "is a directory, not a space file (JSON)");
  return space_from_json(io::read_json_file(path), path);
}

nlohmann::json to_json(const SearchSpace& space) {
  nlohmann::json set = nlohmann::json::object();
  for (const Axis& a : space.axes) {
    if (a.range) {
      set[a.setting] = {{"low", a.low}, {"high", a.high}, {"log", a.log}};
    } else {
      set[a.setting] = a.values;
    }
  }
  nlohmann::json order = nlohmann::json::array();
  for (const Axis& a : space.axes)
    order.push_back(a.setting);
  nlohmann::json j = {{"set", set}, {"order", order}, {"base", space.base}};
  if (!space.seeds.empty())  // none: every member has the base's seed
    j["seeds"] = space.seeds;
  if (space.random > 0) {
    j["random"] = space.random;
    j["random_seed"] = space.random_seed;
  }
  return j;
}

std::string draw(const Axis& a, HostRng& rng) {
  if (!a.range)
    return a.values[rng.below(a.values.size())];
  const double u = rng.uniform();
  const double v = a.log ? std::exp(std::log(a.low) + u * (std::log(a.high) - std::log(a.low)))
                         : a.low + u * (a.high - a.low);
  return train::number_text(v);
}

std::vector<Combination> combinations(const SearchSpace& space) {
  std::vector<Combination> out;
  if (space.random == 0) {
    out.push_back(Combination{});
    for (const Axis& a : space.axes) {
      if (a.range) {
        throw InputError(field("set") + " " + a.setting + ": a range needs " + field("random") +
                         " N (the grid takes lists of values)");
      }
      std::vector<Combination> next;
      for (const Combination& c : out) {
        for (const std::string& v : a.values) {
          Combination more = c;
          more.values.push_back({a.setting, v});
          next.push_back(more);
        }
      }
      out = next;
    }
    return out;
  }
  HostRng rng(space.random_seed ^ 0x53574545505350ull);
  for (std::size_t d = 0; d < space.random; ++d) {
    Combination c;
    for (const Axis& a : space.axes)
      c.values.push_back({a.setting, draw(a, rng)});
    out.push_back(c);
  }
  return out;
}

void check(const SearchSpace& space, const train::TrainConfig& base) {
  if (space.random > 0 && space.axes.empty()) {
    throw InputError(field("random") + " " + std::to_string(space.random) +
                     ": the draws are of the " + field("set") +
                     " settings, and none is given (every draw "
                     "would make the same members)");
  }
  std::vector<std::string> seen;
  for (const Axis& a : space.axes) {
    const std::string where =
        (a.origin.empty() ? field("set") + " " : a.origin + ": setting ") + a.setting + ": ";
    train::TrainConfig config = base;
    std::vector<train::Setting> all = train::settings(config);
    train::Setting* setting = find_setting(all, a.setting);
    if (setting == nullptr)
      throw InputError(where + "unknown setting '" + a.setting +
                       "' (dqntrader settings lists them)");
    if (std::find(seen.begin(), seen.end(), a.setting) != seen.end())
      throw InputError(where + "given twice");
    seen.push_back(a.setting);
    if (a.setting == "seed")
      throw InputError(where + "the seeds are given with " + field("seeds"));
    const train::Scope scope = train::setting_scope(a.setting);
    if (scope == train::Scope::sweep) {
      throw InputError(where +
                       "every member of a sweep shares this setting (the data, the "
                       "metrics' definitions or the run's mechanics); give it once, as " +
                       field(a.setting));
    }
    if (a.range && scope == train::Scope::population) {
      throw InputError(where +
                       "this setting fixes a population's shapes or loop, so it cannot "
                       "be given per member: give it a list of values (each forms "
                       "populations of its own), not a range");
    }
    if (a.range && !setting->is_number)
      throw InputError(where + "a range needs a numeric setting");
    const std::vector<std::string> values =
        a.range ? std::vector<std::string>{train::number_text(a.low), train::number_text(a.high)}
                : a.values;
    std::vector<std::pair<std::string, std::string>> taken;  // value as given, as the setting
    train::TrainConfig one = base;
    std::vector<train::Setting> own = train::settings(one);  // bound to one, for every value
    train::Setting* s = find_setting(own, a.setting);
    for (const std::string& v : values) {
      one = base;
      try {
        double number = 0.0;
        if (a.range && parse_double(v, number)) {
          set_number(*s, number);
        } else {
          set_value(*s, v);
        }
        train::validate(one);
      } catch (const InputError& e) {
        throw InputError(where + "value " + v + ": " + e.message());
      }
      const auto same = std::find_if(taken.begin(), taken.end(),
                                     [&](const auto& t) { return t.second == s->get(); });
      if (!a.range && same != taken.end()) {
        throw InputError(where + "values " + same->first + " and " + v + " are the same " +
                         a.setting + " (" + s->get() + "): their members would be the same runs");
      }
      taken.push_back({v, s->get()});
    }
  }
  if (space.random == 0) {
    for (const Axis& a : space.axes) {
      if (a.range)
        throw InputError(field("set") + " " + a.setting + ": a range needs " + field("random") +
                         " N");
    }
  }
}

train::TrainConfig apply(const train::TrainConfig& base, const Combination& combination,
                         std::uint64_t seed, std::vector<std::string>* applied) {
  train::TrainConfig config = base;
  std::vector<train::Setting> all = train::settings(config);
  for (const auto& [name, value] : combination.values) {
    train::Setting* setting = find_setting(all, name);
    if (setting == nullptr)
      throw InputError("unknown setting '" + name + "'");
    double number = 0.0;
    if (setting->is_number && !setting->is_list && parse_double(value, number)) {
      set_number(*setting, number);
    } else {
      set_value(*setting, value);
    }
    if (applied != nullptr)
      applied->push_back(setting->get());
  }
  config.seed = seed;
  return config;
}

}  // namespace dqntrader::sweep

#include "dqntrader/sweep/schedule.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/random.hpp"

namespace dqntrader::sweep {

void check(const ScheduleSettings& s) {
  if (s.kind != "none" && s.kind != "pbt" && s.kind != "halving")
    throw InputError(field("schedule") + " " + s.kind + ": expected none, pbt or halving");
  if (s.interval < 1)
    throw InputError(field("pbt-interval") + " 0: a decision every E epochs, E at least 1");
  if (!(s.fraction > 0.0 && s.fraction <= 0.5))
    throw InputError(field("pbt-fraction") + " " + train::number_text(s.fraction) +
                     ": the bottom and top quantile, above 0 and at most 0.5");
  if (!(s.perturb_down > 0.0 && s.perturb_down < 1.0 && s.perturb_up > 1.0 &&
        std::isfinite(s.perturb_up)))
    throw InputError(field("pbt-perturb") +
                     ": two factors, the first in (0, 1) and the second above 1");
  if (!(s.resample >= 0.0 && s.resample <= 1.0))
    throw InputError(field("pbt-resample") + " " + train::number_text(s.resample) +
                     ": a probability, from 0 to 1");
  if (!(s.halving_rate > 1.0 && std::isfinite(s.halving_rate)))
    throw InputError(field("halving-rate") + " " + train::number_text(s.halving_rate) +
                     ": above 1 (2 keeps half of the running members at each rung)");
  if (s.halving_interval < 1)
    throw InputError(field("halving-interval") + " 0: a rung every E epochs, E at least 1");
}

void check_decides(const ScheduleSettings& s, std::size_t epochs) {
  if (s.kind == "none")
    return;
  const bool pbt = s.kind == "pbt";
  const std::size_t interval = pbt ? s.interval : s.halving_interval;
  const std::size_t earliest = pbt ? std::max<std::size_t>(s.burn_in, 1) : 1;
  // The first epoch that is a multiple of the interval at or after the earliest.
  const std::size_t rest = earliest % interval, step = rest == 0 ? 0 : interval - rest;
  if (earliest <= std::numeric_limits<std::size_t>::max() - step && earliest + step < epochs)
    return;
  throw InputError(
      field("schedule") + " " + s.kind + ": " +
      (pbt ? field("pbt-interval") + " " + std::to_string(s.interval) + " and " +
                 field("pbt-burn-in") + " " + std::to_string(s.burn_in)
           : field("halving-interval") + " " + std::to_string(s.halving_interval)) +
      " in runs of " + std::to_string(epochs) + (epochs == 1 ? " epoch" : " epochs") +
      " never decide (a decision comes after an epoch before the last); give a shorter "
      "interval or more epochs");
}

std::pair<double, double> parse_perturb(const std::string& text) {
  const std::size_t comma = text.find(',');
  double low = 0, high = 0;
  std::size_t used_low = 0, used_high = 0;
  try {
    if (comma == std::string::npos)
      throw std::invalid_argument("no comma");
    const std::string a = text.substr(0, comma), b = text.substr(comma + 1);
    low = std::stod(a, &used_low);
    high = std::stod(b, &used_high);
    if (used_low != a.size() || used_high != b.size())
      throw std::invalid_argument("trailing text");
  } catch (const std::exception&) {
    throw InputError(field("pbt-perturb") + " '" + text + "': expected two factors, e.g. 0.8,1.2");
  }
  return {low, high};
}

nlohmann::json to_json(const ScheduleSettings& s) {
  nlohmann::json j = {{"kind", s.kind}};
  if (s.kind == "pbt") {
    j["interval"] = s.interval;
    j["fraction"] = s.fraction;
    j["perturb"] = {s.perturb_down, s.perturb_up};
    j["resample"] = s.resample;
    j["burn_in"] = s.burn_in;
    j["seed"] = s.seed;
  } else if (s.kind == "halving") {
    j["rate"] = s.halving_rate;
    j["interval"] = s.halving_interval;
  }
  return j;
}

ScheduleSettings schedule_from_json(const nlohmann::json& j, const std::string& source) {
  ScheduleSettings s;
  if (j.is_null())
    return s;
  try {
    s.kind = j.at("kind").get<std::string>();
    if (s.kind == "pbt") {
      s.interval = j.at("interval").get<std::size_t>();
      s.fraction = j.at("fraction").get<double>();
      s.perturb_down = j.at("perturb").at(0).get<double>();
      s.perturb_up = j.at("perturb").at(1).get<double>();
      s.resample = j.at("resample").get<double>();
      s.burn_in = j.at("burn_in").get<std::size_t>();
      s.seed = j.at("seed").get<std::uint64_t>();
    } else if (s.kind == "halving") {
      s.halving_rate = j.at("rate").get<double>();
      s.halving_interval = j.at("interval").get<std::size_t>();
    }
    check(s);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(source, 0, 0, std::string("bad \"schedule\": ") + e.what());
  } catch (const InputError& e) {
    throw InputError(source, 0, 0, std::string("bad \"schedule\": ") + e.message());
  }
  return s;
}

std::vector<const Axis*> scheduled_axes(const SearchSpace& space) {
  std::vector<const Axis*> out;
  for (const Axis& a : space.axes) {
    if (train::own_setting(train::setting_scope(a.setting)))
      out.push_back(&a);
  }
  return out;
}

std::vector<std::size_t> ranking(const std::vector<double>& scores,
                                 const std::vector<bool>& running) {
  std::vector<std::size_t> order;
  for (std::size_t m = 0; m < scores.size(); ++m) {
    if (running[m])
      order.push_back(m);
  }
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const double x = scores[a], y = scores[b];
    if (std::isnan(x) || std::isnan(y))
      return !std::isnan(x) && std::isnan(y);
    return x > y;
  });
  return order;
}

namespace {

// The values of the axes' settings in config, by name.
std::map<std::string, std::string> values_of(train::TrainConfig config,
                                             const std::vector<const Axis*>& axes) {
  std::map<std::string, std::string> out;
  for (const train::Setting& s : train::settings(config)) {
    for (const Axis* axis : axes) {
      if (axis->setting == s.name)
        out[s.name] = s.get();
    }
  }
  return out;
}

bool same_value(const std::string& a, const std::string& b) {
  if (a == b)
    return true;
  try {
    return std::stod(a) == std::stod(b);
  } catch (const std::exception&) {
    return false;
  }
}

// A perturbation of an axis's value: a range's number times the factor within the range, a
// list's neighbour (down or up), or the value itself when a list does not hold it.
std::string perturbed(const Axis& axis, const std::string& value, bool up, double factor) {
  if (axis.range) {
    const double v = std::clamp(std::stod(value) * factor, axis.low, axis.high);
    return train::number_text(v);
  }
  for (std::size_t i = 0; i < axis.values.size(); ++i) {
    if (!same_value(axis.values[i], value))
      continue;
    const std::size_t next = up ? std::min(i + 1, axis.values.size() - 1) : (i > 0 ? i - 1 : 0);
    return axis.values[next];
  }
  return value;
}

}  // namespace

Decision decide(const ScheduleSettings& s, const SearchSpace& space, std::size_t population,
                std::size_t epoch, std::size_t epochs, const std::vector<double>& scores,
                const std::vector<bool>& running, const std::vector<train::TrainConfig>& now,
                const std::function<void(std::size_t, const train::TrainConfig&)>& take) {
  Decision d;
  if (epoch >= epochs)
    return d;
  const std::vector<std::size_t> order = ranking(scores, running);
  const std::size_t n = order.size();
  if (s.kind == "halving") {
    if (epoch % s.halving_interval != 0 || n < 2)
      return d;
    const auto keep = static_cast<std::size_t>(std::ceil(static_cast<double>(n) / s.halving_rate));
    d.stops.assign(order.begin() + static_cast<std::ptrdiff_t>(std::max<std::size_t>(keep, 1)),
                   order.end());
    std::sort(d.stops.begin(), d.stops.end());
    return d;
  }
  if (s.kind != "pbt" || epoch < s.burn_in || epoch % s.interval != 0 || n < 2)
    return d;
  std::size_t q = std::max<std::size_t>(
      1, static_cast<std::size_t>(std::floor(s.fraction * static_cast<double>(n))));
  q = std::min(q, n / 2);
  const std::vector<std::size_t> top(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(q));
  std::vector<std::size_t> bottom(order.end() - static_cast<std::ptrdiff_t>(q), order.end());
  std::sort(bottom.begin(), bottom.end());
  HostRng rng(counter_random(s.seed, population, epoch));
  const std::vector<const Axis*> axes = scheduled_axes(space);
  std::map<std::size_t, std::map<std::string, std::string>> sources;  // values_of, by member
  for (const std::size_t to : bottom) {
    const std::size_t from = top[rng.below(q)];
    // Its own seed, directory, patience and fault budget, the top member's settings of
    // learning; then every axis's new value, drawn in the axes' order.
    train::TrainConfig config = train::with_learning_settings(now[to], now[from]);
    if (sources.count(from) == 0)
      sources[from] = values_of(now[from], axes);
    std::map<std::string, std::string> values = sources[from];
    Combination change;
    for (const Axis* axis : axes) {
      std::string value;
      if (rng.uniform() < s.resample) {
        value = draw(*axis, rng);
      } else {
        const bool up = rng.uniform() >= 0.5;
        value = perturbed(*axis, values.at(axis->setting), up, up ? s.perturb_up : s.perturb_down);
      }
      change.values.push_back({axis->setting, value});
    }
    try {
      std::vector<std::string> applied;
      const train::TrainConfig candidate = apply(config, change, config.seed, &applied);
      take(to, candidate);
      config = candidate;
      for (std::size_t i = 0; i < axes.size(); ++i)
        values[axes[i]->setting] = applied[i];
    } catch (const InputError&) {
      // One at a time, in the axes' order: a value the member cannot train with is not made.
      take(to, config);
      for (const auto& one : change.values) {
        try {
          std::vector<std::string> applied;
          const train::TrainConfig candidate =
              apply(config, Combination{{one}}, config.seed, &applied);
          take(to, candidate);
          config = candidate;
          values[one.first] = applied.front();
        } catch (const InputError&) {
        }
      }
    }
    d.copies.push_back({to, from});
    d.values.push_back(nlohmann::json(values));
  }
  return d;
}

}  // namespace dqntrader::sweep

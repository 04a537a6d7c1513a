// A sweep's search space: the settings it varies, each a list of values or a range, the seeds
// every combination of values is trained with, and how the combinations are chosen (the grid
// of every list's values, or N seeded random draws).
//
//   --set NAME=V1,V2,...     a list: the grid takes every value; a random draw one of them (a
//                            value of a list setting separates its items with '/':
//                            hidden=64/64,128/128)
//   --set NAME=LO:HI[:log]   a range: a random draw takes a value uniformly (log-uniformly)
//                            in [LO, HI]; integer settings are rounded
//   --seeds 1-8 | 1,3,5      the seeds of each combination (default: the base's --seed)
//   --random N               N draws instead of the grid (--random-seed S seeds them)
//
// The same space as a JSON file (--space FILE.json):
//   {"seeds": [1, 2] or "1-8", "random": 20, "random_seed": 1,
//    "set": {"learning-rate": [0.0001, 0.001], "gamma": {"low": 0.9, "high": 0.99, "log": false}},
//    "base": {"epochs": 4}, "order": ["gamma", "learning-rate"]}
// where "base" holds shared settings as a --config file does (flags given override them) and
// the optional "order" the order of the settings in the leaderboards (by default, by name; the
// order of --set on the command line, which sweep.json keeps).
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "dqntrader/core/random.hpp"
#include "dqntrader/train/train_config.hpp"

namespace dqntrader::sweep {

/// One varied setting.
struct Axis {
  std::string setting;              // a training setting's name (without --)
  std::vector<std::string> values;  // a list (empty for a range)
  bool range = false;
  double low = 0, high = 0;
  bool log = false;
  std::string origin;  // where it was given: a space file, or empty for --set
};

/// The most random draws a space may ask for.
constexpr std::size_t kMostDraws = 100000;

struct SearchSpace {
  std::vector<Axis> axes;
  std::vector<std::uint64_t> seeds;  // empty: the base's seed
  std::size_t random = 0;            // 0: the grid; at most kMostDraws
  std::uint64_t random_seed = 1;
  nlohmann::json base = nlohmann::json::object();  // shared settings from a space file
};

/// "NAME=V1,V2,..." or "NAME=LO:HI[:log]"; InputError naming the argument when malformed
/// (no '=', an empty list or value, a range whose ends are no numbers or reversed).
Axis parse_axis(const std::string& text);

/// "1-8", "1,3,5" or a mix ("1-3,7"); InputError naming the argument when malformed or empty.
std::vector<std::uint64_t> parse_seeds(const std::string& text);

/// A space file; InputError naming the file and what is wrong.
SearchSpace read_space(const std::string& path);
/// The space as JSON, in the file's form (sweep.json records it).
nlohmann::json to_json(const SearchSpace& space);
SearchSpace space_from_json(const nlohmann::json& json, const std::string& source);

/// One point of the space: a value for every axis, in the axes' order.
struct Combination {
  std::vector<std::pair<std::string, std::string>> values;
};

/// One random value of an axis: one of a list's values (uniformly), or a number uniform
/// (log-uniform) in a range's [LO, HI] (one draw of rng each).
std::string draw(const Axis& axis, HostRng& rng);

/// The grid (every list's values, the first axis varying slowest) or the random draws.
/// InputError when the grid has a range axis.
std::vector<Combination> combinations(const SearchSpace& space);

/// Checks the space against the settings: every axis names a known setting that a sweep may
/// vary (not one every member shares, nor the seed, which --seeds gives), at most once; a
/// setting that fixes a population's shapes or loop takes a list of values (each forms its own
/// populations), not a range; a range's setting is a number. Every value must be one the
/// setting accepts. InputError naming the axis otherwise.
void check(const SearchSpace& space, const train::TrainConfig& base);

/// base with a combination's values and seed applied; `applied` (when given) receives each
/// value as the setting holds it after (a whole-number setting's rounded), in the
/// combination's order.
train::TrainConfig apply(const train::TrainConfig& base, const Combination& combination,
                         std::uint64_t seed, std::vector<std::string>* applied = nullptr);

}  // namespace dqntrader::sweep

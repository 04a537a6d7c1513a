#include "dqntrader/eval/policy_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/hash.hpp"
#include "dqntrader/io/atomic_file.hpp"
#include "dqntrader/io/framed_file.hpp"
#include "dqntrader/io/input_file.hpp"

namespace dqntrader::eval {

namespace {

constexpr char magic[8] = {'D', 'Q', 'N', 'P', 'O', 'L', 'C', 'Y'};
constexpr std::uint32_t version = 1;

nlohmann::json metadata(const PolicyFile& p) {
  nlohmann::json j;
  j["network"] = {{"features", p.network.features},
                  {"positions", p.network.positions},
                  {"hidden", p.network.hidden},
                  {"actions", p.network.actions},
                  {"dueling", p.network.dueling}};
  j["features"] = {{"return_window", p.features.return_window},
                   {"volatility_window", p.features.volatility_window},
                   {"ofi_window", p.features.ofi_window},
                   {"extra", p.features.extra},
                   {"mean", p.stats.mean},
                   {"stdev", p.stats.stdev}};
  j["positions"] = p.positions;
  j["info"] = p.info;
  return j;
}

}  // namespace

void write_policy(const std::string& path, const PolicyFile& policy) {
  io::write_file_atomically(path, policy_bytes(policy));
}

std::string policy_bytes(const PolicyFile& policy) {
  const std::string meta = metadata(policy).dump();
  std::string out(magic, 8);
  io::put(out, version);
  io::put(out, static_cast<std::uint64_t>(meta.size()));
  out += meta;
  io::put(out, static_cast<std::uint64_t>(policy.parameters.size()));
  out.append(reinterpret_cast<const char*>(policy.parameters.data()),
             policy.parameters.size() * sizeof(float));
  io::seal(out);
  return out;
}

namespace {

// The metadata's integers: a JSON integer (not 16.5, not true) in [least, most].
std::size_t integer(const nlohmann::json& object, const char* key, const std::string& name,
                    std::int64_t least, std::int64_t most) {
  const nlohmann::json& value = object.at(key);
  if (!value.is_number_integer())
    throw InputError(name + " is " + value.dump() + ", not a whole number");
  const bool negative = value.is_number_unsigned() ? false : value.get<std::int64_t>() < 0;
  if (negative || value.get<std::uint64_t>() < static_cast<std::uint64_t>(least) ||
      value.get<std::uint64_t>() > static_cast<std::uint64_t>(most)) {
    throw InputError(name + " is " + value.dump() + ", outside " + std::to_string(least) + " .. " +
                     std::to_string(most));
  }
  return static_cast<std::size_t>(value.get<std::uint64_t>());
}

std::vector<double> finite_numbers(const nlohmann::json& object, const char* key,
                                   const std::string& name) {
  const nlohmann::json& value = object.at(key);
  if (!value.is_array())
    throw InputError(name + " is not a list of numbers");
  std::vector<double> out;
  for (const nlohmann::json& v : value) {
    if (!v.is_number() || !std::isfinite(v.get<double>()))
      throw InputError(name + " holds " + v.dump() + ", not a finite number");
    out.push_back(v.get<double>());
  }
  return out;
}

// The parameter count of a network, or 0 when it does not fit 64 bits (no file holds that).
std::uint64_t parameter_count(const nn::NetworkSpec& n) {
  std::uint64_t total = 0;
  std::uint64_t in = n.features + n.positions;
  auto add = [&](std::uint64_t out) {
    std::uint64_t weights = 0, layer = 0;
    if (__builtin_mul_overflow(in, out, &weights) || __builtin_add_overflow(weights, out, &layer) ||
        __builtin_add_overflow(total, layer, &total)) {
      total = 0;
      return false;
    }
    in = out;
    return true;
  };
  for (std::size_t width : n.hidden) {
    if (!add(width))
      return 0;
  }
  return add(n.dueling ? n.actions + 1 : n.actions) ? total : 0;
}

}  // namespace

PolicyFile read_policy(const std::string& path) {
  auto fail = [&](const std::string& what) -> void {
    throw InputError(path, 0, 0, "damaged policy: " + what);
  };
  const std::string bytes = io::read_file(path);
  if (bytes.size() < 8 + 4 + 8 + 8 + 8 || std::memcmp(bytes.data(), magic, 8) != 0)
    throw InputError(path, 0, 0, "not a dqntrader policy file");
  // Every length is checked against the bytes left before it is used.
  io::FrameReader frame(bytes, fail);
  if (!frame.sealed())
    fail("checksum mismatch");
  const std::string truncated = "truncated (a length runs past the end of the file)";
  const auto got_version = frame.get<std::uint32_t>(truncated);
  if (got_version != version)
    fail("format version " + std::to_string(got_version) +
         " is not supported (this reader knows 1)");
  const auto meta_size = frame.get<std::uint64_t>(truncated);
  if (meta_size > frame.left())
    fail("truncated (the metadata's length runs past the end of the file)");
  std::string meta(static_cast<std::size_t>(meta_size), '\0');
  frame.take(meta.data(), meta_size, truncated);
  const auto count = frame.get<std::uint64_t>(truncated);
  if (count != frame.left() / sizeof(float) || frame.left() % sizeof(float) != 0)
    fail("the parameter count " + std::to_string(count) + " does not match the " +
         std::to_string(frame.left()) + " bytes that follow it");
  PolicyFile policy;
  policy.parameters.resize(static_cast<std::size_t>(count));
  frame.take(policy.parameters.data(), count * sizeof(float), truncated);
  const std::int64_t most = std::numeric_limits<std::int32_t>::max();
  try {
    const nlohmann::json j = nlohmann::json::parse(meta);
    const auto& n = j.at("network");
    policy.network.features = integer(n, "features", "network.features", 1, most);
    policy.network.positions = integer(n, "positions", "network.positions", 2, 8);
    const nlohmann::json& hidden = n.at("hidden");
    if (!hidden.is_array() || hidden.empty())
      throw InputError("network.hidden is not a non-empty list of widths");
    policy.network.hidden.clear();
    for (std::size_t l = 0; l < hidden.size(); ++l) {
      const nlohmann::json layer = {{"width", hidden[l]}};
      policy.network.hidden.push_back(
          integer(layer, "width", "network.hidden[" + std::to_string(l) + "]", 1, most));
    }
    policy.network.actions = integer(n, "actions", "network.actions", 2, 8);
    if (!n.at("dueling").is_boolean())
      throw InputError("network.dueling is not true or false");
    policy.network.dueling = n.at("dueling").get<bool>();
    const auto& f = j.at("features");
    policy.features.return_window =
        static_cast<int>(integer(f, "return_window", "features.return_window", 1, most));
    policy.features.volatility_window =
        static_cast<int>(integer(f, "volatility_window", "features.volatility_window", 2, most));
    policy.features.ofi_window =
        static_cast<int>(integer(f, "ofi_window", "features.ofi_window", 0, most));
    policy.features.extra = f.at("extra").get<std::vector<std::string>>();
    policy.stats.mean = finite_numbers(f, "mean", "features.mean");
    policy.stats.stdev = finite_numbers(f, "stdev", "features.stdev");
    policy.positions = finite_numbers(j, "positions", "positions");
    policy.info = j.value("info", nlohmann::json::object());
  } catch (const nlohmann::json::exception& e) {
    fail(std::string("bad metadata: ") + e.what());
  } catch (const InputError& e) {
    fail(e.message());
  }
  if (policy.network.features != policy.features.count() ||
      policy.stats.mean.size() != policy.features.count() ||
      policy.stats.stdev.size() != policy.features.count() ||
      policy.positions.size() != policy.network.positions) {
    fail("network, features and positions disagree");
  }
  if (parameter_count(policy.network) != count)
    fail("the parameter count " + std::to_string(count) + " does not match the network");
  // What docs/POLICY.md promises a reader: every action a distinct target position, flat among
  // them; every standard deviation a positive number; every parameter a finite number.
  if (policy.network.actions != policy.network.positions)
    fail("the actions are not the positions");
  for (std::size_t i = 0; i < policy.positions.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (policy.positions[i] == policy.positions[j])
        fail("position " + std::to_string(i) + " repeats another");
    }
  }
  if (std::find(policy.positions.begin(), policy.positions.end(), 0.0) == policy.positions.end())
    fail("no position is flat (0)");
  for (double s : policy.stats.stdev) {
    if (!(s > 0.0))
      fail("a feature's standard deviation is not a positive number");
  }
  for (std::size_t i = 0; i < policy.parameters.size(); ++i) {
    if (!std::isfinite(policy.parameters[i]))
      fail("parameter " + std::to_string(i) + " is not a finite number");
  }
  return policy;
}

bool same_evaluator(const PolicyFile& a, const PolicyFile& b) {
  return a.network == b.network && a.features == b.features && a.stats.mean == b.stats.mean &&
         a.stats.stdev == b.stats.stdev && a.positions == b.positions;
}

std::vector<std::vector<std::size_t>> evaluator_groups(
    const std::vector<const PolicyFile*>& policies) {
  std::vector<std::vector<std::size_t>> groups;
  std::vector<bool> done(policies.size(), false);
  for (std::size_t k = 0; k < policies.size(); ++k) {
    if (done[k])
      continue;
    groups.emplace_back();
    for (std::size_t j = k; j < policies.size(); ++j) {
      if (!done[j] && same_evaluator(*policies[k], *policies[j])) {
        groups.back().push_back(j);
        done[j] = true;
      }
    }
  }
  return groups;
}

}  // namespace dqntrader::eval

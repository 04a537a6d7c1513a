#include "dqntrader/eval/policy_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/hash.hpp"
#include "dqntrader/io/atomic_file.hpp"
#include "dqntrader/io/input_file.hpp"

namespace dqntrader::eval {

namespace {

constexpr char magic[8] = {'D', 'Q', 'N', 'P', 'O', 'L', 'C', 'Y'};
constexpr std::uint32_t version = 1;

template <class T>
void put(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

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
  const std::string meta = metadata(policy).dump();
  std::string out(magic, 8);
  put(out, version);
  put(out, static_cast<std::uint64_t>(meta.size()));
  out += meta;
  put(out, static_cast<std::uint64_t>(policy.parameters.size()));
  out.append(reinterpret_cast<const char*>(policy.parameters.data()),
             policy.parameters.size() * sizeof(float));
  put(out, hash64(out.data(), out.size()));
  io::write_file_atomically(path, out);
}

PolicyFile read_policy(const std::string& path) {
  auto fail = [&](const std::string& what) -> void { throw InputError(path, 0, 0, what); };
  const std::string bytes = io::read_file(path);
  if (bytes.size() < 8 + 4 + 8 + 8 + 8 || std::memcmp(bytes.data(), magic, 8) != 0) {
    fail("not a dqntrader policy file");
  }
  std::uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + bytes.size() - 8, 8);
  if (hash64(bytes.data(), bytes.size() - 8) != stored)
    fail("corrupted policy file: checksum mismatch");
  std::size_t at = 8;
  auto take = [&](void* into, std::size_t n) {
    if (at + n > bytes.size() - 8)
      fail("truncated policy file");
    std::memcpy(into, bytes.data() + at, n);
    at += n;
  };
  std::uint32_t got_version = 0;
  take(&got_version, 4);
  if (got_version != version)
    fail("policy file version " + std::to_string(got_version) + " is not supported");
  std::uint64_t meta_size = 0;
  take(&meta_size, 8);
  if (meta_size > bytes.size())
    fail("truncated policy file");
  std::string meta(meta_size, '\0');
  take(meta.data(), meta_size);
  std::uint64_t count = 0;
  take(&count, 8);
  if (count > bytes.size() / sizeof(float))
    fail("truncated policy file");
  PolicyFile policy;
  policy.parameters.resize(count);
  take(policy.parameters.data(), count * sizeof(float));
  if (at != bytes.size() - 8)
    fail("policy file has trailing bytes");
  try {
    const nlohmann::json j = nlohmann::json::parse(meta);
    const auto& n = j.at("network");
    policy.network.features = n.at("features").get<std::size_t>();
    policy.network.positions = n.at("positions").get<std::size_t>();
    policy.network.hidden = n.at("hidden").get<std::vector<std::size_t>>();
    policy.network.actions = n.at("actions").get<std::size_t>();
    policy.network.dueling = n.at("dueling").get<bool>();
    const auto& f = j.at("features");
    policy.features.return_window = f.at("return_window").get<int>();
    policy.features.volatility_window = f.at("volatility_window").get<int>();
    policy.features.ofi_window = f.at("ofi_window").get<int>();
    policy.features.extra = f.at("extra").get<std::vector<std::string>>();
    policy.stats.mean = f.at("mean").get<std::vector<double>>();
    policy.stats.stdev = f.at("stdev").get<std::vector<double>>();
    policy.positions = j.at("positions").get<std::vector<double>>();
    policy.info = j.value("info", nlohmann::json::object());
  } catch (const nlohmann::json::exception& e) {
    fail(std::string("bad policy metadata: ") + e.what());
  }
  nn::validate(policy.network);
  if (policy.network.features != policy.features.count() ||
      policy.stats.mean.size() != policy.features.count() ||
      policy.stats.stdev.size() != policy.features.count() ||
      policy.positions.size() != policy.network.positions) {
    fail("inconsistent policy file: network, features and positions disagree");
  }
  if (policy.parameters.size() != nn::ParameterLayout(policy.network).size()) {
    fail("inconsistent policy file: parameter count does not match the network");
  }
  // What docs/POLICY.md promises a reader: every action a distinct target position, flat among
  // them; every standard deviation a positive number.
  if (policy.network.actions != policy.network.positions)
    fail("inconsistent policy file: the actions are not the positions");
  for (std::size_t i = 0; i < policy.positions.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (policy.positions[i] == policy.positions[j])
        fail("inconsistent policy file: position " + std::to_string(i) + " repeats another");
    }
  }
  if (std::find(policy.positions.begin(), policy.positions.end(), 0.0) == policy.positions.end())
    fail("inconsistent policy file: no position is flat (0)");
  for (double s : policy.stats.stdev) {
    if (!(s > 0.0) || !std::isfinite(s))
      fail("inconsistent policy file: a feature's standard deviation is not a positive number");
  }
  return policy;
}

bool same_evaluator(const PolicyFile& a, const PolicyFile& b) {
  return a.network == b.network && a.features == b.features && a.stats.mean == b.stats.mean &&
         a.stats.stdev == b.stats.stdev && a.positions == b.positions;
}

}  // namespace dqntrader::eval

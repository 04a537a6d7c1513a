// A trained policy on disk (.dqnpolicy): everything a backtest needs to reproduce the
// decisions: the network and its parameters, the features and their training-window
// statistics, and the positions the actions stand for.
//
// Layout (docs/POLICY.md): "DQNPOLCY" (8 bytes), u32 version (1), u64 metadata length,
// metadata (JSON), u64 parameter count, the parameters (float32), u64 XXH64 (seed 0) of all
// before it.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "dqntrader/data/feature_spec.hpp"
#include "dqntrader/nn/network_spec.hpp"

namespace dqntrader::eval {

struct PolicyFile {
  nn::NetworkSpec network;
  data::FeatureSpec features;
  data::FeatureStats stats;
  std::vector<double> positions;
  std::vector<float> parameters;
  nlohmann::json info = nlohmann::json::object();  // free-form provenance (training run, epoch)
};

/// Whether one evaluator can evaluate both together: the same network, features, feature
/// statistics and positions.
bool same_evaluator(const PolicyFile& a, const PolicyFile& b);

/// The policies in groups that share an evaluator (same_evaluator), each group's indices in
/// order, the groups in the order of their first policy.
std::vector<std::vector<std::size_t>> evaluator_groups(
    const std::vector<const PolicyFile*>& policies);

/// Writes atomically; throws Error on failure.
void write_policy(const std::string& path, const PolicyFile& policy);
/// The file's bytes, as write_policy writes them.
std::string policy_bytes(const PolicyFile& policy);

/// Reads and verifies (checksum, sizes, consistency); InputError for a bad file.
PolicyFile read_policy(const std::string& path);

}  // namespace dqntrader::eval

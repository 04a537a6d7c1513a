// Policies of every shape a policy file holds, on bars with an ofi column and extra columns:
// plain and dueling heads, 1 to 4 hidden layers, with and without ofi and extra features, three
// and five positions. Their parameters are freshly drawn (He-uniform, as training starts), their
// feature statistics those of the bars' first half, so that Q-values are of a trained policy's
// size. Shared by the tests of `dqntrader act` and of the ONNX export.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "backends/execution.hpp"
#include "dqntrader/data/csv_reader.hpp"
#include "dqntrader/data/features.hpp"
#include "dqntrader/data/synthetic.hpp"
#include "dqntrader/eval/policy_file.hpp"
#include "dqntrader/nn/network_spec.hpp"

namespace dqntrader::testing {

/// The synthetic market (with ofi) and two extra columns, f_x (a random walk) and f_y (noise).
inline data::Bars fixture_bars(std::size_t count, std::uint64_t seed) {
  data::SynthConfig synth;
  synth.bars = count;
  synth.seed = seed;
  data::Bars bars = data::generate_bars(synth);
  std::mt19937_64 rng(seed ^ 0xF1C7);
  std::normal_distribution<double> normal(0.0, 1.0);
  data::NamedColumn x{"f_x", {}}, y{"f_y", {}};
  double walk = 0.0;
  for (std::size_t t = 0; t < count; ++t) {
    walk += 0.1 * normal(rng);
    x.values.push_back(walk);
    y.values.push_back(normal(rng));
  }
  bars.extra = {x, y};
  return bars;
}

struct FixturePolicy {
  std::string name;
  eval::PolicyFile file;
};

/// One policy: features resolved on bars (ofi when ofi_window > 0; the named extra columns),
/// statistics of the first half of bars, parameters drawn from seed.
inline FixturePolicy fixture_policy(const std::string& name, const data::Bars& bars,
                                    std::vector<std::size_t> hidden, bool dueling, int ofi_window,
                                    std::vector<std::string> extra, std::vector<double> positions,
                                    std::uint64_t seed) {
  FixturePolicy p;
  p.name = name;
  eval::PolicyFile& f = p.file;
  f.features.return_window = 12;
  f.features.volatility_window = 10;
  f.features.ofi_window = ofi_window;
  f.features.extra = extra;
  f.network.features = f.features.count();
  f.network.positions = f.network.actions = positions.size();
  f.network.hidden = hidden;
  f.network.dueling = dueling;
  f.positions = positions;
  exec::StreamSpace stream;
  const data::FeatureSet features(stream.space(), bars, f.features);
  f.stats = features.fit(f.features.warmup(), bars.size() / 2);
  f.parameters = nn::initial_parameters(nn::ParameterLayout(f.network), seed);
  f.info = {{"fixture", name}};
  return p;
}

/// The shapes of docs/POLICY.md, each drawn from seed.
inline std::vector<FixturePolicy> fixture_policies(const data::Bars& bars, std::uint64_t seed) {
  return {
      fixture_policy("plain-1-ofi", bars, {16}, false, 4, {}, {-1, 0, 1}, seed + 1),
      fixture_policy("dueling-2-extra", bars, {32, 24}, true, 0, {"f_x"}, {-1, 0, 1}, seed + 2),
      fixture_policy("dueling-3-ofi-extras", bars, {24, 24, 16}, true, 2, {"f_x", "f_y"},
                     {-1, 0, 1}, seed + 3),
      fixture_policy("plain-4-five-positions", bars, {16, 16, 16, 16}, false, 0, {},
                     {-1, -0.5, 0, 0.5, 1}, seed + 4),
  };
}

}  // namespace dqntrader::testing

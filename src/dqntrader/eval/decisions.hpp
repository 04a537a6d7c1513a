// A trained policy's decisions bar by bar, as a user acting on them needs them: at each bar the
// Q-values for the position it comes in with, the action and the position it takes. They are
// the backtest's decisions, on its device path (QPolicy: the network over every bar at once,
// the position path by a scan), with the Q-values along the path kept where the backtest keeps
// only the path. docs/POLICY.md defines them.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/precision.hpp"
#include "dqntrader/core/types.hpp"
#include "dqntrader/data/bars.hpp"
#include "dqntrader/data/features.hpp"
#include "dqntrader/nn/network_spec.hpp"

namespace dqntrader::eval {

struct Decision {
  std::size_t bar = 0;   // in the bars decided on
  double incoming = 0;   // the position held before it
  std::vector<float> q;  // one per action, for that incoming position
  std::size_t action = 0;
  double position = 0;  // positions[action]: held from this bar to the next
};

/// The index among positions of a position given as text: a number, or flat (0), long (1) or
/// short (-1). InputError naming the field position otherwise.
std::size_t position_index(const std::string& text, const std::vector<double>& positions);

/// The bars a request decides at, first .. last: from .. to (bar indices or ISO-8601
/// timestamps, named as the fields start and end in messages); without either, the last bar alone;
/// with to alone, from the first bar a decision can be taken at (warmup). InputError when the
/// bars are fewer than warmup + 1, first comes before warmup, or last before first.
struct DecisionWindow {
  std::size_t first = 0, last = 0;
};
DecisionWindow decision_window(const data::Bars& bars, std::size_t warmup, const std::string& from,
                               const std::string& to);

/// InputError for bars too few for a decision: a policy reading warmup bars before it.
InputError too_few_bars(const data::Bars& bars, std::size_t warmup);

class PolicyDecisions {
 public:
  /// A policy (a policy file's network, features, their statistics, positions and
  /// parameters), its parameters uploaded once; chunk_bars bounds the bars a network pass
  /// takes, as in a backtest.
  PolicyDecisions(const ExecSpace& space, const nn::NetworkSpec& network,
                  const data::FeatureSpec& features, const data::FeatureStats& stats,
                  const std::vector<double>& positions, const std::vector<float>& parameters,
                  Precision precision, std::size_t chunk_bars);

  PolicyDecisions(const PolicyDecisions&) = delete;
  PolicyDecisions& operator=(const PolicyDecisions&) = delete;
  ~PolicyDecisions();

  /// The decisions at bars first .. last of bars, the first coming in with positions[incoming]
  /// and each later one with the position before it. Reads bars first - warmup() .. last.
  /// InputError when bars lack a column the features need, or first comes before warmup().
  std::vector<Decision> decide(const data::Bars& bars, std::size_t first, std::size_t last,
                               std::size_t incoming) const;

  /// The decisions on every instrument of a panel, in its order: at each one's bars from .. to
  /// (decision_window), each instrument's first coming in with positions[incoming]. Of a panel
  /// of several, an instrument's InputError (too few bars, a missing column, a window outside
  /// its bars) is prefixed with its bars' source ("path[symbol]").
  std::vector<std::vector<Decision>> decide(const data::Panel& panel, const std::string& from,
                                            const std::string& to, std::size_t incoming) const;

  /// decide() at the last bar of bars alone, for a stream of bars: the buffers of one such
  /// decision are kept from one call to the next (the same products, nothing allocated after
  /// the first call). Reads the last warmup() + 1 bars.
  Decision decide_latest(const data::Bars& bars, std::size_t incoming);

  /// The first bar a decision can be taken at (the features' warm-up).
  std::size_t warmup() const { return m_features.warmup(); }
  const std::vector<double>& positions() const { return m_positions; }

 private:
  ExecSpace m_space;
  nn::NetworkSpec m_network;
  data::FeatureSpec m_features;
  data::FeatureStats m_stats;
  std::vector<double> m_positions;
  Kokkos::View<float*, DeviceMemory> m_parameters;
  Precision m_precision;
  std::size_t m_chunk_bars;
  struct Latest;  // the buffers of decide_latest(), made at its first call
  std::unique_ptr<Latest> m_latest;
};

}  // namespace dqntrader::eval

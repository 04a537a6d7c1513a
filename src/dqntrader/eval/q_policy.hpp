// The decisions of Q-networks over a window of bars, on the device.
//
// For every bar the network is evaluated for every possible incoming position: the
// position enters only the first layer, whose feature part X W is computed once per bar and
// then completed with each position's row of W; the deeper layers run once per (bar,
// incoming position). Each bar thereby defines a map from incoming to outgoing position
// (argmax over actions, ties to the lowest action), and an inclusive scan that composes
// these maps resolves the position path exactly as the sequential loop
// p_t = position(argmax Q(features_t, p_{t-1})) would.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "dqntrader/core/precision.hpp"
#include "dqntrader/core/types.hpp"
#include "dqntrader/data/features.hpp"
#include "dqntrader/eval/metrics_engine.hpp"
#include "dqntrader/nn/network_spec.hpp"

namespace dqntrader::eval {

/// Flat parameter vectors (nn::ParameterLayout), one row per policy; consecutive rows may lie
/// further apart than their length (a population's parameters, padded per member).
using ParameterRows = Kokkos::View<const float**, Kokkos::LayoutStride, DeviceMemory>;

/// count rows of size values, stride values apart (stride 0: packed), from data.
inline ParameterRows parameter_rows(const float* data, std::size_t count, std::size_t size,
                                    std::size_t stride = 0) {
  return ParameterRows(data, Kokkos::LayoutStride(count, stride > 0 ? stride : size, size, 1));
}

class QPolicy {
 public:
  /// features: the standardized feature matrix of all bars (data::FeatureSet), stored as
  /// float (precision fp32 or tf32) or bf16 (precision bf16). Buffers for max_policies
  /// networks over chunk_bars bars at a time and max_decisions decisions are allocated
  /// here, once. start_index: the index of the position every path comes in with (a
  /// backtest's window starts flat).
  QPolicy(const ExecSpace& space, const nn::NetworkSpec& spec, Precision precision,
          const data::FeatureSet& features, const data::FeatureStats& stats,
          std::size_t max_policies, std::size_t chunk_bars, std::size_t max_decisions,
          std::size_t start_index);
  ~QPolicy();
  QPolicy(const QPolicy&) = delete;
  QPolicy& operator=(const QPolicy&) = delete;

  /// Enqueues the decisions of the parameters.extent(0) networks at bars
  /// [begin, begin + n): the position index path of policy k ends up in path(k, n).
  /// Does not wait.
  void enqueue(const ExecSpace& space, const ParameterRows& parameters, std::size_t begin,
               std::size_t n);

  /// Converts one policy's parameters (parameters.extent(0) == 1) into the form the products
  /// read, once, for enqueue_taken.
  void prepare(const ExecSpace& space, const ParameterRows& parameters);

  /// enqueue() for the policy prepare() took, coming in with the position of index start,
  /// that also keeps in taken(i, a) the Q-values of decision i for the position it comes in
  /// with (the start, then the path's previous position): the same products, their Q-values
  /// kept where enqueue() keeps only the decisions. Does not wait.
  void enqueue_taken(const ExecSpace& space, std::size_t begin, std::size_t n, std::size_t start,
                     const Kokkos::View<float**, DeviceMemory>& taken);

  /// The features again, from features (as many bars as the ones given at construction,
  /// refreshed: data::FeatureSet::refresh), into the buffer they were standardized into.
  void restandardize(const data::FeatureSet& features, const data::FeatureStats& stats);

  /// The Q-values of policy k at bars [begin, begin + n), computed exactly as enqueue()
  /// computes them for the same parameter rows (the same batched products), copied to the
  /// host as q[(i * positions + incoming) * actions + action]. For inspection and tests;
  /// waits.
  std::vector<float> q_values(const ExecSpace& space, const ParameterRows& parameters,
                              std::size_t k, std::size_t begin, std::size_t n);

  /// The position path of policy k (the first n entries are valid after enqueue).
  Kokkos::View<const std::int8_t*, DeviceMemory> path(std::size_t k, std::size_t n) const;
  /// The paths of policies 0 .. count - 1 (of n decisions each, after enqueue).
  Paths paths(std::size_t count, std::size_t n) const;

  std::size_t max_policies() const;
  std::size_t max_decisions() const;

  class Engine;

 private:
  std::unique_ptr<Engine> m_engine;
};

}  // namespace dqntrader::eval

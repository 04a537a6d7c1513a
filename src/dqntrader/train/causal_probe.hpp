// The causal-intervention probe: on a fixed batch of training states, how much do the
// Q-values move when one feature group is switched off? Each group (returns, volatility,
// ofi, extra columns) is set to 0, its training mean after standardization, and the probe
// records mean over states and actions of |Q(state with the group off) - Q(state)|. The
// batch of all variants is built once; a probe is one forward pass and one reduction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dqntrader/core/types.hpp"
#include "dqntrader/data/features.hpp"

namespace dqntrader::train {

template <class T>
class CausalProbe {
 public:
  /// States at bars drawn from [begin, end) with random incoming positions (from seed).
  CausalProbe(const ExecSpace& space, const Matrix<const T>& features,
              const data::FeatureSpec& spec, std::size_t positions, std::size_t begin,
              std::size_t end, std::size_t batch, std::uint64_t seed);

  /// The states to run the network on: (groups + 1) blocks of batch rows, block 0 as is,
  /// block g + 1 with group g switched off.
  Matrix<const T> states() const { return m_states; }
  const std::vector<std::string>& groups() const { return m_names; }

  /// sums[g] += the probe's value for group g, from q (the Q-values of states()); sums
  /// must hold groups().size() values.
  void accumulate(const ExecSpace& space, const Matrix<const float>& q,
                  const Kokkos::View<double*, DeviceMemory>& sums) const;

 private:
  std::size_t m_batch;
  std::vector<std::string> m_names;
  Matrix<T> m_states;
};

}  // namespace dqntrader::train

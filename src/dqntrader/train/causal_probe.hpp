// The causal-intervention probe: on a fixed batch of training states, how much do the
// Q-values move when one feature group is switched off? Each group (returns, volatility,
// ofi, extra columns) is set to 0, its training mean after standardization, and the probe
// records mean over states and actions of |Q(state with the group off) - Q(state)|. The
// batch of all variants is built once, for each member of a population from its own seed; a
// probe is one forward pass of every member and one kernel of sums.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/gemm.hpp"
#include "dqntrader/core/member_settings.hpp"
#include "dqntrader/core/types.hpp"
#include "dqntrader/data/features.hpp"

namespace dqntrader::train {

template <class T>
class CausalProbe {
 public:
  /// For each member, states at bars drawn from [begin, end) with random incoming positions
  /// (from seeds[m]).
  CausalProbe(const ExecSpace& space, const Matrix<const T>& features,
              const data::FeatureSpec& spec, std::size_t positions, std::size_t begin,
              std::size_t end, std::size_t batch, const std::vector<std::uint64_t>& seeds);

  /// The states to run member m's network on, states()(m): (groups + 1) blocks of batch rows,
  /// block 0 as is, block g + 1 with group g switched off.
  gemm::StridedBatch<const T> states() const { return m_states; }
  std::size_t rows() const { return m_states.extent(1); }
  const std::vector<std::string>& groups() const { return m_names; }

  /// sums(m, g) += the probe's value for group g from q(m) (member m's Q-values of its
  /// states()), for the members whose probe is on (members(m).probe).
  void accumulate(const ExecSpace& space, const gemm::StridedBatch<const float>& q,
                  const Kokkos::View<const MemberSettings*, DeviceMemory>& members,
                  const Kokkos::View<double**, DeviceMemory>& sums) const;

 private:
  std::size_t m_batch;
  std::vector<std::string> m_names;
  MatrixBatch<T> m_states;
};

}  // namespace dqntrader::train

// The faults a test injects into a population's training (DqnTrainer::inject_fault): each
// member's fault of its next step, written where such a fault would arise by the operation
// named for that point of the step, and the members whose rewards are NaN since a price fault.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "dqntrader/core/types.hpp"
#include "dqntrader/nn/mlp.hpp"
#include "dqntrader/replay/replay_buffer.hpp"

namespace dqntrader::train {

class InjectedFaults {
 public:
  InjectedFaults(const ExecSpace& space, std::size_t members);

  /// Member's next step gets the fault kind: batch, gradient, weight or price (InputError for
  /// another).
  void inject(std::size_t member, const std::string& kind);
  /// Whether some member's fault has yet to happen.
  bool pending() const;

  /// Before the step: a price fault makes every reward of its member NaN from now on.
  /// Whether one did (what reads the rewards must follow it).
  bool before_step(const ExecSpace& space);
  /// Once the batches are drawn, before the loss reads them (member m's from m * B): a batch
  /// fault makes its member's first return NaN.
  void before_loss(const ExecSpace& space, const replay::Batch& batch) const;
  /// After the gradients, before Adam reads them: a gradient fault makes its member's first
  /// gradient NaN, at values[m * stride] (the gradient, or what it is the sum of).
  void after_gradients(const ExecSpace& space, float* values, std::size_t stride) const;
  /// After Adam's update of online (member m's parameters at m * stride): a weight fault
  /// makes its member's first weight NaN. The step's one-shot faults are spent then (a price
  /// fault is spent by before_step()).
  void after_update(const ExecSpace& space, const Kokkos::View<float*, DeviceMemory>& online,
                    std::size_t stride);

  /// Per member: 1 when its rewards are NaN.
  Kokkos::View<int*, DeviceMemory> poisoned() const { return m_poisoned; }

 private:
  enum class Kind { none, batch, gradient, weight, price };

  // NaN at values[m * stride] for every member m whose next fault is kind.
  void spoil(const ExecSpace& space, Kind kind, float* values, std::size_t stride) const;

  std::vector<Kind> m_next;  // per member: the fault of its next step
  Kokkos::View<int*, DeviceMemory> m_poisoned;
};

}  // namespace dqntrader::train

// The double-DQN target, the Huber loss and its gradient, fused in one kernel:
//   a*  = argmax_a Q_online(s', a)           (the online network picks)
//   y   = R + discount * Q_target(s', a*)    (the target network evaluates)
//   d   = Q_online(s, a) - y
//   loss = mean over the batch of huber(d), huber(d) = d^2 / 2 if |d| <= delta,
//          delta (|d| - delta / 2) otherwise
//   dL/dQ_online(s, a) = clamp(d, -delta, delta) / B, zero for the other actions.
// The gradient goes straight to where the network's backward pass reads it (with the head's
// bias gradient, the gradient's column sums), so no other kernel touches it.
#pragma once

#include "dqntrader/core/types.hpp"
#include "dqntrader/nn/mlp.hpp"
#include "dqntrader/replay/replay_buffer.hpp"

namespace dqntrader::train {

struct LossSums {
  double loss;    // sum of huber(d) over the batch
  double q;       // sum of Q_online(s, a)
  double finite;  // 1 when every value was finite, else 0 (a minimum)
};

/// Running sums over many batches (an epoch's).
struct LossTotals {
  double loss;     // sum of huber(d) over every sample
  double q;        // sum of Q_online(s, a) over every sample
  double batches;  // batches added
};

/// q_online: at least 2B rows, [0, B) for the states s and [B, 2B) for the next states s';
/// q_target: B rows for s'. Writes dL/dQ_online(s) (B rows) through gradient, the batch's
/// sums into sums, and adds them to totals (all on the device). One kernel; the sums are
/// taken in a fixed order.
template <class T>
void td_loss(const ExecSpace& space, const Matrix<const float>& q_online,
             const Matrix<const float>& q_target, const replay::Batch& batch, double huber_delta,
             const nn::OutputGradient<T>& gradient,
             const Kokkos::View<LossSums, DeviceMemory>& sums,
             const Kokkos::View<LossTotals, DeviceMemory>& totals);

/// The same, for one sample, in plain arithmetic: the kernel's definition, for reuse.
KOKKOS_INLINE_FUNCTION double huber(double d, double delta) {
  const double a = d < 0 ? -d : d;
  return a <= delta ? 0.5 * d * d : delta * (a - 0.5 * delta);
}

}  // namespace dqntrader::train

// The DQN rule of one sample, in plain arithmetic: what a learning step makes of a transition
// (s, a, R, discount, s') once both networks' Q-values are known. Every learning path calls it
// (the TD loss of the products path, train/td_loss.cpp, and the fused step's loss kernel,
// train/fused/), so that training means one thing everywhere:
//   a*   = argmax_a Q_online(s', a), the first of equals  (the online network picks)
//   y    = R + discount * Q_target(s', a*)                (the target network evaluates;
//                                                          discount = gamma^n, 0 at the end)
//   d    = Q_online(s, a) - y
//   loss = huber(d): d^2 / 2 if |d| <= delta, delta (|d| - delta / 2) otherwise
//   dL/dQ_online(s, a) = clamp(d, -delta, delta) / B for a batch of B (the mean's), zero for the
//   other actions; back through the head by nn::head_gradient (nn/q_head.hpp).
#pragma once

#include <cstddef>

#include "dqntrader/core/kokkos_compat.hpp"
#include "dqntrader/core/unroll.hpp"

namespace dqntrader::train {

/// huber(d) of one sample.
KOKKOS_INLINE_FUNCTION double huber(double d, double delta) {
  const double a = d < 0 ? -d : d;
  return a <= delta ? 0.5 * d * d : delta * (a - 0.5 * delta);
}

/// q[i] for a run-time i < N: selects over the unrolled values, which stay in registers.
template <int N>
KOKKOS_INLINE_FUNCTION float pick(const float (&q)[N], int i) {
  float v = q[0];
  DQNTRADER_UNROLL
  for (int a = 1; a < N; ++a)
    v = a == i ? q[a] : v;
  return v;
}

/// What one sample gives the loss and its gradient.
struct TdSample {
  double loss;       // huber(d)
  double q_taken;    // Q_online(s, a); 0 for an action outside the head
  double nonfinite;  // 1 where d is not finite, else 0
  float dq;          // d loss / d Q_online(s, a)
};

/// The rule above for one sample from its Q-values (N values each, the first `actions` of
/// them the actions'): now = Q_online(s), next = Q_online(s'), target = Q_target(s'); taken is
/// the action a, delta the member's Huber threshold, batch its samples B.
template <int N>
KOKKOS_INLINE_FUNCTION TdSample td_sample(const float (&now)[N], const float (&next)[N],
                                          const float (&target)[N], int actions, int taken,
                                          float return_n, float discount, double delta,
                                          std::size_t batch) {
  int best = 0;
  float best_q = next[0];
  DQNTRADER_UNROLL
  for (int a = 1; a < N; ++a) {
    if (a < actions && next[a] > best_q) {
      best = a;
      best_q = next[a];
    }
  }
  const double y = static_cast<double>(return_n) +
                   static_cast<double>(discount) * static_cast<double>(pick(target, best));
  const double q_taken = taken >= 0 && taken < actions ? pick(now, taken) : 0.0f;
  const double d = q_taken - y;
  const double clipped = d > delta ? delta : (d < -delta ? -delta : d);
  TdSample s;
  s.loss = huber(d, delta);
  s.q_taken = q_taken;
  s.nonfinite = compat::kmath::fabs(d) <= compat::max_double ? 0.0 : 1.0;
  s.dq = static_cast<float>(clipped / static_cast<double>(batch));
  return s;
}

}  // namespace dqntrader::train

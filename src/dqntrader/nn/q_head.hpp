// The Q-network's head, one row at a time: Q from the head's outputs (a dueling head's
// combination) and, back through it, the gradient at the head's outputs from d loss / d Q. Every
// path that evaluates or trains the head calls these (nn::head_forward, the TD loss of the
// products path, the fused learning step), so that the head means one thing everywhere.
#pragma once

#include <Kokkos_Macros.hpp>

#include "dqntrader/core/unroll.hpp"

namespace dqntrader::nn {

/// The most head outputs (actions, plus one with a dueling head) a network takes: the head's
/// passes keep one value per output in registers.
constexpr int kMaxHeadWidth = 8;

/// q[a] = Q(a) from a row's width head outputs o(0..width - 1) (bias added; width <= N): o(a)
/// itself, or with a dueling head Q(a) = o(0) + o(1 + a) - mean_b o(1 + b); q[a] = 0 beyond the
/// actions (width, or width - 1 when dueling). N is a constant, so that the loops unroll into
/// registers with no bounds checks where it is the width itself.
template <int N, class Outputs>
KOKKOS_INLINE_FUNCTION void head_q(const Outputs& o, int width, bool dueling, float (&q)[N]) {
  if (!dueling) {
    DQNTRADER_UNROLL
    for (int a = 0; a < N; ++a)
      q[a] = a < width ? o(a) : 0.0f;
    return;
  }
  float mean = 0.0f;
  DQNTRADER_UNROLL
  for (int a = 1; a < N; ++a) {
    if (a < width)
      mean += o(a);
  }
  mean /= static_cast<float>(width > 1 ? width - 1 : 1);  // a dueling head has 2 outputs or more
  DQNTRADER_UNROLL
  for (int a = 0; a + 1 < N; ++a)
    q[a] = a + 1 < width ? o(0) + o(a + 1) - mean : 0.0f;
  q[N - 1] = 0.0f;
}

/// g[o] = d loss / d o for the head's outputs o < actions (+ 1 when dueling) from dq(a) = d
/// loss / d Q(a) for a < actions (a row's, or sums over rows: the head's bias gradient),
/// through head_q's combination: g = dq, or with a dueling head dV = sum_a dq(a) and dA(a) =
/// dq(a) - mean_b dq(b), the sum taken in double; g[o] = 0 beyond them (N > actions when
/// dueling).
template <int N, class Dq>
KOKKOS_INLINE_FUNCTION void head_gradient(const Dq& dq, int actions, bool dueling, float (&g)[N]) {
  if (!dueling) {
    DQNTRADER_UNROLL
    for (int o = 0; o < N; ++o)
      g[o] = o < actions ? static_cast<float>(dq(o)) : 0.0f;
    return;
  }
  double sum = 0.0;
  DQNTRADER_UNROLL
  for (int a = 0; a < N; ++a) {
    if (a < actions)
      sum += static_cast<double>(dq(a));
  }
  g[0] = static_cast<float>(sum);
  DQNTRADER_UNROLL
  for (int o = 1; o < N; ++o) {
    g[o] = o - 1 < actions ? static_cast<float>(static_cast<double>(dq(o - 1)) -
                                                sum / static_cast<double>(actions))
                           : 0.0f;
  }
}

}  // namespace dqntrader::nn

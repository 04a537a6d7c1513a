#include "dqntrader/train/td_loss.hpp"

#include "dqntrader/core/kokkos_compat.hpp"

namespace dqntrader::train {

namespace {

struct TdLoss {
  using value_type = LossSums;
  Matrix<const float> q_online, q_target;
  replay::Batch batch;
  double delta;
  Matrix<float> dq;

  KOKKOS_INLINE_FUNCTION void init(LossSums& s) const { s = LossSums{0.0, 0.0, 1.0}; }
  KOKKOS_INLINE_FUNCTION void join(DQNTRADER_JOIN_VOLATILE LossSums& dst,
                                   const DQNTRADER_JOIN_VOLATILE LossSums& src) const {
    dst.loss += src.loss;
    dst.q += src.q;
    if (src.finite < dst.finite)
      dst.finite = src.finite;
  }
  KOKKOS_INLINE_FUNCTION void operator()(const std::size_t i, LossSums& s) const {
    const std::size_t batch_size = dq.extent(0), actions = dq.extent(1), next = batch_size + i;
    std::size_t best = 0;
    for (std::size_t a = 1; a < actions; ++a) {
      if (q_online(next, a) > q_online(next, best))
        best = a;
    }
    const double target =
        batch.return_n(i) + static_cast<double>(batch.discount(i)) * q_target(i, best);
    const std::size_t taken = static_cast<std::size_t>(batch.action(i));
    const double q = q_online(i, taken);
    const double d = q - target;
    const double clipped = d > delta ? delta : (d < -delta ? -delta : d);
    for (std::size_t a = 0; a < actions; ++a) {
      dq(i, a) = a == taken ? static_cast<float>(clipped / static_cast<double>(batch_size)) : 0.0f;
    }
    s.loss += huber(d, delta);
    s.q += q;
    if (!(compat::kmath::fabs(d) <= compat::max_double))
      s.finite = 0.0;
  }
};

}  // namespace

void td_loss(const ExecSpace& space, const Matrix<const float>& q_online,
             const Matrix<const float>& q_target, const replay::Batch& batch, double huber_delta,
             const Matrix<float>& dq, const Kokkos::View<LossSums, DeviceMemory>& sums) {
  Kokkos::parallel_reduce("dqntrader::train::td_loss",
                          Kokkos::RangePolicy<ExecSpace>(space, 0, dq.extent(0)),
                          TdLoss{q_online, q_target, batch, huber_delta, dq}, sums);
}

}  // namespace dqntrader::train

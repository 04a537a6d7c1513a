#include "dqntrader/train/td_loss.hpp"

#include "dqntrader/core/kokkos_compat.hpp"
#include "dqntrader/core/team_sum.hpp"

namespace dqntrader::train {

namespace {

using Policy = Kokkos::TeamPolicy<ExecSpace>;
using Member = Policy::member_type;
using Scratch = TeamScratch<double>;

// One team: each thread takes every n-th sample, kRows samples at a time (their loads
// issued before the arithmetic, so that they overlap), then the tree adds the threads' sums
// of the loss, of Q, of the non-finite count and, per action, of the gradient.
constexpr int kRows = 4;
constexpr int kTotals = 3;  // loss, Q, non-finite; then one sum per action

// d loss / d Q of one sample: `value` at the action taken, zero elsewhere.
struct OneHot {
  std::size_t taken;
  float value;
  KOKKOS_INLINE_FUNCTION float operator()(std::size_t a) const { return a == taken ? value : 0.0f; }
};

template <class Values>
struct Row {
  Values values;
  int n;
  KOKKOS_INLINE_FUNCTION double operator()(std::size_t a) const {
    return values((kTotals + static_cast<int>(a)) * n);
  }
};

// A actions (a constant, so that the loops over them unroll).
template <int A, class T>
struct TdLoss {
  Matrix<const float> q_online, q_target;
  replay::Batch batch;
  double delta;
  nn::OutputGradient<T> gradient;
  Kokkos::View<LossSums, DeviceMemory> sums;
  Kokkos::View<LossTotals, DeviceMemory> totals;

  KOKKOS_INLINE_FUNCTION void operator()(const Member& member) const {
    const int n = member.team_size(), t = member.team_rank();
    const std::size_t batch_size = gradient.head.extent(0);
    const Scratch partial(member.team_scratch(0), (kTotals + A) * n);
    for (int a = 0; a < A; ++a)
      partial((kTotals + a) * n + t) = 0.0;
    double loss = 0.0, q_sum = 0.0, non_finite = 0.0;
    for (std::size_t i0 = static_cast<std::size_t>(t); i0 < batch_size;
         i0 += static_cast<std::size_t>(n) * kRows) {
      std::size_t best[kRows], taken[kRows];
      for (int k = 0; k < kRows; ++k) {
        const std::size_t i = i0 + static_cast<std::size_t>(k) * n;
        best[k] = 0;
        taken[k] = 0;
        if (i >= batch_size)
          continue;
        const std::size_t next = batch_size + i;
        for (std::size_t a = 1; a < A; ++a) {
          if (q_online(next, a) > q_online(next, best[k]))
            best[k] = a;
        }
        taken[k] = static_cast<std::size_t>(batch.action(i));
      }
      for (int k = 0; k < kRows; ++k) {
        const std::size_t i = i0 + static_cast<std::size_t>(k) * n;
        if (i >= batch_size)
          continue;
        const double target =
            batch.return_n(i) + static_cast<double>(batch.discount(i)) * q_target(i, best[k]);
        const double q = q_online(i, taken[k]);
        const double d = q - target;
        const double clipped = d > delta ? delta : (d < -delta ? -delta : d);
        const float dq = static_cast<float>(clipped / static_cast<double>(batch_size));
        gradient.write_row(i, OneHot{taken[k], dq});
        if (taken[k] < A)
          partial((kTotals + static_cast<int>(taken[k])) * n + t) += static_cast<double>(dq);
        loss += huber(d, delta);
        q_sum += q;
        if (!(compat::kmath::fabs(d) <= compat::max_double))
          non_finite += 1.0;
      }
    }
    partial(t) = loss;
    partial(n + t) = q_sum;
    partial(2 * n + t) = non_finite;
    team_tree_sum(member, partial, kTotals + A);
    if (t == 0) {
      gradient.write_bias(Row<Scratch>{partial, n});
      sums() = LossSums{partial(0), partial(n), partial(2 * n) == 0.0 ? 1.0 : 0.0};
      LossTotals& total = totals();
      total.loss += partial(0);
      total.q += partial(n);
      total.batches += 1.0;
    }
  }
};

}  // namespace

template <class T>
void td_loss(const ExecSpace& space, const Matrix<const float>& q_online,
             const Matrix<const float>& q_target, const replay::Batch& batch, double huber_delta,
             const nn::OutputGradient<T>& gradient,
             const Kokkos::View<LossSums, DeviceMemory>& sums,
             const Kokkos::View<LossTotals, DeviceMemory>& totals) {
  const int team = tree_sum_team_size();
  Policy policy(space, 1, team);
  policy.set_scratch_size(
      0, Kokkos::PerTeam(Scratch::shmem_size((kTotals + gradient.actions()) * team)));
  nn::with_head_width(gradient.actions(), [&](auto actions) {
    Kokkos::parallel_for("dqntrader::train::td_loss", policy,
                         TdLoss<decltype(actions)::value, T>{q_online, q_target, batch, huber_delta,
                                                             gradient, sums, totals});
  });
}

template void td_loss(const ExecSpace&, const Matrix<const float>&, const Matrix<const float>&,
                      const replay::Batch&, double, const nn::OutputGradient<float>&,
                      const Kokkos::View<LossSums, DeviceMemory>&,
                      const Kokkos::View<LossTotals, DeviceMemory>&);
template void td_loss(const ExecSpace&, const Matrix<const float>&, const Matrix<const float>&,
                      const replay::Batch&, double, const nn::OutputGradient<bf16>&,
                      const Kokkos::View<LossSums, DeviceMemory>&,
                      const Kokkos::View<LossTotals, DeviceMemory>&);

}  // namespace dqntrader::train

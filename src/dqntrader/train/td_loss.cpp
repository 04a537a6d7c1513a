#include "dqntrader/train/td_loss.hpp"

#include <string>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/kokkos_compat.hpp"
#include "dqntrader/core/team_sum.hpp"

namespace dqntrader::train {

namespace {

using Policy = Kokkos::TeamPolicy<ExecSpace>;
using Member = Policy::member_type;

// A team evaluates one head on kRows rows, kHeadLanes threads a row (a warp on CUDA; one
// thread on the host), and adds the lanes' shares in a tree. The teams of a group of kRows
// samples: one on s (online), one on s' (online), one on s' (target). The last of the three to
// arrive works out the group's losses and gradients, a thread a sample, and writes the group's
// sums apart; the group that arrives last adds every group's sums (its threads in a fixed
// pattern, then the tree). The teams after the learning ones evaluate the online head on the
// further rows. Each warp takes one row, so that none carries a long chain of loads.
#if defined(DQNTRADER_BACKEND_CUDA)
constexpr int kRows = 8;
#else
constexpr int kRows = 1;
#endif
constexpr int kLanes = nn::kHeadLanes;
constexpr int kTeam = kRows * kLanes;
constexpr int kEvaluations = 3;  // online on s, online on s', target on s'
constexpr int kTotals = 3;       // loss, Q, non-finite; then one sum per head output

// d loss / d Q of one sample: `value` at the action taken, zero elsewhere.
struct OneHot {
  int taken;
  float value;
  KOKKOS_INLINE_FUNCTION float operator()(std::size_t a) const {
    return static_cast<int>(a) == taken ? value : 0.0f;
  }
};

template <class Values>
struct Row {
  Values values;
  int n;
  KOKKOS_INLINE_FUNCTION double operator()(std::size_t a) const {
    return values((kTotals + static_cast<int>(a)) * n);
  }
};

KOKKOS_INLINE_FUNCTION constexpr std::size_t lane_floats(int width) {
  return static_cast<std::size_t>(kRows) * width * kLanes;
}
KOKKOS_INLINE_FUNCTION constexpr std::size_t team_doubles(int width) {
  return static_cast<std::size_t>(kTotals + width) * kTeam;
}

int sample_groups(std::size_t batch_size) {
  return static_cast<int>((batch_size + kRows - 1) / kRows);
}

// W head outputs (a constant, so that the loops over them unroll into registers).
template <int W, class T>
struct TdLossKernel {
  nn::HeadInputs<T> head;
  std::size_t batch_size, rows;
  Matrix<float> q;
  Matrix<float> q_target;  // the target's Q on s', for the group's last team
  replay::Batch batch;
  double delta;
  nn::OutputGradient<T> gradient;
  Kokkos::View<LossSums, DeviceMemory> sums;
  Kokkos::View<LossTotals, DeviceMemory> totals;
  Kokkos::View<double*, DeviceMemory> partials;  // [sum][group]
  Kokkos::View<int*, DeviceMemory> group_arrivals;
  Kokkos::View<int, DeviceMemory> arrivals;
  int groups;

  KOKKOS_INLINE_FUNCTION void operator()(const Member& member) const {
    using Floats = TeamScratch<float>;
    using Doubles = TeamScratch<double>;
    const Floats shares(member.team_scratch(0), lane_floats(W));
    const Doubles values(member.team_scratch(0), team_doubles(W));
    const int n = member.team_size(), rank = member.team_rank();
    const int lane = rank % kLanes, slot = rank / kLanes;
    const int team = member.league_rank();
    const bool learning = team < kEvaluations * groups;
    const int evaluation = learning ? team / groups : 0, group = learning ? team % groups : 0;
    const std::size_t b = batch_size;
    const std::size_t first =
        learning ? static_cast<std::size_t>(group) * kRows
                 : 2 * b + static_cast<std::size_t>(team - kEvaluations * groups) * kRows;
    const std::size_t i = first + static_cast<std::size_t>(slot);
    const bool valid = learning ? i < b : i < rows;
    const std::size_t copy = evaluation == 2 ? 1 : 0;
    const std::size_t row = evaluation == 0 || !learning ? i : b + i;
    float o[1][W] = {};
    if (valid) {
      const T* const rows_of[1] = {head.row(copy, row)};
      const T* const weights[1] = {head.weight_of(copy)};
      nn::head_dots<W, 1>(lane, rows_of, weights, head.hidden.extent(2), o);
    }
    // Row slot's shares at [slot][output][lane].
    const int base = slot * W * kLanes;
    for (int a = 0; a < W; ++a)
      shares(base + a * kLanes + lane) = o[0][a];
    group_tree_sum(member, shares, W, kLanes);
    const int actions = static_cast<int>(head.actions());
    if (lane == 0 && valid) {
      float qv[W];
      nn::head_q<W>([&](int a) { return shares(base + a * kLanes) + head.bias_of(copy, a); },
                    head.dueling, qv);
      const Matrix<float>& out = evaluation == 2 ? q_target : q;
      const std::size_t at = evaluation == 2 ? i : row;
      for (int a = 0; a < actions; ++a)
        out(at, static_cast<std::size_t>(a)) = qv[a];
    }
    if (!learning || !last_to_arrive(member, &group_arrivals(group), kEvaluations))
      return;
    // The group's samples, a thread each; zeros elsewhere. The Q-values come from the other
    // teams of the group, through memory.
    double loss = 0.0, q_taken = 0.0, non_finite = 0.0;
    float dq = 0.0f;
    int taken = -1;
    const std::size_t sample = first + static_cast<std::size_t>(rank);
    if (rank < kRows && sample < b) {
      const std::size_t stride = q.extent(1);
      const volatile float* const online_s = q.data() + sample * stride;
      const volatile float* const online_next = q.data() + (b + sample) * stride;
      const volatile float* const target_next = q_target.data() + sample * q_target.extent(1);
      int best = 0;
      for (int a = 1; a < W; ++a) {
        if (a < actions && online_next[a] > online_next[best])
          best = a;
      }
      taken = static_cast<int>(batch.action(sample));
      const double target = batch.return_n(sample) + static_cast<double>(batch.discount(sample)) *
                                                         static_cast<double>(target_next[best]);
      q_taken = taken >= 0 && taken < actions ? online_s[taken] : 0.0f;
      const double d = q_taken - target;
      const double clipped = d > delta ? delta : (d < -delta ? -delta : d);
      dq = static_cast<float>(clipped / static_cast<double>(b));
      gradient.write_row(sample, OneHot{taken, dq});
      loss = huber(d, delta);
      if (!(compat::kmath::fabs(d) <= compat::max_double))
        non_finite = 1.0;
    }
    if (rank < kRows) {
      values(rank) = loss;
      values(kRows + rank) = q_taken;
      values(2 * kRows + rank) = non_finite;
      for (int a = 0; a < W; ++a)
        values((kTotals + a) * kRows + rank) = a == taken ? static_cast<double>(dq) : 0.0;
    }
    member.team_barrier();
    for (int k = rank; k < kTotals + W; k += n) {
      double total = 0.0;
      for (int s = 0; s < kRows; ++s)
        total += values(k * kRows + s);
      partials(static_cast<std::size_t>(k) * groups + group) = total;
    }
    if (!last_to_arrive(member, &arrivals(), groups))
      return;
    const volatile double* const all = partials.data();
    for (int k = 0; k < kTotals + W; ++k) {
      double mine = 0.0;
      for (int g = rank; g < groups; g += n)
        mine += all[static_cast<std::size_t>(k) * groups + g];
      values(k * n + rank) = mine;
    }
    team_tree_sum(member, values, kTotals + W);
    if (rank != 0)
      return;
    gradient.write_bias(Row<Doubles>{values, n});
    sums() = LossSums{values(0), values(n), values(2 * n) == 0.0 ? 1.0 : 0.0};
    LossTotals& total = totals();
    total.loss += values(0);
    total.q += values(n);
    total.batches += 1.0;
  }
};

}  // namespace

TdLoss::TdLoss(const ExecSpace& space, std::size_t batch_size, std::size_t width)
    : m_batch_size(batch_size),
      m_width(width),
      m_q_target(Kokkos::view_alloc(space, std::string("dqntrader::train::td_q_target")),
                 batch_size, width),
      m_partials(Kokkos::view_alloc(space, std::string("dqntrader::train::td_partials")),
                 (kTotals + width) * static_cast<std::size_t>(sample_groups(batch_size))),
      m_group_arrivals(
          Kokkos::view_alloc(space, std::string("dqntrader::train::td_group_arrivals")),
          static_cast<std::size_t>(sample_groups(batch_size))),
      m_arrivals(Kokkos::view_alloc(space, std::string("dqntrader::train::td_arrivals"))) {}

template <class T>
void TdLoss::compute(const ExecSpace& space, const nn::HeadInputs<T>& head, std::size_t rows,
                     const Matrix<float>& q, const replay::Batch& batch, double huber_delta,
                     const nn::OutputGradient<T>& gradient,
                     const Kokkos::View<LossSums, DeviceMemory>& sums,
                     const Kokkos::View<LossTotals, DeviceMemory>& totals) const {
  const std::size_t b = batch.size();
  if (b == 0 || b > m_batch_size || head.width > m_width || head.hidden.extent(0) < 2 ||
      rows < 2 * b || head.hidden.extent(1) < rows || q.extent(0) < rows ||
      q.extent(1) != head.actions() || gradient.head.extent(0) != b ||
      gradient.actions() != head.actions()) {
    throw InputError("td_loss: a batch of " + std::to_string(b) + " samples over " +
                     std::to_string(rows) + " rows does not fit the buffers");
  }
  const int groups = sample_groups(b);
  const int further = static_cast<int>((rows - 2 * b + kRows - 1) / kRows);
  const Matrix<float> q_target(m_q_target.data(), b, head.actions());
  nn::with_head_width(head.width, [&](auto width) {
    constexpr int W = decltype(width)::value;
    Policy policy(space, kEvaluations * groups + further, kTeam);
    policy.set_scratch_size(0, Kokkos::PerTeam(TeamScratch<float>::shmem_size(lane_floats(W)) +
                                               TeamScratch<double>::shmem_size(team_doubles(W))));
    Kokkos::parallel_for(
        "dqntrader::train::td_loss", recordable(policy),
        TdLossKernel<W, T>{head, b, rows, q, q_target, batch, huber_delta, gradient, sums, totals,
                           m_partials, m_group_arrivals, m_arrivals, groups});
  });
}

template void TdLoss::compute(const ExecSpace&, const nn::HeadInputs<float>&, std::size_t,
                              const Matrix<float>&, const replay::Batch&, double,
                              const nn::OutputGradient<float>&,
                              const Kokkos::View<LossSums, DeviceMemory>&,
                              const Kokkos::View<LossTotals, DeviceMemory>&) const;
template void TdLoss::compute(const ExecSpace&, const nn::HeadInputs<bf16>&, std::size_t,
                              const Matrix<float>&, const replay::Batch&, double,
                              const nn::OutputGradient<bf16>&,
                              const Kokkos::View<LossSums, DeviceMemory>&,
                              const Kokkos::View<LossTotals, DeviceMemory>&) const;

}  // namespace dqntrader::train

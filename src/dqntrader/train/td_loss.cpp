#include "dqntrader/train/td_loss.hpp"

#include <string>
#include <type_traits>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/kokkos_compat.hpp"
#include "dqntrader/core/team_sum.hpp"
#include "dqntrader/train/dqn_rule.hpp"

namespace dqntrader::train {

namespace {

// A team takes S samples and S further rows: (kEvaluations + 1) S head evaluations, its units
// (per sample the online network on s and on s' and the target on s'; the online network on
// each further row), in groups of nn::head_lanes threads (on CUDA up to a warp, a narrow head's
// groups sharing one: each group evaluates kWarpRows rows of one network together, their loads
// issued before any is used, and takes the team's units in turn; on the host the team's one
// thread takes every unit). The lanes' shares are added in a tree (lane_sums); the team's
// Q-values meet in scratch memory, where a lane of the team's first warp per sample (its batch
// entry loaded before the heads) works out its loss and gradient, and the warp adds the
// samples' sums in a butterfly; the team's sums are written apart. A second kernel of one team
// adds every team's sums (its kSumThreads threads in a fixed pattern, then the tree), so that
// no team of the first waits for the others. On CUDA a team takes kFewSamples samples, or
// kManySamples when the members' batches together have at least kManyFrom samples: where the
// teams are many, a team's fixed costs (its batch entries' loads, the samples' arithmetic by one
// warp while the others wait, its sums) are shared by more samples, and a row's lanes take up
// to kManyPacks packs each (nn::head_lanes): fewer lanes to add a row, and more rows a warp to
// share each group's fixed work (at 16 members of the EPOCH network 8 lanes a row, not 32; at
// 64 of the train defaults' 4, not 16). With few teams a lane takes one pack of a row, which
// keeps each thread's chain of loads short.
#if defined(DQNTRADER_BACKEND_CUDA)
constexpr int kFewSamples = 8, kManySamples = 32, kSumThreads = 128, kWarpRows = 4;
constexpr int kSampleLanes = 32, kTeam = 256;
#else
constexpr int kFewSamples = 1, kManySamples = 1, kSumThreads = 1, kWarpRows = 1;
constexpr int kSampleLanes = 1, kTeam = 1;
#endif
constexpr std::size_t kManyFrom = 8192, kManyPacks = 8;  // on the host a row is one lane
static_assert(kFewSamples % kWarpRows == 0 && kManySamples % kWarpRows == 0,
              "a group's rows are of one evaluation (one network)");
static_assert(kManySamples <= kSampleLanes, "a lane of the first warp per sample");
constexpr int kEvaluations = 3;  // online on s, online on s', target on s'
KOKKOS_INLINE_FUNCTION constexpr int units(int samples) {
  return (kEvaluations + 1) * samples;
}
// The groups of a team of S samples: kWarpRows of its units each.
KOKKOS_INLINE_FUNCTION constexpr int groups(int samples) {
  return units(samples) / kWarpRows;
}
// A team's threads for S samples when its groups have `lanes` threads each (the host's team:
// one thread): every group at once, up to kTeam.
constexpr int team_threads(int samples, int lanes) {
  const int all = groups(samples) * lanes;
  return nn::kHeadLanes == 1 ? 1 : (all < kTeam ? all : kTeam);
}
static_assert(team_threads(kFewSamples, nn::kFewestHeadLanes) >= kSampleLanes,
              "the first warp whole");
constexpr int kTotals = 3;  // loss, Q, non-finite; then one sum per head output

// A team of at most kTeam threads per block, at least two blocks of kTeam a multiprocessor (the
// registers each thread may take follow from it).
using Policy = Kokkos::TeamPolicy<ExecSpace, Kokkos::LaunchBounds<kTeam, 2>>;
using Member = Policy::member_type;
using SumPolicy = Kokkos::TeamPolicy<ExecSpace>;

// d loss / d Q of one sample: `value` at the action taken, zero elsewhere.
struct OneHot {
  int taken;
  float value;
  KOKKOS_INLINE_FUNCTION float operator()(int a) const { return a == taken ? value : 0.0f; }
};

template <class Values>
struct Row {
  Values values;
  KOKKOS_INLINE_FUNCTION double operator()(int a) const {
    return values((kTotals + a) * kSumThreads);
  }
};

KOKKOS_INLINE_FUNCTION constexpr std::size_t q_floats(int samples, int width) {
  return static_cast<std::size_t>(units(samples)) * width;
}
KOKKOS_INLINE_FUNCTION constexpr std::size_t sum_doubles(int width) {
  return static_cast<std::size_t>(kTotals + width) * kSumThreads;
}

// W head outputs (a constant, so that the loops over them unroll into registers); whole packs
// of the head's rows and weights when Whole (nn::head_packs); S samples a team.
template <int W, bool Whole, class T, int S>
struct TdLossKernel {
  static constexpr int kGroups = groups(S);
  nn::HeadInputs<T> head;
  std::size_t batch_size, rows;
  gemm::StridedBatch<float> q;
  replay::Batch batch;
  Kokkos::View<const MemberSettings*, DeviceMemory> settings;
  nn::OutputGradient<T> gradient;
  Kokkos::View<double*, DeviceMemory> partials;  // [member][sum][team]
  int teams;                                     // per member
  int lanes;                                     // a group's threads (nn::head_lanes)

  KOKKOS_INLINE_FUNCTION void operator()(const Member& member) const {
    const TeamScratch<float> qs(member.team_scratch(0), q_floats(S, W));
    const int n = member.team_size(), rank = member.team_rank();
    const int lane = rank % lanes;
    const std::size_t m = static_cast<std::size_t>(member.league_rank() / teams);
    const int team = member.league_rank() % teams;
    const std::size_t b = batch_size, first = static_cast<std::size_t>(team) * S;
    const std::size_t entry = m * b;  // the member's first batch entry
    const std::size_t members = gradient.learners();
    const double delta = settings(m).huber_delta;
    const int actions = static_cast<int>(head.actions());
    // Unit u: evaluation u / S (3: a further row) of sample or row u % S.
    auto unit_row = [&](int u, std::size_t& copy, std::size_t& row) {
      const int e = u / S;
      const std::size_t i = first + static_cast<std::size_t>(u % S);
      copy = e == 2 ? members + m : m;
      row = e == 0 ? i : (e < kEvaluations ? b + i : 2 * b + i);
      return e < kEvaluations ? i < b : 2 * b + i < rows;
    };
    // This thread's sample's batch entry, loaded before the heads (its loads overlap theirs).
    const std::size_t mine = first + static_cast<std::size_t>(rank);
    const bool sampled = rank < S && mine < b;
    const int taken_entry = sampled ? static_cast<int>(batch.action(entry + mine)) : -1;
    const float return_entry = sampled ? batch.return_n(entry + mine) : 0.0f;
    const float discount_entry = sampled ? batch.discount(entry + mine) : 0.0f;
    for (int w = rank / lanes; w < kGroups; w += n / lanes) {
      std::size_t copy = 0, row[kWarpRows];
      bool evaluated[kWarpRows], any = false;
      const T* rows[kWarpRows];
      for (int k = 0; k < kWarpRows; ++k) {
        evaluated[k] = unit_row(w * kWarpRows + k, copy, row[k]);
        any = any || evaluated[k];
        rows[k] = head.row(copy, evaluated[k] ? row[k] : 0);
      }
      float o[kWarpRows][W] = {};
      if (any)
        nn::head_dot<W, kWarpRows, Whole>(lane, lanes, rows, head.weight_of(copy),
                                          head.hidden.extent(2), o);
      for (int k = 0; k < kWarpRows; ++k)
        nn::lane_sums<W>(o[k], lanes);
      if (lane != 0)
        continue;
      for (int k = 0; k < kWarpRows; ++k) {
        if (!evaluated[k])
          continue;
        const int u = w * kWarpRows + k;
        float qv[W];
        nn::head_q<W>([&](int a) { return o[k][a] + head.bias_of(copy, a); }, W, head.dueling, qv);
        for (int a = 0; a < W; ++a)
          qs(u * W + a) = qv[a];
        if (copy == m) {
          for (int a = 0; a < actions; ++a)
            q(m, row[k], static_cast<std::size_t>(a)) = qv[a];
        }
      }
    }
    member.team_barrier();
    // The team's samples, a lane of the first warp each (the warp's every lane adds).
    if (rank >= kSampleLanes)
      return;
    const int s = rank;
    double v[kTotals + W] = {};  // loss, Q, non-finite, then d loss / d Q per output
    if (sampled) {
      float now[W], next[W], target[W];
      for (int a = 0; a < W; ++a) {
        now[a] = qs((0 * S + s) * W + a);
        next[a] = qs((1 * S + s) * W + a);
        target[a] = qs((2 * S + s) * W + a);
      }
      const TdSample t = td_sample(now, next, target, actions, taken_entry, return_entry,
                                   discount_entry, delta, b);
      gradient.write_row(m, mine, OneHot{taken_entry, t.dq});
      v[0] = t.loss;
      v[1] = t.q_taken;
      v[2] = t.nonfinite;
      for (int a = 0; a < W; ++a)
        v[kTotals + a] = a == taken_entry ? static_cast<double>(t.dq) : 0.0;
    }
    nn::lane_sums<kTotals + W>(v, S);  // the first warp's samples, in a butterfly
    if (rank != 0)
      return;
    const std::size_t base = m * static_cast<std::size_t>(kTotals + W) * teams;
    for (int k = 0; k < kTotals + W; ++k)
      partials(base + static_cast<std::size_t>(k) * teams + team) = v[k];
  }
};

// The sums of every team of TdLossKernel, added by one team of kSumThreads threads per
// member.
template <int W, class T>
struct TdSumKernel {
  nn::OutputGradient<T> gradient;
  Kokkos::View<LossSums*, DeviceMemory> sums;
  Kokkos::View<LossTotals*, DeviceMemory> totals;
  Kokkos::View<const double*, DeviceMemory> partials;  // [member][sum][team]
  int teams;                                           // per member

  KOKKOS_INLINE_FUNCTION void operator()(const SumPolicy::member_type& member) const {
    using Doubles = TeamScratch<double>;
    const Doubles values(member.team_scratch(0), sum_doubles(W));
    const int rank = member.team_rank();
    const std::size_t m = static_cast<std::size_t>(member.league_rank());
    const std::size_t base = m * static_cast<std::size_t>(kTotals + W) * teams;
    for (int k = 0; k < kTotals + W; ++k) {
      double mine = 0.0;
      for (int t = rank; t < teams; t += kSumThreads)
        mine += partials(base + static_cast<std::size_t>(k) * teams + t);
      values(k * kSumThreads + rank) = mine;
    }
    team_tree_sum(member, values, kTotals + W, kSumThreads);
    if (rank != 0)
      return;
    const int row = kSumThreads;  // a copy: View indices are taken by reference
    gradient.write_bias(m, Row<Doubles>{values});
    sums(m) = LossSums{values(0), values(row), values(2 * row) == 0.0 ? 1.0 : 0.0};
    LossTotals& total = totals(m);
    total.loss += values(0);
    total.q += values(row);
    total.batches += 1.0;
  }
};

// A row's lanes in a team of S samples for a head of `inputs` inputs.
int team_lanes(int samples, std::size_t inputs) {
  return nn::head_lanes(inputs, samples == kManySamples ? kManyPacks : 1);
}

// Teams for a batch of b samples and `further` further rows at `samples` samples a team.
int team_count(std::size_t b, std::size_t further, int samples) {
  const std::size_t most = b > further ? b : further;
  const std::size_t per_team = static_cast<std::size_t>(samples);
  return static_cast<int>((most + per_team - 1) / per_team);
}

// Calls f(std::integral_constant<int, S>()) for the samples a team takes when the members'
// batches have `samples` samples in all (one constant where kFewSamples is kManySamples).
template <class F>
void with_team_samples(std::size_t samples, const F& f) {
  if constexpr (kFewSamples == kManySamples) {
    (void)samples;
    f(std::integral_constant<int, kFewSamples>());
  } else {
    if (samples >= kManyFrom)
      f(std::integral_constant<int, kManySamples>());
    else
      f(std::integral_constant<int, kFewSamples>());
  }
}

}  // namespace

TdLoss::TdLoss(const ExecSpace& space, std::size_t members, std::size_t batch_size,
               std::size_t further, std::size_t width)
    : m_members(members),
      m_batch_size(batch_size),
      m_further(further),
      m_width(width),
      m_partials(Kokkos::view_alloc(space, std::string("dqntrader::train::td_partials")),
                 members * (kTotals + width) *
                     static_cast<std::size_t>(team_count(batch_size, further, kFewSamples))) {}

template <class T>
TdLoss::Partials TdLoss::compute(const ExecSpace& space, const nn::HeadInputs<T>& head,
                                 std::size_t rows, const gemm::StridedBatch<float>& q,
                                 const replay::Batch& batch,
                                 const Kokkos::View<const MemberSettings*, DeviceMemory>& settings,
                                 const nn::OutputGradient<T>& gradient) const {
  const std::size_t members = gradient.learners();
  const std::size_t b = members > 0 ? batch.size() / members : 0;
  if (members == 0 || members > m_members || b == 0 || b * members != batch.size() ||
      b > m_batch_size || rows < 2 * b || rows - 2 * b > m_further || head.width > m_width ||
      head.hidden.extent(0) < 2 * members || head.hidden.extent(1) < rows ||
      q.extent(0) != members || q.extent(1) < rows || q.extent(2) != head.actions() ||
      gradient.rows() != b || gradient.actions() != head.actions() ||
      settings.extent(0) < members) {
    throw InputError("td_loss: " + std::to_string(members) + " members' batches of " +
                     std::to_string(b) + " samples over " + std::to_string(rows) +
                     " rows do not fit the buffers");
  }
  int teams = 0;
  with_team_samples(members * b, [&](auto samples) {
    constexpr int S = decltype(samples)::value;
    const int lanes = team_lanes(S, head.hidden.extent(2));
    teams = team_count(b, rows - 2 * b, S);
    nn::with_head_width(head.width, [&](auto width) {
      with_whole_packs(nn::head_packs(head), [&](auto whole) {
        constexpr int W = decltype(width)::value;
        Policy policy(space, static_cast<int>(members) * teams, team_threads(S, lanes));
        policy.set_scratch_size(0, Kokkos::PerTeam(TeamScratch<float>::shmem_size(q_floats(S, W))));
        Kokkos::parallel_for(
            "dqntrader::train::td_loss", recordable(policy),
            TdLossKernel<W, decltype(whole)::value, T, S>{head, b, rows, q, batch, settings,
                                                          gradient, m_partials, teams, lanes});
      });
    });
  });
  return Partials{m_partials, teams, head.width};
}

template <class T>
void TdLoss::add(const ExecSpace& space, const Partials& partials,
                 const nn::OutputGradient<T>& gradient,
                 const Kokkos::View<LossSums*, DeviceMemory>& sums,
                 const Kokkos::View<LossTotals*, DeviceMemory>& totals) const {
  if (partials.width != gradient.head.extent(2))
    throw InputError("td_loss: the sums are of another head's width");
  const std::size_t members = gradient.learners();
  if (sums.extent(0) < members || totals.extent(0) < members)
    throw InputError("td_loss: the sums hold fewer members than the gradient");
  nn::with_head_width(partials.width, [&](auto width) {
    constexpr int W = decltype(width)::value;
    SumPolicy policy(space, static_cast<int>(members), kSumThreads);
    policy.set_scratch_size(0, Kokkos::PerTeam(TeamScratch<double>::shmem_size(sum_doubles(W))));
    Kokkos::parallel_for(
        "dqntrader::train::td_sums", policy,
        TdSumKernel<W, T>{gradient, sums, totals, partials.values, partials.teams});
  });
}

template TdLoss::Partials TdLoss::compute(const ExecSpace&, const nn::HeadInputs<float>&,
                                          std::size_t, const gemm::StridedBatch<float>&,
                                          const replay::Batch&,
                                          const Kokkos::View<const MemberSettings*, DeviceMemory>&,
                                          const nn::OutputGradient<float>&) const;
template TdLoss::Partials TdLoss::compute(const ExecSpace&, const nn::HeadInputs<bf16>&,
                                          std::size_t, const gemm::StridedBatch<float>&,
                                          const replay::Batch&,
                                          const Kokkos::View<const MemberSettings*, DeviceMemory>&,
                                          const nn::OutputGradient<bf16>&) const;
template void TdLoss::add(const ExecSpace&, const Partials&, const nn::OutputGradient<float>&,
                          const Kokkos::View<LossSums*, DeviceMemory>&,
                          const Kokkos::View<LossTotals*, DeviceMemory>&) const;
template void TdLoss::add(const ExecSpace&, const Partials&, const nn::OutputGradient<bf16>&,
                          const Kokkos::View<LossSums*, DeviceMemory>&,
                          const Kokkos::View<LossTotals*, DeviceMemory>&) const;

}  // namespace dqntrader::train

#include "dqntrader/eval/selection_statistics.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/kokkos_compat.hpp"

namespace dqntrader::eval {

namespace {

using compat::kmath::log;
using compat::kmath::sqrt;
using Policy = Kokkos::TeamPolicy<ExecSpace>;
using Member = Policy::member_type;
using Column = Kokkos::View<double*, DeviceMemory>;

constexpr std::size_t kMostBlocks = 24;  // C(24, 12) = 2,704,156 splits

// C(n, k), exact for the n of CSCV's blocks.
KOKKOS_INLINE_FUNCTION std::uint64_t binomial(std::uint64_t n, std::uint64_t k) {
  if (k > n)
    return 0;
  std::uint64_t c = 1;
  for (std::uint64_t i = 1; i <= k; ++i)
    c = c * (n - k + i) / i;
  return c;
}

// Rows of one candidate summarised: their count, mean and sum of squared deviations from that
// mean (M2). Rows that are all equal have their value as the mean and M2 = 0 exactly, so that
// they do not vary by rounding. Equal rows give equal summaries, and summaries merged in one
// order give equal results: equal returns give equal Sharpe ratios, as the ranks need.
struct Moments {
  double count, mean, m2;
};

// The per-bar Sharpe ratio mean / std (count - 1); 0 where the rows do not vary.
KOKKOS_INLINE_FUNCTION double sharpe_of(const Moments& m) {
  const double variance = m.m2 / (m.count - 1.0);
  return variance > 0.0 ? m.mean / sqrt(variance) : 0.0;
}

// The mean and M2 of rows [first, first + length) of column n, two passes, with the rows'
// smallest and largest value deciding whether they vary at all.
template <class Returns>
KOKKOS_INLINE_FUNCTION Moments column_moments(const Member& team, const Returns& returns,
                                              std::size_t n, std::size_t first,
                                              std::size_t length) {
  double sum = 0.0, lowest = 0.0, highest = 0.0;
  Kokkos::parallel_reduce(
      Kokkos::TeamThreadRange(team, length),
      [&](const std::size_t i, double& v) { v += returns(first + i, n); }, sum);
  Kokkos::parallel_reduce(
      Kokkos::TeamThreadRange(team, length),
      [&](const std::size_t i, double& v) {
        const double x = returns(first + i, n);
        v = x < v ? x : v;
      },
      Kokkos::Min<double>(lowest));
  Kokkos::parallel_reduce(
      Kokkos::TeamThreadRange(team, length),
      [&](const std::size_t i, double& v) {
        const double x = returns(first + i, n);
        v = x > v ? x : v;
      },
      Kokkos::Max<double>(highest));
  if (lowest == highest)
    return Moments{static_cast<double>(length), lowest, 0.0};
  const double mean = sum / static_cast<double>(length);
  double m2 = 0.0;
  Kokkos::parallel_reduce(
      Kokkos::TeamThreadRange(team, length),
      [&](const std::size_t i, double& v) {
        const double d = returns(first + i, n) - mean;
        v += d * d;
      },
      m2);
  return Moments{static_cast<double>(length), mean, m2};
}

// Each candidate's mean, Sharpe ratio, skewness and kurtosis over all T rows, a team a column,
// the central moments in a second pass over the rows.
struct ColumnMoments {
  Kokkos::View<const double**, Kokkos::LayoutLeft, DeviceMemory> returns;
  Column sharpe, skewness, kurtosis;
  double undefined;  // NaN

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::size_t n = static_cast<std::size_t>(team.league_rank());
    const std::size_t rows = returns.extent(0);
    const Moments all = column_moments(team, returns, n, 0, rows);
    double m3 = 0.0, m4 = 0.0;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, rows),
        [&](const std::size_t i, double& s) {
          const double d = returns(i, n) - all.mean;
          s += d * d * d;
        },
        m3);
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, rows),
        [&](const std::size_t i, double& s) {
          const double d = returns(i, n) - all.mean;
          s += d * d * d * d;
        },
        m4);
    Kokkos::single(Kokkos::PerTeam(team), [&] {
      const double t = static_cast<double>(rows);
      sharpe(n) = sharpe_of(all);
      const double central2 = all.m2 / t;
      skewness(n) = central2 > 0.0 ? (m3 / t) / (central2 * sqrt(central2)) : undefined;
      kurtosis(n) = central2 > 0.0 ? (m4 / t) / (central2 * central2) : undefined;
    });
  }
};

// Each block's summary of every candidate's rows (count, mean, M2): a team a (block,
// candidate).
struct BlockMoments {
  Kokkos::View<const double**, Kokkos::LayoutLeft, DeviceMemory> returns;
  Kokkos::View<double**, Kokkos::LayoutLeft, DeviceMemory> means, m2s;  // [block][candidate]
  std::size_t blocks, dropped, length;

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::size_t b = static_cast<std::size_t>(team.league_rank()) % blocks;
    const std::size_t n = static_cast<std::size_t>(team.league_rank()) / blocks;
    const Moments m = column_moments(team, returns, n, dropped + b * length, length);
    Kokkos::single(Kokkos::PerTeam(team), [&] {
      means(b, n) = m.mean;
      m2s(b, n) = m.m2;
    });
  }
};

// CSCV's splits in complementary pairs, a team a pair: split s (the s-th choice of blocks / 2
// of the blocks in lexicographic order) and split C - 1 - s, whose in-sample blocks are the
// first's out-of-sample ones. The team's threads summarise each candidate's two halves once
// (its blocks merged in block order, as Chan, Golub and LeVeque's pairwise update), keeping the
// two Sharpe ratios in team scratch; then, for each split of the pair, the in-sample best
// candidate (the first of equals), its out-of-sample rank among all (ties share the mean of
// their ranks) and the logit of that rank over N + 1. Every merge adds a block to k merged
// ones, whose weights (k L and L rows) give factors that depend on k alone: computed once, in
// the expressions the pairwise update takes, so that the results are those of merging one
// block at a time. Work: C / 2 teams of N candidates x blocks merges, no division in a merge.
struct SplitPairs {
  using Scratch = Kokkos::View<double*, ExecSpace::scratch_memory_space, Kokkos::MemoryUnmanaged>;
  Kokkos::View<const double**, Kokkos::LayoutLeft, DeviceMemory> means, m2s;
  Column logit, in_sample, out_of_sample;  // per split: the logit, and the best's two SRs
  std::size_t blocks, candidates, splits;
  double length;                                   // rows in a block
  double share[kMostBlocks], spread[kMostBlocks];  // a merge's factors after k blocks

  static std::size_t scratch_bytes(std::size_t candidates) {
    return 2 * Scratch::shmem_size(candidates);
  }

  // The choice of blocks of split s, a bit a block.
  KOKKOS_INLINE_FUNCTION std::uint32_t chosen_blocks(std::uint64_t s) const {
    std::uint32_t chosen = 0;
    std::size_t left = blocks / 2;
    for (std::size_t b = 0; b < blocks && left > 0; ++b) {
      const std::uint64_t with = binomial(blocks - b - 1, left - 1);
      if (s < with) {
        chosen |= 1u << b;
        --left;
      } else {
        s -= with;
      }
    }
    return chosen;
  }

  // The Sharpe ratios of candidate n on the chosen blocks and on the others.
  KOKKOS_INLINE_FUNCTION void halves(std::uint32_t chosen, std::size_t n, double& in,
                                     double& out) const {
    Moments half[2] = {{0.0, 0.0, 0.0}, {0.0, 0.0, 0.0}};
    std::size_t merged[2] = {0, 0};
    for (std::size_t b = 0; b < blocks; ++b) {
      const int h = (chosen & (1u << b)) ? 0 : 1;
      const double mean = means(b, n), m2 = m2s(b, n);
      Moments& m = half[h];
      if (merged[h] == 0) {
        m = Moments{length, mean, m2};
      } else {
        const double delta = mean - m.mean;
        m = Moments{m.count + length, m.mean + delta * share[merged[h]],
                    m.m2 + m2 + delta * delta * spread[merged[h]]};
      }
      ++merged[h];
    }
    in = sharpe_of(half[0]);
    out = sharpe_of(half[1]);
  }

  // The split whose in-sample ratios are ins and out-of-sample ratios outs.
  KOKKOS_INLINE_FUNCTION void one_split(const Member& team, const Scratch& ins, const Scratch& outs,
                                        std::size_t split) const {
    const std::int64_t n = static_cast<std::int64_t>(candidates);
    double highest = 0.0;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, n),
        [&](const std::int64_t i, double& v) { v = ins(i) > v ? ins(i) : v; },
        Kokkos::Max<double>(highest));
    std::int64_t best = n;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, n),
        [&](const std::int64_t i, std::int64_t& v) { v = ins(i) == highest && i < v ? i : v; },
        Kokkos::Min<std::int64_t>(best));
    if (best >= n)
      best = 0;  // no ratio compares (NaN throughout): the first, as a sequential scan takes
    const double best_out = outs(best);
    double below = 0.0, equal = 0.0;
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, n),
        [&](const std::int64_t i, double& v) { v += outs(i) < best_out ? 1.0 : 0.0; }, below);
    Kokkos::parallel_reduce(
        Kokkos::TeamThreadRange(team, n),
        [&](const std::int64_t i, double& v) { v += outs(i) == best_out ? 1.0 : 0.0; }, equal);
    Kokkos::single(Kokkos::PerTeam(team), [&] {
      const double w = (below + 0.5 * (equal + 1.0)) / (static_cast<double>(candidates) + 1.0);
      logit(split) = log(w / (1.0 - w));
      in_sample(split) = highest;
      out_of_sample(split) = best_out;
    });
  }

  KOKKOS_INLINE_FUNCTION void operator()(const Member& team) const {
    const std::size_t s = static_cast<std::size_t>(team.league_rank());
    const std::uint32_t chosen = chosen_blocks(s);
    const Scratch first(team.team_scratch(1), candidates), second(team.team_scratch(1), candidates);
    Kokkos::parallel_for(Kokkos::TeamThreadRange(team, candidates),
                         [&](const std::size_t n) { halves(chosen, n, first(n), second(n)); });
    team.team_barrier();
    one_split(team, first, second, s);
    one_split(team, second, first, splits - 1 - s);
  }
};

struct SplitTotals {
  double overfit, losses, x, y, xx, xy;
};

// The shares and the regression's sums over the splits.
struct SumSplits {
  using value_type = SplitTotals;
  Kokkos::View<const double*, DeviceMemory> logit, in_sample, out_of_sample;

  KOKKOS_INLINE_FUNCTION void init(SplitTotals& t) const { t = SplitTotals{0, 0, 0, 0, 0, 0}; }
  KOKKOS_INLINE_FUNCTION void join(DQNTRADER_JOIN_VOLATILE SplitTotals& dst,
                                   const DQNTRADER_JOIN_VOLATILE SplitTotals& src) const {
    dst.overfit += src.overfit;
    dst.losses += src.losses;
    dst.x += src.x;
    dst.y += src.y;
    dst.xx += src.xx;
    dst.xy += src.xy;
  }
  KOKKOS_INLINE_FUNCTION void operator()(const std::size_t s, SplitTotals& t) const {
    const double x = in_sample(s), y = out_of_sample(s);
    t.overfit += logit(s) <= 0.0 ? 1.0 : 0.0;
    t.losses += y < 0.0 ? 1.0 : 0.0;
    t.x += x;
    t.y += y;
    t.xx += x * x;
    t.xy += x * y;
  }
};

template <class V>
std::vector<double> to_host(const V& device) {
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), device);
  return std::vector<double>(host.data(), host.data() + host.extent(0));
}

}  // namespace

double normal_cdf(double x) {
  return 0.5 * std::erfc(-x / std::sqrt(2.0));
}

double normal_quantile(double p) {
  if (!(p > 0.0 && p < 1.0))
    return p == 0.0 ? -INFINITY : (p == 1.0 ? INFINITY : NAN);
  // Acklam's rational approximation (relative error below 1.2e-9), then one step of Halley's
  // method on the distribution function, which brings it to double precision.
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,  -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01, -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                             3.754408661907416e+00};
  const double low = 0.02425;
  double x;
  if (p < low) {
    const double q = std::sqrt(-2.0 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
  } else if (p <= 1.0 - low) {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
  } else {
    const double q = std::sqrt(-2.0 * std::log1p(-p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
  }
  const double e = normal_cdf(x) - p;
  const double u = e * 2.5066282746310002 * std::exp(0.5 * x * x);  // sqrt(2 pi)
  return x - u / (1.0 + 0.5 * x * u);
}

namespace {

// The expected maximum Sharpe ratio of the trials without skill and the winner's deflated
// Sharpe ratio, from the candidates' Sharpe ratios and the winner's moments.
void deflate(SelectionStatistics& stats) {
  const std::size_t n = stats.sharpes.size();
  double average = 0.0;
  for (double s : stats.sharpes)
    average += s;
  average /= static_cast<double>(n);
  double deviations = 0.0;
  for (double s : stats.sharpes)
    deviations += (s - average) * (s - average);
  stats.sharpe_variance = deviations / static_cast<double>(n - 1);
  const double gamma = 0.5772156649015329;  // Euler-Mascheroni
  const double trials = static_cast<double>(n);
  stats.expected_max_sharpe = std::sqrt(stats.sharpe_variance) *
                              ((1.0 - gamma) * normal_quantile(1.0 - 1.0 / trials) +
                               gamma * normal_quantile(1.0 - 1.0 / (trials * std::exp(1.0))));
  const double best = stats.sharpes[stats.winner];
  const double spread_of_estimate =
      1.0 - stats.skewness * best + (stats.kurtosis - 1.0) / 4.0 * best * best;
  stats.deflated_sharpe = spread_of_estimate > 0.0
                              ? normal_cdf((best - stats.expected_max_sharpe) *
                                           std::sqrt(static_cast<double>(stats.returns - 1)) /
                                           std::sqrt(spread_of_estimate))
                              : NAN;
}

}  // namespace

SelectionStatistics selection_statistics(const ExecSpace& space, const ReturnMatrix& returns,
                                         std::size_t winner, std::size_t blocks) {
  const std::size_t t = returns.extent(0), n = returns.extent(1);
  if (n < 2)
    throw InputError("the selection statistics need two or more candidates, not " +
                     std::to_string(n));
  if (winner >= n)
    throw InputError("the selected candidate " + std::to_string(winner) + " is not one of " +
                     std::to_string(n));
  if (blocks < 2 || blocks % 2 != 0 || blocks > kMostBlocks)
    throw InputError("the blocks of CSCV must be an even number from 2 to " +
                     std::to_string(kMostBlocks) + ", not " + std::to_string(blocks));
  if (t < 2)
    throw InputError(std::to_string(t) + " bar returns are too few for a Sharpe ratio");
  SelectionStatistics stats;
  stats.trials = n;
  stats.returns = t;
  stats.winner = winner;
  stats.blocks = blocks;
  stats.dropped = t % blocks;
  const std::size_t length = t / blocks;

  auto alloc = [&](const char* label) { return Kokkos::view_alloc(space, std::string(label)); };
  Column sharpe(alloc("dqntrader::eval::selection::sharpe"), n);
  Column skewness(alloc("dqntrader::eval::selection::skewness"), n);
  Column kurtosis(alloc("dqntrader::eval::selection::kurtosis"), n);
  Kokkos::parallel_for(
      "dqntrader::eval::selection::moments", Policy(space, static_cast<int>(n), Kokkos::AUTO),
      ColumnMoments{returns, sharpe, skewness, kurtosis, std::numeric_limits<double>::quiet_NaN()});
  stats.sharpes = to_host(sharpe);
  stats.skewness = to_host(skewness)[winner];
  stats.kurtosis = to_host(kurtosis)[winner];
  deflate(stats);

  if (length < 2) {
    // The deflated Sharpe ratio does not depend on the blocks; PBO cannot be measured.
    stats.pbo = stats.probability_of_loss = stats.slope = NAN;
    stats.pbo_note = std::to_string(t) + " bar returns are too few for " + std::to_string(blocks) +
                     " blocks of at least 2 (give fewer blocks)";
    return stats;
  }
  Kokkos::View<double**, Kokkos::LayoutLeft, DeviceMemory> means(
      alloc("dqntrader::eval::selection::block_means"), blocks, n);
  Kokkos::View<double**, Kokkos::LayoutLeft, DeviceMemory> m2s(
      alloc("dqntrader::eval::selection::block_m2"), blocks, n);
  Kokkos::parallel_for("dqntrader::eval::selection::blocks",
                       Policy(space, static_cast<int>(blocks * n), Kokkos::AUTO),
                       BlockMoments{returns, means, m2s, blocks, stats.dropped, length});

  const std::size_t splits = static_cast<std::size_t>(binomial(blocks, blocks / 2));
  Column logit(alloc("dqntrader::eval::selection::logits"), splits);
  Column in_sample(alloc("dqntrader::eval::selection::in_sample"), splits);
  Column out_of_sample(alloc("dqntrader::eval::selection::out_of_sample"), splits);
  SplitPairs pairs{
      means, m2s, logit, in_sample, out_of_sample, blocks, n, splits, static_cast<double>(length),
      {},    {}};
  for (std::size_t k = 1; k < blocks; ++k) {
    // merge() of k merged blocks (count k L) and one more (count L).
    const double merged = static_cast<double>(k) * pairs.length;
    const double count = merged + pairs.length;
    pairs.share[k] = pairs.length / count;
    pairs.spread[k] = merged * pairs.length / count;
  }
  Policy policy(space, static_cast<int>(splits / 2), Kokkos::AUTO);
  policy.set_scratch_size(1, Kokkos::PerTeam(SplitPairs::scratch_bytes(n)));
  Kokkos::parallel_for("dqntrader::eval::selection::splits", policy, pairs);
  SplitTotals totals{};
  Kokkos::parallel_reduce("dqntrader::eval::selection::totals",
                          Kokkos::RangePolicy<ExecSpace>(space, 0, splits),
                          SumSplits{logit, in_sample, out_of_sample}, totals);
  stats.logits = to_host(logit);  // one number a split comes back

  const double count = static_cast<double>(splits);
  stats.pbo = totals.overfit / count;
  stats.probability_of_loss = totals.losses / count;
  const double spread = count * totals.xx - totals.x * totals.x;
  stats.slope = spread > 0.0 ? (count * totals.xy - totals.x * totals.y) / spread : NAN;
  return stats;
}

}  // namespace dqntrader::eval

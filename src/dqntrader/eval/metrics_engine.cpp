#include "dqntrader/eval/metrics_engine.hpp"

#include <string>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/kokkos_compat.hpp"
#include "dqntrader/core/team_sum.hpp"

namespace dqntrader::eval {

namespace {

using compat::max_double;
namespace kmath = compat::kmath;

// A signed number kept as its sign and the logarithm of its magnitude, value = sign *
// exp(log), so that products of many bar factors never overflow or underflow: equity is
// carried this way. Zero has sign 0 (log -inf); the identities of a running maximum and
// minimum are -inf (sign -1, log +inf) and +inf (sign +1, log +inf).
struct SignedLog {
  double log;
  int sign;
};

KOKKOS_INLINE_FUNCTION SignedLog times(const SignedLog& a, const SignedLog& b) {
  if (a.sign == 0 || b.sign == 0)
    return SignedLog{-compat::infinity(), 0};
  return SignedLog{a.log + b.log, a.sign * b.sign};
}

KOKKOS_INLINE_FUNCTION bool less(const SignedLog& a, const SignedLog& b) {
  if (a.sign != b.sign)
    return a.sign < b.sign;
  return a.sign > 0 ? a.log < b.log : (a.sign < 0 ? a.log > b.log : false);
}

// 1 + r for a bar's net return r, its logarithm taken as log1p(r) (exact for small r).
KOKKOS_INLINE_FUNCTION SignedLog growth(double r) {
  if (r > -1.0)
    return SignedLog{kmath::log1p(r), 1};
  if (r == -1.0)
    return SignedLog{-compat::infinity(), 0};
  return SignedLog{kmath::log(-1.0 - r), -1};
}

// a / b - 1 for b > 0: the drawdown of equity a below its peak b.
KOKKOS_INLINE_FUNCTION double ratio_minus_one(const SignedLog& a, const SignedLog& b) {
  const double log = a.log - b.log;
  return a.sign > 0 ? kmath::expm1(log) : (a.sign == 0 ? -1.0 : -kmath::exp(log) - 1.0);
}

KOKKOS_INLINE_FUNCTION double value_of(const SignedLog& a) {
  return a.sign == 0 ? 0.0 : a.sign * kmath::exp(a.log);
}

// A segment of bars, summarised so that segments compose associatively:
//  - equity: prod = product of (1 + r) over the segment; high/low = largest/smallest
//    running product at any bar of the segment (relative to the segment's start), each a
//    SignedLog;
//  - trades: a segmented sum that restarts where a trade opens.
// Composition is not commutative: combine() takes the earlier segment first.
struct Segment {
  double prod_log, high_log, low_log, trade;
  int prod_sign, high_sign, low_sign, restart;
};

KOKKOS_INLINE_FUNCTION SignedLog prod_of(const Segment& s) {
  return SignedLog{s.prod_log, s.prod_sign};
}
KOKKOS_INLINE_FUNCTION SignedLog high_of(const Segment& s) {
  return SignedLog{s.high_log, s.high_sign};
}
KOKKOS_INLINE_FUNCTION SignedLog low_of(const Segment& s) {
  return SignedLog{s.low_log, s.low_sign};
}

KOKKOS_INLINE_FUNCTION Segment identity_segment() {
  const double inf = compat::infinity();
  return Segment{0.0, inf, inf, 0.0, 1, -1, 1, 0};
}

KOKKOS_INLINE_FUNCTION Segment combine(const Segment& earlier, const Segment& later) {
  const SignedLog prod = prod_of(earlier);
  const SignedLog scaled_high = times(prod, prod.sign >= 0 ? high_of(later) : low_of(later));
  const SignedLog scaled_low = times(prod, prod.sign >= 0 ? low_of(later) : high_of(later));
  const SignedLog total = times(prod, prod_of(later));
  const SignedLog high = less(high_of(earlier), scaled_high) ? scaled_high : high_of(earlier);
  const SignedLog low = less(scaled_low, low_of(earlier)) ? scaled_low : low_of(earlier);
  Segment s;
  s.prod_log = total.log;
  s.prod_sign = total.sign;
  s.high_log = high.log;
  s.high_sign = high.sign;
  s.low_log = low.log;
  s.low_sign = low.sign;
  s.trade = later.restart ? later.trade : earlier.trade + later.trade;
  s.restart = earlier.restart | later.restart;
  return s;
}

KOKKOS_INLINE_FUNCTION int sign(double x) {
  return (x > 0.0) - (x < 0.0);
}

// What one bar contributes, from the positions before and at it.
struct Bar {
  double p, previous, net_return, cost;
  bool opens, closes;  // a trade opens at this bar; the previous trade closes at it
};

struct BarInputs {
  Kokkos::View<const double*, DeviceMemory> close;
  Kokkos::View<const double*, DeviceMemory> positions;
  const std::int8_t* path;  // the decisions: path[i] indexes positions
  std::size_t begin;
  double cost;

  KOKKOS_INLINE_FUNCTION Bar operator()(const std::size_t i) const {
    Bar b;
    b.p = positions(path[i]);
    b.previous = i == 0 ? 0.0 : positions(path[i - 1]);
    const double price_return = close(begin + i + 1) / close(begin + i) - 1.0;
    b.cost = cost * kmath::fabs(b.p - b.previous);
    b.net_return = b.p * price_return - b.cost;
    const bool flip = b.p != 0.0 && b.previous != 0.0 && sign(b.p) != sign(b.previous);
    b.opens = b.p != 0.0 && (b.previous == 0.0 || flip);
    b.closes = b.previous != 0.0 && (b.p == 0.0 || flip);
    return b;
  }
  KOKKOS_INLINE_FUNCTION double price_return(const std::size_t i) const {
    return close(begin + i + 1) / close(begin + i) - 1.0;
  }

  // Bar i as a segment of one bar: its growth factor, and its part of the trade held over it
  // (the price move, minus the part of this bar's cost that belongs to that trade: on a flip,
  // c |p_t| for the new trade).
  KOKKOS_INLINE_FUNCTION Segment segment(const std::size_t i, const Bar& b) const {
    const SignedLog x = growth(b.net_return);
    Segment element;
    element.prod_log = element.high_log = element.low_log = x.log;
    element.prod_sign = element.high_sign = element.low_sign = x.sign;
    const double flip_cost = cost * kmath::fabs(b.p);
    element.trade = b.p == 0.0 ? 0.0 : b.p * price_return(i) - (b.closes ? flip_cost : b.cost);
    element.restart = b.opens ? 1 : 0;
    return element;
  }
};

KOKKOS_INLINE_FUNCTION MetricSums empty_sums() {
  MetricSums s{};
  s.min_drawdown = 0.0;  // t = 0: E_0 / E_0 - 1
  s.lowest_return = compat::infinity();
  s.highest_return = -compat::infinity();
  return s;
}

KOKKOS_INLINE_FUNCTION void add_sums(MetricSums& dst, const MetricSums& src) {
  dst.sum_excess += src.sum_excess;
  dst.sum_downside += src.sum_downside;
  dst.sum_turnover += src.sum_turnover;
  dst.exposed += src.exposed;
  dst.sum_cost += src.sum_cost;
  if (src.min_drawdown < dst.min_drawdown)
    dst.min_drawdown = src.min_drawdown;
  dst.closed += src.closed;
  dst.wins += src.wins;
  dst.losses += src.losses;
  dst.sum_wins += src.sum_wins;
  dst.sum_losses += src.sum_losses;
  if (src.lowest_return < dst.lowest_return)
    dst.lowest_return = src.lowest_return;
  if (src.highest_return > dst.highest_return)
    dst.highest_return = src.highest_return;
}

// What bar i adds to the sums: its net return r, position, trade and the drawdown after it.
KOKKOS_INLINE_FUNCTION void add_bar(MetricSums& s, const Bar& b, double drawdown, double pnl,
                                    double risk_free, double cost) {
  const double excess = b.net_return - risk_free;
  s.sum_excess += excess;
  if (b.net_return < s.lowest_return)
    s.lowest_return = b.net_return;
  if (b.net_return > s.highest_return)
    s.highest_return = b.net_return;
  if (excess < 0.0)
    s.sum_downside += excess * excess;
  const double traded = kmath::fabs(b.p - b.previous);
  s.sum_turnover += traded;
  s.sum_cost += cost * traded;
  if (b.p != 0.0)
    s.exposed += 1.0;
  if (drawdown < s.min_drawdown)
    s.min_drawdown = drawdown;
  if (!compat::is_nan(pnl)) {
    s.closed += 1.0;
    if (pnl > 0.0) {
      s.wins += 1.0;
      s.sum_wins += pnl;
    } else if (pnl < 0.0) {
      s.losses += 1.0;
      s.sum_losses += pnl;
    }
  }
}

// The metrics from the sums, the sum of squared deviations of the excess returns from their
// mean and the final equity E_N / E_0 (docs/METRICS.md).
KOKKOS_INLINE_FUNCTION WindowMetrics finish(const MetricSums& s, double squares,
                                            const SignedLog& final_equity, std::size_t n,
                                            double bars_per_year) {
  const double nan = compat::quiet_nan();
  WindowMetrics m;
  m.bars = static_cast<std::int64_t>(n);
  const double count = static_cast<double>(n);
  m.log_return = final_equity.sign > 0 ? final_equity.log
                                       : (final_equity.sign == 0 ? -compat::infinity() : nan);
  m.total_return = ratio_minus_one(final_equity, SignedLog{0.0, 1});
  m.cagr =
      n > 0 && final_equity.sign > 0 ? kmath::expm1(final_equity.log * bars_per_year / count) : nan;
  const double mean = n > 0 ? s.sum_excess / count : nan;
  // Returns that are all the same do not vary: their deviations from the mean computed of
  // them are rounding, not volatility.
  const bool constant = s.lowest_return == s.highest_return;
  const double stdev = n > 1 ? (constant ? 0.0 : kmath::sqrt(squares / (count - 1.0))) : nan;
  const double root_a = kmath::sqrt(bars_per_year);
  m.annual_volatility = stdev * root_a;
  m.sharpe = n > 1 && stdev > 0.0 ? mean / stdev * root_a : nan;
  const double downside = n > 0 ? kmath::sqrt(s.sum_downside / count) : 0.0;
  m.sortino = downside > 0.0 ? root_a * mean / downside : nan;
  m.max_drawdown = s.min_drawdown;
  m.calmar = s.min_drawdown < 0.0 ? m.cagr / kmath::fabs(s.min_drawdown) : nan;
  m.trades_closed = static_cast<std::int64_t>(s.closed);
  if (s.closed > 0.0) {
    m.win_rate = s.wins / s.closed;
    if (s.sum_losses < 0.0) {
      m.profit_factor = s.sum_wins / kmath::fabs(s.sum_losses);
    } else {
      m.profit_factor = s.sum_wins > 0.0 ? compat::infinity() : nan;
    }
    const double mean_win = s.wins > 0.0 ? s.sum_wins / s.wins : 0.0;
    const double mean_loss = s.losses > 0.0 ? s.sum_losses / s.losses : 0.0;
    m.expectancy = m.win_rate * mean_win - (1.0 - m.win_rate) * kmath::fabs(mean_loss);
  } else {
    m.win_rate = nan;
    m.profit_factor = nan;
    m.expectancy = nan;
  }
  m.turnover = n > 0 ? s.sum_turnover / count : nan;
  m.exposure = n > 0 ? s.exposed / count : nan;
  m.total_cost = s.sum_cost;
  return m;
}

// A thread's slot of its team's scratch: a segment (the scans), sums, squares.
union TeamSlot {
  Segment segment;
  MetricSums sums;
  double squares;
};

// What one block of a path leaves for the path's last block to finish: its sums, its squared
// deviations from its own mean excess return, and, in the path's last block, E_N / E_0.
struct BlockPartial {
  MetricSums sums;
  double squares;
  double final_log;
  int final_sign;
};

using TeamPolicy = Kokkos::TeamPolicy<ExecSpace>;
using TeamMember = TeamPolicy::member_type;

KOKKOS_INLINE_FUNCTION TeamSlot segment_slot(const Segment& segment) {
  TeamSlot slot;
  slot.segment = segment;
  return slot;
}

// The scans' combination of slots.
struct CombineSegments {
  KOKKOS_INLINE_FUNCTION TeamSlot operator()(const TeamSlot& earlier, const TeamSlot& later) const {
    return segment_slot(combine(earlier.segment, later.segment));
  }
};

// Slot t of the team joined with the slots above it in a pairwise tree over the thread ranks
// (the same order on every run and backend): on return slot 0 holds the whole team's.
template <class Join>
KOKKOS_INLINE_FUNCTION void tree_join(const TeamMember& team, TeamSlot* slots, const Join& join) {
  const int threads = team.team_size(), t = team.team_rank();
  int width = 1;
  while (width < threads)
    width *= 2;
  team.team_barrier();
  for (int half = width / 2; half > 0; half /= 2) {
    if (t < half && t + half < threads)
      join(slots[t], slots[t + half]);
    team.team_barrier();
  }
}

// The paths of a launch cut into blocks of kBlockBars consecutive bars, a team a block (path
// k's block b is team k blocks + b). The cut depends on the window alone, never on how many
// paths a launch takes: a path's numbers are the same evaluated alone or among others.
struct PathBlocks {
  Kokkos::View<const double*, DeviceMemory> close, positions;
  const std::int8_t* paths;  // path k at paths + k * stride
  std::size_t stride, begin, n, blocks;
  double cost;
  Segment* segments;  // each block's segment (BlockSegments), path k's at k * blocks

  KOKKOS_INLINE_FUNCTION BarInputs inputs(std::size_t k) const {
    return BarInputs{close, positions, paths + k * stride, begin, cost};
  }
  // Block b's bars: [first, last).
  KOKKOS_INLINE_FUNCTION std::size_t first(std::size_t b) const { return b * kBlockBars; }
  KOKKOS_INLINE_FUNCTION std::size_t last(std::size_t b) const {
    return (b + 1) * kBlockBars < n ? (b + 1) * kBlockBars : n;
  }
  // The segment of the team's thread runs of bars [lo, hi), scanned: on return slots[t]
  // holds runs 0 .. t.
  KOKKOS_INLINE_FUNCTION void scan_runs(const TeamMember& team, TeamSlot* slots,
                                        const BarInputs& in, std::size_t lo, std::size_t hi) const {
    const ThreadRun run = thread_run(hi - lo, team.team_size(), team.team_rank());
    Segment mine = identity_segment();
    for (std::size_t i = lo + run.lo; i < lo + run.hi; ++i)
      mine = combine(mine, in.segment(i, in(i)));
    slots[team.team_rank()] = segment_slot(mine);
    team_inclusive_scan(team, slots, CombineSegments{});
  }
};

// Each block's segment, for the blocks after it (when a path has more than one).
struct BlockSegments {
  PathBlocks at;

  KOKKOS_INLINE_FUNCTION void operator()(const TeamMember& team) const {
    const std::size_t k = static_cast<std::size_t>(team.league_rank()) / at.blocks;
    const std::size_t b = static_cast<std::size_t>(team.league_rank()) % at.blocks;
    TeamSlot* const slots = TeamScratch<TeamSlot>(team.team_scratch(0), team.team_size()).data();
    at.scan_runs(team, slots, at.inputs(k), at.first(b), at.last(b));
    if (team.team_rank() == 0)
      at.segments[k * at.blocks + b] = slots[team.team_size() - 1].segment;
  }
};

// The metrics of each path, a team a block: the segment of the bars before the block (the
// blocks before it, combined across the team), the block's thread runs scanned; each thread
// then walks its run from the segment before it, which gives every bar's equity, drawdown and
// closed trade, and adds up its sums; the block's sums, its mean excess return, then the
// squared deviations from it, are left for the path's last block to arrive, which finishes the
// path's metrics (the squares of the blocks combined around the path's mean). Optionally the
// per-bar net returns (a column a path), and for one path its equity, leave the kernel.
struct BlockMetrics {
  PathBlocks at;
  double risk_free, bars_per_year;
  BlockPartial* partials;  // path k's blocks' at k * blocks
  int* arrivals;           // path k's blocks arrived (0 before and after the launch)
  Kokkos::View<WindowMetrics*, DeviceMemory> results;  // path k's at first_slot + k
  std::size_t first_slot;
  double* returns;  // when not null: path k's r_1 .. r_N at returns + k * returns_stride
  std::size_t returns_stride;
  double* equity;  // when not null: E_1 .. E_N of path 0, and log |E_t| in log_equity
  double* log_equity;

  // The segment of the blocks before b, by the team.
  KOKKOS_INLINE_FUNCTION Segment before_block(const TeamMember& team, TeamSlot* slots,
                                              std::size_t k, std::size_t b) const {
    if (b == 0)
      return identity_segment();
    const ThreadRun run = thread_run(b, team.team_size(), team.team_rank());
    Segment mine = identity_segment();
    for (std::size_t j = run.lo; j < run.hi; ++j)
      mine = combine(mine, at.segments[k * at.blocks + j]);
    slots[team.team_rank()] = segment_slot(mine);
    team_inclusive_scan(team, slots, CombineSegments{});
    const Segment before = slots[team.team_size() - 1].segment;
    team.team_barrier();
    return before;
  }

  KOKKOS_INLINE_FUNCTION void operator()(const TeamMember& team) const {
    const int threads = team.team_size(), t = team.team_rank();
    const std::size_t k = static_cast<std::size_t>(team.league_rank()) / at.blocks;
    const std::size_t b = static_cast<std::size_t>(team.league_rank()) % at.blocks;
    TeamSlot* const slots = TeamScratch<TeamSlot>(team.team_scratch(0), threads).data();
    const BarInputs in = at.inputs(k);
    const std::size_t lo = at.first(b), hi = at.last(b), n = at.n;
    const Segment block_before = before_block(team, slots, k, b);
    // The runs before this thread's (a team of one thread has none: it skips the pass).
    if (threads > 1)
      at.scan_runs(team, slots, in, lo, hi);
    Segment before = combine(block_before, t == 0 ? identity_segment() : slots[t - 1].segment);
    team.team_barrier();
    // The run again, from the bars before it.
    const ThreadRun run = thread_run(hi - lo, threads, t);
    MetricSums sums = empty_sums();
    SignedLog final_equity{0.0, 0};
    const SignedLog one{0.0, 1};  // E_0 = 1 counts as a peak
    for (std::size_t i = lo + run.lo; i < lo + run.hi; ++i) {
      const Bar bar = in(i);
      // before holds bars 0 .. i-1: a trade closing here ends with the segment sum so far,
      // minus the cost of leaving it (c |p_{t-1}|, charged at this bar).
      const double pnl =
          bar.closes ? before.trade - at.cost * kmath::fabs(bar.previous) : compat::quiet_nan();
      before = combine(before, in.segment(i, bar));
      const SignedLog e = prod_of(before);
      const SignedLog peak = less(high_of(before), one) ? one : high_of(before);
      add_bar(sums, bar, ratio_minus_one(e, peak), pnl, risk_free, at.cost);
      if (returns != nullptr)
        returns[k * returns_stride + i] = bar.net_return;
      if (equity != nullptr) {
        equity[i] = value_of(e);  // +-inf beyond the range of a double; log_equity holds it
        log_equity[i] = e.log;
      }
      if (i == n - 1) {  // E_N / E_0, signed as the double E_N is
        const double value = value_of(e);
        final_equity = SignedLog{e.log, value > 0.0 ? 1 : (value < 0.0 ? -1 : 0)};
      }
    }
    slots[t].sums = sums;
    tree_join(team, slots,
              [](TeamSlot& into, const TeamSlot& from) { add_sums(into.sums, from.sums); });
    const MetricSums block = slots[0].sums;
    const double mean = block.sum_excess / static_cast<double>(hi - lo);
    team.team_barrier();
    double squares = 0.0;
    for (std::size_t i = lo + run.lo; i < lo + run.hi; ++i) {
      const double d = in(i).net_return - risk_free - mean;
      squares += d * d;
    }
    slots[t].squares = squares;
    tree_join(team, slots,
              [](TeamSlot& into, const TeamSlot& from) { into.squares += from.squares; });
    BlockPartial* const path = partials + k * at.blocks;
    if (t == 0) {
      path[b].sums = block;
      path[b].squares = slots[0].squares;
    }
    if (run.lo < run.hi && lo + run.hi == n) {  // this run ends the path
      path[b].final_log = final_equity.log;
      path[b].final_sign = final_equity.sign;
    }
    if (last_to_arrive(team, arrivals + k, static_cast<int>(at.blocks)))
      finish_path(team, slots, path, k);
  }

  // The path's metrics from its blocks' partials: their sums, and their squares combined
  // around the path's mean (each block's own squares and its count times the square of its
  // mean's distance from the path's).
  KOKKOS_INLINE_FUNCTION void finish_path(const TeamMember& team, TeamSlot* slots,
                                          const BlockPartial* path, std::size_t k) const {
    const int t = team.team_rank();
    const ThreadRun run = thread_run(at.blocks, team.team_size(), t);
    MetricSums sums = empty_sums();
    for (std::size_t j = run.lo; j < run.hi; ++j)
      add_sums(sums, path[j].sums);
    slots[t].sums = sums;
    tree_join(team, slots,
              [](TeamSlot& into, const TeamSlot& from) { add_sums(into.sums, from.sums); });
    const MetricSums total = slots[0].sums;
    const double mean = total.sum_excess / static_cast<double>(at.n);
    team.team_barrier();
    double squares = 0.0;
    for (std::size_t j = run.lo; j < run.hi; ++j) {
      const double count = static_cast<double>(at.last(j) - at.first(j));
      const double d = path[j].sums.sum_excess / count - mean;
      squares += path[j].squares + count * d * d;
    }
    slots[t].squares = squares;
    tree_join(team, slots,
              [](TeamSlot& into, const TeamSlot& from) { into.squares += from.squares; });
    if (t == 0) {
      const BlockPartial& last = path[at.blocks - 1];
      results(first_slot + k) = finish(
          total, slots[0].squares, SignedLog{last.final_log, last.final_sign}, at.n, bars_per_year);
    }
  }
};

}  // namespace

int evaluation_team_size(const ExecSpace& space) {
#if defined(DQNTRADER_BACKEND_CUDA)
  (void)space;
  return 256;
#else
  return space.concurrency() >= 2 ? 2 : 1;
#endif
}

MetricsEngine::MetricsEngine(const ExecSpace& space,
                             Kokkos::View<const double*, DeviceMemory> close,
                             const BacktestConfig& config, std::size_t max_returns,
                             std::size_t max_paths)
    : m_config(config),
      m_close(close),
      m_positions(Kokkos::view_alloc(space, std::string("dqntrader::eval::positions")),
                  config.positions.size()),
      m_max_returns(max_returns) {
  const std::size_t teams = max_paths * ((max_returns + kBlockBars - 1) / kBlockBars);
  auto workspace = [&](const char* label, std::size_t bytes) {
    return Kokkos::View<unsigned char*, DeviceMemory>(
        Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string(label)), bytes);
  };
  m_segments = workspace("dqntrader::eval::block_segments", teams * sizeof(Segment));
  m_partials = workspace("dqntrader::eval::block_partials", teams * sizeof(BlockPartial));
  m_arrivals = Kokkos::View<int*, DeviceMemory>(
      Kokkos::view_alloc(space, std::string("dqntrader::eval::block_arrivals")), max_paths);
  validate(config);
  auto host = Kokkos::create_mirror_view(m_positions);
  for (std::size_t i = 0; i < config.positions.size(); ++i)
    host(i) = config.positions[i];
  Kokkos::deep_copy(space, m_positions, host);
  compat::fence(space, "dqntrader::eval::MetricsEngine: the host mirror is released on return");
}

void MetricsEngine::launch(const ExecSpace& space, const Paths& paths, std::size_t begin,
                           const Kokkos::View<WindowMetrics*, DeviceMemory>& results,
                           std::size_t first_slot, double* returns, std::size_t returns_stride,
                           double* equity, double* log_equity) const {
  const std::size_t n = paths.returns;
  if (n == 0 || n > m_max_returns)
    throw InputError("window of " + std::to_string(n) + " returns; the engine serves 1 to " +
                     std::to_string(m_max_returns));
  if (begin + n + 1 > m_close.extent(0))
    throw InputError("window runs past the last bar");
  if (paths.count == 0 || paths.count > m_arrivals.extent(0) ||
      first_slot + paths.count > results.extent(0) ||
      (paths.count - 1) * paths.stride + n > paths.decisions.extent(0))
    throw InputError(std::to_string(paths.count) + " paths; the engine takes 1 to " +
                     std::to_string(m_arrivals.extent(0)) +
                     ", within the results and decisions given");
  const std::size_t blocks = (n + kBlockBars - 1) / kBlockBars, teams = paths.count * blocks;
  const PathBlocks at{m_close,      m_positions,   paths.decisions.data(),
                      paths.stride, begin,         n,
                      blocks,       m_config.cost, reinterpret_cast<Segment*>(m_segments.data())};
  const int threads = evaluation_team_size(space);
  const std::size_t scratch = TeamScratch<TeamSlot>::shmem_size(threads);
  if (blocks > 1) {
    TeamPolicy policy(space, static_cast<int>(teams), threads);
    policy.set_scratch_size(0, Kokkos::PerTeam(scratch));
    Kokkos::parallel_for("dqntrader::eval::block_segments", recordable(policy), BlockSegments{at});
  }
  const BlockMetrics kernel{at,
                            m_config.risk_free,
                            m_config.bars_per_year,
                            reinterpret_cast<BlockPartial*>(m_partials.data()),
                            m_arrivals.data(),
                            results,
                            first_slot,
                            returns,
                            returns_stride,
                            equity,
                            log_equity};
  TeamPolicy policy(space, static_cast<int>(teams), threads);
  policy.set_scratch_size(0, Kokkos::PerTeam(scratch));
  Kokkos::parallel_for("dqntrader::eval::path_metrics", recordable(policy), kernel);
}

void MetricsEngine::enqueue(const ExecSpace& space, std::size_t begin, const Paths& paths,
                            const Kokkos::View<WindowMetrics*, DeviceMemory>& results,
                            std::size_t first_slot) const {
  launch(space, paths, begin, results, first_slot, nullptr, 0, nullptr, nullptr);
}

void MetricsEngine::enqueue_returns(const ExecSpace& space, std::size_t begin, const Paths& paths,
                                    const Kokkos::View<WindowMetrics*, DeviceMemory>& results,
                                    double* returns, std::size_t returns_stride) const {
  launch(space, paths, begin, results, 0, returns, returns_stride, nullptr, nullptr);
}

PathDetail MetricsEngine::detail(const ExecSpace& space, std::size_t begin,
                                 const Kokkos::View<const std::int8_t*, DeviceMemory>& path) const {
  const std::size_t n = path.extent(0);
  auto alloc = [&](const char* label) {
    return Kokkos::View<double*, DeviceMemory>(
        Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string(label)), n);
  };
  const auto returns = alloc("dqntrader::eval::returns");
  const auto equity = alloc("dqntrader::eval::equity");
  const auto log_equity = alloc("dqntrader::eval::log_equity");
  Kokkos::View<WindowMetrics*, DeviceMemory> scratch(
      Kokkos::view_alloc(space, std::string("dqntrader::eval::detail_metrics")), 1);
  launch(space, Paths{path, n, 1, n}, begin, scratch, 0, returns.data(), 0, equity.data(),
         log_equity.data());
  auto copy = [&](const Kokkos::View<double*, DeviceMemory>& v) {
    auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
    return std::vector<double>(host.data(), host.data() + n);
  };
  PathDetail detail;
  detail.returns = copy(returns);
  detail.equity = copy(equity);
  detail.equity.insert(detail.equity.begin(), 1.0);
  detail.log_equity = copy(log_equity);
  detail.log_equity.insert(detail.log_equity.begin(), 0.0);
  auto path_host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), path);
  detail.positions.resize(n);
  for (std::size_t i = 0; i < n; ++i)
    detail.positions[i] = m_config.positions[path_host(i)];
  return detail;
}

}  // namespace dqntrader::eval

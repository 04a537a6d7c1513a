#include "dqntrader/eval/metrics_engine.hpp"

#include <string>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/kokkos_compat.hpp"

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
// Composition is not commutative, and Kokkos' scans may join partial results in either
// order (the CUDA backend does), so each segment carries the index of its first bar and
// combine() orders its operands by it: the join is then commutative by construction.
struct Segment {
  double prod_log, high_log, low_log, trade;
  long long first;  // index of the segment's first bar; the empty segment has max
  int prod_sign, high_sign, low_sign, restart;
};

constexpr long long empty_first = 0x7fffffffffffffffLL;

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
  return Segment{0.0, inf, inf, 0.0, empty_first, 1, -1, 1, 0};
}

KOKKOS_INLINE_FUNCTION Segment combine(const Segment& x, const Segment& y) {
  const Segment& earlier = x.first <= y.first ? x : y;
  const Segment& later = x.first <= y.first ? y : x;
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
  s.first = earlier.first;
  return s;
}

template <class V>
KOKKOS_INLINE_FUNCTION Segment load(V& v) {
  return Segment{v.prod_log,  v.high_log,  v.low_log,  v.trade,  v.first,
                 v.prod_sign, v.high_sign, v.low_sign, v.restart};
}

template <class V>
KOKKOS_INLINE_FUNCTION void assign(V& v, const Segment& s) {
  v.prod_log = s.prod_log;
  v.high_log = s.high_log;
  v.low_log = s.low_log;
  v.trade = s.trade;
  v.first = s.first;
  v.prod_sign = s.prod_sign;
  v.high_sign = s.high_sign;
  v.low_sign = s.low_sign;
  v.restart = s.restart;
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
  Kokkos::View<const std::int8_t*, DeviceMemory> path;
  std::size_t begin;
  double cost;

  KOKKOS_INLINE_FUNCTION Bar operator()(const std::size_t i) const {
    Bar b;
    b.p = positions(path(i));
    b.previous = i == 0 ? 0.0 : positions(path(i - 1));
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
};

// The inclusive scan over bars: equity (and its logarithm), drawdown and the pnl of every
// trade that closes.
struct EquityScan {
  using value_type = Segment;
  BarInputs in;
  Kokkos::View<double*, DeviceMemory> returns, equity, log_equity, drawdown, trade_pnl;
  std::size_t n;

  KOKKOS_INLINE_FUNCTION void init(Segment& v) const { v = identity_segment(); }
  KOKKOS_INLINE_FUNCTION void join(DQNTRADER_JOIN_VOLATILE Segment& dst,
                                   const DQNTRADER_JOIN_VOLATILE Segment& src) const {
    assign(dst, combine(load(dst), load(src)));
  }
  KOKKOS_INLINE_FUNCTION void operator()(const std::size_t i, Segment& update,
                                         const bool final) const {
    const Bar b = in(i);
    if (final) {
      // update holds bars 0 .. i-1: a trade closing here ends with the segment sum so far,
      // minus the cost of leaving it (c |p_{t-1}|, charged at this bar).
      trade_pnl(i) =
          b.closes ? update.trade - in.cost * kmath::fabs(b.previous) : compat::quiet_nan();
    }
    const SignedLog x = growth(b.net_return);
    Segment element;
    element.prod_log = element.high_log = element.low_log = x.log;
    element.prod_sign = element.high_sign = element.low_sign = x.sign;
    // The bar's contribution to the trade held over it: the price move, minus the part of
    // this bar's cost that belongs to that trade (on a flip, c |p_t| for the new trade).
    const double flip_cost = in.cost * kmath::fabs(b.p);
    element.trade = b.p == 0.0 ? 0.0 : b.p * in.price_return(i) - (b.closes ? flip_cost : b.cost);
    element.restart = b.opens ? 1 : 0;
    element.first = static_cast<long long>(i);
    const Segment inclusive = combine(update, element);
    update = inclusive;
    if (final) {
      returns(i) = b.net_return;
      const SignedLog e = prod_of(inclusive);
      equity(i) = value_of(e);  // +-inf beyond the range of a double; log_equity holds it
      log_equity(i) = e.log;
      const SignedLog one{0.0, 1};  // E_0 = 1 counts
      const SignedLog peak = less(high_of(inclusive), one) ? one : high_of(inclusive);
      drawdown(i) = ratio_minus_one(e, peak);
    }
  }
};

template <class V>
KOKKOS_INLINE_FUNCTION void add_sums(V& dst, const MetricSums& src) {
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

template <class V>
KOKKOS_INLINE_FUNCTION MetricSums load_sums(V& v) {
  MetricSums s{};
  s.sum_excess = v.sum_excess;
  s.sum_downside = v.sum_downside;
  s.sum_turnover = v.sum_turnover;
  s.exposed = v.exposed;
  s.sum_cost = v.sum_cost;
  s.min_drawdown = v.min_drawdown;
  s.closed = v.closed;
  s.wins = v.wins;
  s.losses = v.losses;
  s.sum_wins = v.sum_wins;
  s.sum_losses = v.sum_losses;
  s.lowest_return = v.lowest_return;
  s.highest_return = v.highest_return;
  return s;
}

// First pass over the scanned bars: every sum that needs no mean.
struct FirstPass {
  using value_type = MetricSums;
  BarInputs in;
  Kokkos::View<const double*, DeviceMemory> returns, drawdown, trade_pnl;
  double risk_free;

  KOKKOS_INLINE_FUNCTION void init(MetricSums& s) const {
    s = MetricSums{};
    s.min_drawdown = 0.0;  // t = 0: E_0 / E_0 - 1
    s.lowest_return = compat::infinity();
    s.highest_return = -compat::infinity();
  }
  KOKKOS_INLINE_FUNCTION void join(DQNTRADER_JOIN_VOLATILE MetricSums& dst,
                                   const DQNTRADER_JOIN_VOLATILE MetricSums& src) const {
    add_sums(dst, load_sums(src));
  }
  KOKKOS_INLINE_FUNCTION void operator()(const std::size_t i, MetricSums& s) const {
    const double excess = returns(i) - risk_free;
    s.sum_excess += excess;
    if (returns(i) < s.lowest_return)
      s.lowest_return = returns(i);
    if (returns(i) > s.highest_return)
      s.highest_return = returns(i);
    if (excess < 0.0)
      s.sum_downside += excess * excess;
    const double p = in.positions(in.path(i));
    const double previous = i == 0 ? 0.0 : in.positions(in.path(i - 1));
    const double traded = kmath::fabs(p - previous);
    s.sum_turnover += traded;
    s.sum_cost += in.cost * traded;
    if (p != 0.0)
      s.exposed += 1.0;
    if (drawdown(i) < s.min_drawdown)
      s.min_drawdown = drawdown(i);
    const double pnl = trade_pnl(i);
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
};

// Second pass: squared deviations from the mean the first pass left on the device.
struct SecondPass {
  using value_type = double;
  Kokkos::View<const double*, DeviceMemory> returns;
  Kokkos::View<const MetricSums, DeviceMemory> sums;
  double risk_free;
  double count;

  KOKKOS_INLINE_FUNCTION void operator()(const std::size_t i, double& squares) const {
    const double d = returns(i) - risk_free - sums().sum_excess / count;
    squares += d * d;
  }
};

struct Finalize {
  Kokkos::View<const MetricSums, DeviceMemory> sums;
  Kokkos::View<const double*, DeviceMemory> equity, log_equity;
  Kokkos::View<const double, DeviceMemory> squares;
  Kokkos::View<WindowMetrics*, DeviceMemory> results;
  std::size_t slot, n;
  double bars_per_year;

  KOKKOS_INLINE_FUNCTION void operator()(const int) const {
    const double nan = compat::quiet_nan();
    const MetricSums s = sums();
    WindowMetrics m;
    m.bars = static_cast<std::int64_t>(n);
    const double count = static_cast<double>(n);
    // E_N / E_0 from its sign and logarithm: finite metrics wherever the true values are.
    const SignedLog final_equity = n > 0 ? SignedLog{log_equity(n - 1), equity(n - 1) > 0.0   ? 1
                                                                        : equity(n - 1) < 0.0 ? -1
                                                                                              : 0}
                                         : SignedLog{0.0, 1};
    m.log_return = final_equity.sign > 0 ? final_equity.log
                                         : (final_equity.sign == 0 ? -compat::infinity() : nan);
    m.total_return = ratio_minus_one(final_equity, SignedLog{0.0, 1});
    m.cagr = n > 0 && final_equity.sign > 0 ? kmath::expm1(final_equity.log * bars_per_year / count)
                                            : nan;
    const double mean = n > 0 ? s.sum_excess / count : nan;
    // Returns that are all the same do not vary: their deviations from the mean computed of
    // them are rounding, not volatility.
    const bool constant = s.lowest_return == s.highest_return;
    const double stdev = n > 1 ? (constant ? 0.0 : kmath::sqrt(squares() / (count - 1.0))) : nan;
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
    results(slot) = m;
  }
};

}  // namespace

MetricsEngine::MetricsEngine(const ExecSpace& space,
                             Kokkos::View<const double*, DeviceMemory> close,
                             const BacktestConfig& config, std::size_t max_returns)
    : m_config(config),
      m_close(close),
      m_positions(Kokkos::view_alloc(space, std::string("dqntrader::eval::positions")),
                  config.positions.size()),
      m_returns(Kokkos::view_alloc(space, std::string("dqntrader::eval::returns")), max_returns),
      m_equity(Kokkos::view_alloc(space, std::string("dqntrader::eval::equity")), max_returns),
      m_log_equity(Kokkos::view_alloc(space, std::string("dqntrader::eval::log_equity")),
                   max_returns),
      m_drawdown(Kokkos::view_alloc(space, std::string("dqntrader::eval::drawdown")), max_returns),
      m_trade_pnl(Kokkos::view_alloc(space, std::string("dqntrader::eval::trade_pnl")),
                  max_returns),
      m_sums(Kokkos::view_alloc(space, std::string("dqntrader::eval::sums"))),
      m_squares(Kokkos::view_alloc(space, std::string("dqntrader::eval::squares"))) {
  validate(config);
  auto host = Kokkos::create_mirror_view(m_positions);
  for (std::size_t i = 0; i < config.positions.size(); ++i)
    host(i) = config.positions[i];
  Kokkos::deep_copy(space, m_positions, host);
  compat::fence(space, "dqntrader::eval::MetricsEngine: the host mirror is released on return");
}

void MetricsEngine::scan(const ExecSpace& space, std::size_t begin,
                         const Kokkos::View<const std::int8_t*, DeviceMemory>& path,
                         const Kokkos::View<double*, DeviceMemory>& returns) const {
  const std::size_t n = path.extent(0);
  if (n > max_returns())
    throw InputError("window of " + std::to_string(n) + " returns exceeds the engine's " +
                     std::to_string(max_returns()));
  if (begin + n + 1 > m_close.extent(0))
    throw InputError("window runs past the last bar");
  const BarInputs in{m_close, m_positions, path, begin, m_config.cost};
  auto equity = Kokkos::subview(m_equity, std::make_pair(std::size_t{0}, n));
  auto log_equity = Kokkos::subview(m_log_equity, std::make_pair(std::size_t{0}, n));
  auto drawdown = Kokkos::subview(m_drawdown, std::make_pair(std::size_t{0}, n));
  auto trade_pnl = Kokkos::subview(m_trade_pnl, std::make_pair(std::size_t{0}, n));
  Kokkos::parallel_scan("dqntrader::eval::equity_scan", Kokkos::RangePolicy<ExecSpace>(space, 0, n),
                        EquityScan{in, returns, equity, log_equity, drawdown, trade_pnl, n});
}

void MetricsEngine::enqueue_returns(const ExecSpace& space, std::size_t begin,
                                    const Kokkos::View<const std::int8_t*, DeviceMemory>& path,
                                    double* returns) const {
  scan(space, begin, path, Kokkos::View<double*, DeviceMemory>(returns, path.extent(0)));
}

void MetricsEngine::enqueue(const ExecSpace& space, std::size_t begin,
                            const Kokkos::View<const std::int8_t*, DeviceMemory>& path,
                            const Kokkos::View<WindowMetrics*, DeviceMemory>& results,
                            std::size_t slot) const {
  const std::size_t n = path.extent(0);
  auto returns = Kokkos::subview(m_returns, std::make_pair(std::size_t{0}, n));
  scan(space, begin, path, returns);
  const BarInputs in{m_close, m_positions, path, begin, m_config.cost};
  auto equity = Kokkos::subview(m_equity, std::make_pair(std::size_t{0}, n));
  auto log_equity = Kokkos::subview(m_log_equity, std::make_pair(std::size_t{0}, n));
  auto drawdown = Kokkos::subview(m_drawdown, std::make_pair(std::size_t{0}, n));
  auto trade_pnl = Kokkos::subview(m_trade_pnl, std::make_pair(std::size_t{0}, n));
  Kokkos::parallel_reduce("dqntrader::eval::first_pass",
                          Kokkos::RangePolicy<ExecSpace>(space, 0, n),
                          FirstPass{in, returns, drawdown, trade_pnl, m_config.risk_free}, m_sums);
  Kokkos::parallel_reduce(
      "dqntrader::eval::second_pass", Kokkos::RangePolicy<ExecSpace>(space, 0, n),
      SecondPass{returns, m_sums, m_config.risk_free, static_cast<double>(n)}, m_squares);
  Kokkos::parallel_for(
      "dqntrader::eval::finalize", Kokkos::RangePolicy<ExecSpace>(space, 0, 1),
      Finalize{m_sums, equity, log_equity, m_squares, results, slot, n, m_config.bars_per_year});
}

PathDetail MetricsEngine::detail(const ExecSpace& space, std::size_t begin,
                                 const Kokkos::View<const std::int8_t*, DeviceMemory>& path) const {
  Kokkos::View<WindowMetrics*, DeviceMemory> scratch(
      Kokkos::view_alloc(space, std::string("dqntrader::eval::detail_metrics")), 1);
  enqueue(space, begin, path, scratch, 0);
  const std::size_t n = path.extent(0);
  auto copy = [&](const Kokkos::View<double*, DeviceMemory>& v) {
    auto host = Kokkos::create_mirror_view_and_copy(
        Kokkos::HostSpace(), Kokkos::subview(v, std::make_pair(std::size_t{0}, n)));
    return std::vector<double>(host.data(), host.data() + n);
  };
  PathDetail detail;
  detail.returns = copy(m_returns);
  detail.equity = copy(m_equity);
  detail.equity.insert(detail.equity.begin(), 1.0);
  detail.log_equity = copy(m_log_equity);
  detail.log_equity.insert(detail.log_equity.begin(), 0.0);
  auto path_host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), path);
  detail.positions.resize(n);
  for (std::size_t i = 0; i < n; ++i)
    detail.positions[i] = m_config.positions[path_host(i)];
  return detail;
}

}  // namespace dqntrader::eval

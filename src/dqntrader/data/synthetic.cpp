#include "dqntrader/data/synthetic.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/random.hpp"

namespace dqntrader::data {

namespace {

struct Regime {
  double drift, phi, sigma;
};

// trend up, trend down, mean reversion, volatility burst (daily-bar magnitudes)
constexpr Regime regimes[] = {
    {0.0008, 0.0, 0.009}, {-0.0008, 0.0, 0.009}, {0.0, -0.25, 0.007}, {0.0, 0.0, 0.03}};

}  // namespace

void check(const SynthConfig& config) {
  if (config.bars < 2)
    throw InputError(field("bars") + ": synthetic data needs at least 2 bars");
  auto fraction = [](double v, const char* name) {
    if (!(v >= 0.0 && v <= 1.0))
      throw InputError(field(name) + " must lie in [0, 1]");
  };
  fraction(config.ofi_signal, "ofi-signal");
  fraction(config.persistence, "persistence");
  fraction(config.jump_probability, "jump-probability");
  if (!(config.initial_price > 0.0 && std::isfinite(config.initial_price)))
    throw InputError(field("initial-price") + " must be positive");
  if (config.interval_ms <= 0)
    throw InputError(field("interval-seconds") + " must be at least a millisecond");
  if (config.symbols < 1)
    throw InputError(field("symbols") + " must be at least 1");
}

namespace {

// The market of config, its log returns plus common (when given, one value a bar).
Bars generate(const SynthConfig& config, const std::vector<double>* common) {
  HostRng rng(config.seed);
  const std::size_t n = config.bars;
  Bars bars;
  bars.source = "synthetic(seed=" + std::to_string(config.seed) + ")";
  bars.timestamp_ms.resize(n);
  bars.open.resize(n);
  bars.high.resize(n);
  bars.low.resize(n);
  bars.close.resize(n);
  bars.volume.resize(n);
  bars.ofi.resize(n);

  const double rho = config.ofi_signal;
  const double noise_weight = std::sqrt(1.0 - rho * rho);
  int regime = static_cast<int>(rng.below(4));
  double previous_return = 0.0;
  double previous_close = config.initial_price;
  double shock = rng.normal();  // e(t+1) for the bar about to be made
  for (std::size_t t = 0; t < n; ++t) {
    const Regime& r = regimes[regime];
    // Bar t closes with the return drawn for it; ofi(t) looks at the shock of bar t+1.
    double log_return = t == 0 ? 0.0 : r.drift + r.phi * previous_return + r.sigma * shock;
    if (t > 0 && rng.uniform() < config.jump_probability)
      log_return += config.jump_scale * rng.normal();
    if (common != nullptr && t > 0)
      log_return += (*common)[t];
    log_return = std::clamp(log_return, -0.5, 0.5);
    const double close = previous_close * std::exp(log_return);
    const double open = previous_close * std::exp(0.1 * r.sigma * rng.normal());
    const double top = std::max(open, close), bottom = std::min(open, close);
    bars.open[t] = open;
    bars.close[t] = close;
    bars.high[t] = top * std::exp(0.5 * r.sigma * std::fabs(rng.normal()));
    bars.low[t] = bottom * std::exp(-0.5 * r.sigma * std::fabs(rng.normal()));
    bars.volume[t] = 1e6 * (regime == 3 ? 3.0 : 1.0) * std::exp(0.4 * rng.normal());
    bars.timestamp_ms[t] = config.start_ms + static_cast<std::int64_t>(t) * config.interval_ms;

    if (rng.uniform() > config.persistence) {
      regime = (regime + 1 + static_cast<int>(rng.below(3))) % 4;
    }
    const double next_shock = rng.normal();
    bars.ofi[t] = rho * next_shock + noise_weight * rng.normal();
    shock = next_shock;
    previous_return = log_return;
    previous_close = close;
  }
  return bars;
}

}  // namespace

Bars generate_bars(const SynthConfig& config) {
  check(config);
  return generate(config, nullptr);
}

SynthPanel synth_panel(const SynthConfig& config) {
  check(config);
  SynthPanel panel;
  if (config.symbols <= 1) {
    panel.symbols = {"S1"};
    panel.bars = {generate(config, nullptr)};
    panel.ofi_signal = {config.ofi_signal};
    return panel;
  }
  const std::size_t count = config.symbols;
  const std::size_t planted = (count + 1) / 2;
  const std::size_t digits = std::max<std::size_t>(2, std::to_string(count).size());
  HostRng factor_rng(mix64(config.seed ^ 0xFAC7041ull));
  std::vector<double> common(config.bars);
  for (double& f : common)
    f = 0.006 * factor_rng.normal();
  for (std::size_t i = 0; i < count; ++i) {
    SynthConfig own = config;
    own.seed = mix64(config.seed + 0x9E3779B97F4A7C15ull * (i + 1));
    own.ofi_signal = i < planted ? config.ofi_signal *
                                       (1.0 - static_cast<double>(i) / static_cast<double>(planted))
                                 : 0.0;
    std::ostringstream numbered;
    numbered << 'S' << std::setw(static_cast<int>(digits)) << std::setfill('0') << i + 1;
    const std::string name = numbered.str();
    Bars bars = generate(own, &common);
    bars.source = "synthetic(seed=" + std::to_string(config.seed) + ", " + name + ")";
    panel.symbols.push_back(name);
    panel.bars.push_back(std::move(bars));
    panel.ofi_signal.push_back(own.ofi_signal);
  }
  return panel;
}

}  // namespace dqntrader::data

// Synthetic bars with a planted, learnable signal: the built-in default data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "dqntrader/data/bars.hpp"

namespace dqntrader::data {

/// Price paths switch between four regimes (a Markov chain that stays put with
/// probability `persistence` per bar): trend up, trend down, mean reversion, volatility
/// burst; jumps arrive at random on top. The log return of bar t+1 is
///   r(t+1) = drift + phi * r(t) + sigma * e(t+1) + jump,
/// and the order-flow imbalance published with bar t is
///   ofi(t) = rho * e(t+1) + sqrt(1 - rho^2) * n(t),   n, e independent N(0, 1),
/// so ofi(t) predicts the next bar's shock with correlation rho (ofi_signal): real, but
/// noisy. Volume is log-normal and rises in volatility bursts.
struct SynthConfig {
  std::size_t bars = 20000;
  std::uint64_t seed = 1;
  std::int64_t start_ms = 946857600000;  // 2000-01-03T00:00:00Z
  std::int64_t interval_ms = 86400000;   // one bar a day
  double initial_price = 100.0;
  double ofi_signal = 0.3;
  double persistence = 0.985;
  double jump_probability = 0.004;
  double jump_scale = 0.04;
  // Instruments (synth_panel): 1 is the market above; several share a common factor.
  std::size_t symbols = 1;
};

/// InputError naming the field when a setting is out of its range.
void check(const SynthConfig& config);

/// Generates bars (InputError as check()); the same config gives the same bars on every machine.
Bars generate_bars(const SynthConfig& config);

/// A universe of config.symbols instruments, named S01, S02, ... (zero-padded to the count's
/// digits), on the same timestamps. Each is the market above with a seed of its own, its log
/// return plus a common factor f(t) ~ N(0, 0.006^2) shared by all (from the config's seed);
/// the first ceil(S/2) carry a planted ofi signal of decreasing strength,
/// rho_i = ofi_signal * (1 - i / ceil(S/2)) for i = 0 .. ceil(S/2) - 1, the others none
/// (rho = 0). One instrument (symbols = 1) is generate_bars(config) itself.
struct SynthPanel {
  std::vector<std::string> symbols;
  std::vector<Bars> bars;
  std::vector<double> ofi_signal;  // each instrument's rho
};
SynthPanel synth_panel(const SynthConfig& config);

}  // namespace dqntrader::data

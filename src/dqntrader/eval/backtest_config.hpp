// What a backtest needs besides the decisions: the action set, costs, annualisation.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "dqntrader/core/precision.hpp"

namespace dqntrader::eval {

/// Positions are held from a bar's close to the next one's (docs/METRICS.md).
struct BacktestConfig {
  /// Target position of each action; must hold 0 (the position before the first bar)
  /// and be distinct, at most 8 entries.
  std::vector<double> positions = {-1.0, 0.0, 1.0};
  double cost = 0.0005;            // fees plus slippage, a fraction of traded notional
  double bars_per_year = 252.0;    // A: 252 for daily equity bars, 98,280 for US minute bars
  double risk_free = 0.0;          // risk-free return per bar
  std::size_t chunk_bars = 32768;  // bars per network pass (bounds device memory)
  /// The network's arithmetic. fp32 on every backend: the decision a policy file defines
  /// (docs/POLICY.md) and `export` writes, so that what a backtest, a validation or act
  /// reports is what the deployed policy does; bf16 and tf32 are faster on CUDA and may
  /// decide otherwise where Q-values nearly tie.
  Precision precision = Precision::fp32;
  /// The index of position 0 in positions.
  std::size_t flat_index() const;
};

/// Throws InputError when a setting is out of range.
void validate(const BacktestConfig& config);

/// Bars [begin, end) of the data: decisions are taken at bars begin .. end-2 and earn the
/// returns of bars begin+1 .. end-1, so a window of n bars yields n-1 bar returns.
struct BarRange {
  std::size_t begin = 0, end = 0;
  std::size_t returns() const { return end > begin ? end - begin - 1 : 0; }
};

}  // namespace dqntrader::eval

#include "dqntrader/eval/backtest_config.hpp"

#include <cmath>

#include "dqntrader/core/error.hpp"

namespace dqntrader::eval {

std::size_t BacktestConfig::flat_index() const {
  for (std::size_t i = 0; i < positions.size(); ++i) {
    if (positions[i] == 0.0)
      return i;
  }
  throw InputError("the positions must include 0 (flat)");
}

void validate(const BacktestConfig& config) {
  if (config.positions.size() < 2 || config.positions.size() > 8) {
    throw InputError("between 2 and 8 positions are supported, " +
                     std::to_string(config.positions.size()) + " given");
  }
  for (std::size_t i = 0; i < config.positions.size(); ++i) {
    if (!std::isfinite(config.positions[i]))
      throw InputError("positions must be finite");
    for (std::size_t j = 0; j < i; ++j) {
      if (config.positions[i] == config.positions[j])
        throw InputError("positions must be distinct");
    }
  }
  config.flat_index();
  if (!(config.cost >= 0.0 && config.cost < 1.0))
    throw InputError(field("cost") + " must lie in [0, 1)");
  if (!(config.bars_per_year > 0.0 && std::isfinite(config.bars_per_year))) {
    throw InputError(field("bars-per-year") + " must be positive");
  }
  if (!(std::fabs(config.risk_free) < 1.0))
    throw InputError(field("risk-free") + " (a return per bar) must lie in (-1, 1)");
  if (config.chunk_bars == 0)
    throw InputError(field("chunk-bars") + " must be at least 1");
}

}  // namespace dqntrader::eval

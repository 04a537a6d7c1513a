// WindowMetrics as JSON, with exactly the keys docs/METRICS.md lists, and each key's one-line
// definition (the tables of `backtest`, README and `dqntrader settings --metrics`).
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>

#include "dqntrader/eval/window_metrics.hpp"

namespace dqntrader::eval {

/// NaN is written as null, +inf as the string "inf" (and -inf as "-inf": io::json_number).
nlohmann::json to_json(const WindowMetrics& metrics);

/// The metric keys in report order, each with its one-line definition.
struct MetricDefinition {
  const char* key;
  const char* definition;
};
const MetricDefinition* metric_definitions(std::size_t& count);

}  // namespace dqntrader::eval

// The features of a model, as a policy file records them, and their training-window
// statistics: host-only descriptions (the device computes them: data/features.hpp).
//
// For bar t (docs/FEATURES.md gives the exact formulas):
//   ret_j     log(C[t-j] / C[t-j-1])              j = 0 .. return_window-1
//   vol       sample standard deviation of the last volatility_window log returns
//   ofi_j     ofi[t-j]                             j = 0 .. ofi_window-1 (with an ofi column)
//   <name>    the extra column's value at t        for each selected extra column
// Each is then standardized, (x - mean) / std, with the mean and standard deviation of
// the training window only; the same statistics are applied everywhere else.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "dqntrader/data/bars.hpp"

namespace dqntrader::data {

/// What the user asks for.
struct FeatureConfig {
  int return_window = 16;
  int volatility_window = 16;
  int ofi_window = 4;  // used only when the data has an ofi column
};

/// The features of one model, resolved against data: what a policy file records.
struct FeatureSpec {
  int return_window = 16;
  int volatility_window = 16;
  int ofi_window = 0;
  std::vector<std::string> extra;  // extra column names, in order

  std::size_t count() const;
  /// The first bar with every feature defined.
  std::size_t warmup() const;
  /// One name per feature, in column order ("ret_0", ..., "vol", "ofi_0", ..., extras).
  std::vector<std::string> names() const;
  /// Feature groups (returns, volatility, ofi, extras) as [begin, end) column ranges.
  struct Group {
    std::string name;
    std::size_t begin, end;
  };
  std::vector<Group> groups() const;

  bool operator==(const FeatureSpec& other) const;
};

/// Resolves config against bars: keeps the ofi window only when the data has ofi, takes
/// every extra column the bars carry. Throws InputError for windows < 1.
FeatureSpec resolve_features(const FeatureConfig& config, const Bars& bars);

/// Throws InputError (naming the source) when bars lack a column spec needs, or has too
/// few bars for its warm-up plus min_bars usable bars.
void check_features_available(const FeatureSpec& spec, const Bars& bars, std::size_t min_bars);

/// Throws InputError (naming the source and the column) when bars lack a column spec needs.
void check_feature_columns(const FeatureSpec& spec, const Bars& bars);

/// Training-window statistics of each feature.
struct FeatureStats {
  std::vector<double> mean, stdev;
};

}  // namespace dqntrader::data

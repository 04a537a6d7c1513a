// Model features, built on the device from the uploaded bars, once.
//
// For bar t (docs/FEATURES.md gives the exact formulas):
//   ret_j     log(C[t-j] / C[t-j-1])                  j = 0 .. return_window-1
//   vol       sample standard deviation of the last volatility_window log returns
//   ofi_j     ofi[t-j]                                 j = 0 .. ofi_window-1 (when the data has
//   ofi) <name>    the extra column's value at t            for each selected extra column
// Each is then standardized, (x - mean) / std, with the mean and standard deviation of
// the training window only; the same statistics are applied everywhere else.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "dqntrader/core/bf16.hpp"
#include "dqntrader/core/types.hpp"
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

/// The bars and their features in device memory, built once.
class FeatureSet {
 public:
  /// Uploads close prices, ofi and the extra columns, and computes every raw feature
  /// (rows before spec.warmup() are zero and never used).
  FeatureSet(const ExecSpace& space, const Bars& bars, const FeatureSpec& spec);

  /// Mean and (population) standard deviation of every feature over rows [begin, end),
  /// reduced on the device in double. A constant feature gets standard deviation 1.
  FeatureStats fit(std::size_t begin, std::size_t end) const;

  /// Features standardized with stats, stored as float or bf16 for the network, in rows of
  /// `columns` values (at least count(); the columns past count() are 0, so that rows can
  /// start at the alignment tensor-core products want).
  Matrix<float> standardized_float(const FeatureStats& stats, std::size_t columns = 0) const;
  Matrix<bf16> standardized_bf16(const FeatureStats& stats, std::size_t columns = 0) const;
  /// The same into a matrix of the same shape that one of them returned, again.
  void standardize_into(const FeatureStats& stats, const Matrix<float>& out) const;
  void standardize_into(const FeatureStats& stats, const Matrix<bf16>& out) const;

  /// The features of other bars as many as these (a stream's latest window), computed into the
  /// buffers these have: nothing is allocated.
  void refresh(const Bars& bars);

  const FeatureSpec& spec() const { return m_spec; }
  std::size_t bars() const { return m_close.extent(0); }
  Kokkos::View<const double*, DeviceMemory> close() const { return m_close; }
  /// Raw ofi per bar; empty when the data has none.
  Kokkos::View<const double*, DeviceMemory> ofi() const { return m_ofi; }
  Matrix<const float> raw() const { return m_raw; }

 private:
  ExecSpace m_space;
  FeatureSpec m_spec;
  Kokkos::View<double*, DeviceMemory> m_close, m_ofi, m_extra, m_log_return;
  Matrix<float> m_raw;
};

}  // namespace dqntrader::data

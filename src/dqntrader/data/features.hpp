// Model features, built on the device from the uploaded bars, once (what they are:
// data/feature_spec.hpp; the exact formulas: docs/FEATURES.md).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "dqntrader/core/bf16.hpp"
#include "dqntrader/core/types.hpp"
#include "dqntrader/data/bars.hpp"
#include "dqntrader/data/feature_spec.hpp"

namespace dqntrader::data {

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

#include "dqntrader/data/features.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/kokkos_compat.hpp"
#include "dqntrader/core/transfer.hpp"

namespace dqntrader::data {

namespace {

// Sums of every column of x over rows [begin, end): of x, or of (x - mean)^2.
struct ColumnSums {
  using value_type = double[];
  using size_type = std::size_t;
  size_type value_count;
  Matrix<const float> x;
  std::size_t begin;
  Kokkos::View<const double*, DeviceMemory> mean;  // empty: plain sums
  bool squared;

  KOKKOS_INLINE_FUNCTION void operator()(const std::size_t i, value_type sums) const {
    const std::size_t row = begin + i;
    for (size_type f = 0; f < value_count; ++f) {
      const double v = x(row, f);
      if (squared) {
        const double d = v - mean(f);
        sums[f] += d * d;
      } else {
        sums[f] += v;
      }
    }
  }
  KOKKOS_INLINE_FUNCTION void init(value_type sums) const {
    for (size_type f = 0; f < value_count; ++f)
      sums[f] = 0.0;
  }
  KOKKOS_INLINE_FUNCTION void join(DQNTRADER_JOIN_VOLATILE value_type dst,
                                   const DQNTRADER_JOIN_VOLATILE value_type src) const {
    for (size_type f = 0; f < value_count; ++f)
      dst[f] += src[f];
  }
};

template <class T>
void standardize_into(const ExecSpace& space, const Matrix<const float>& raw,
                      const FeatureStats& stats, std::size_t warmup, const Matrix<T>& out) {
  const std::size_t n = raw.extent(0), f_count = raw.extent(1);
  if (out.extent(1) < f_count || out.extent(0) != n)
    throw InputError("standardized features need a row a bar and a column a feature at least");
  std::vector<double> scale(f_count), shift(f_count);
  for (std::size_t f = 0; f < f_count; ++f) {
    scale[f] = 1.0 / stats.stdev[f];
    shift[f] = stats.mean[f];
  }
  auto scale_d = upload(space, scale, "dqntrader::features::scale");
  auto shift_d = upload(space, shift, "dqntrader::features::shift");
  Kokkos::parallel_for(
      "dqntrader::features::standardize",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>(space, {warmup, std::size_t{0}},
                                                        {n, f_count}),
      KOKKOS_LAMBDA(const std::size_t t, const std::size_t f) {
        store(out(t, f), static_cast<float>((raw(t, f) - shift_d(f)) * scale_d(f)));
      });
  compat::fence(space, "dqntrader::features::standardize: scale and shift are released on return");
}

template <class T>
Matrix<T> standardize(const ExecSpace& space, const Matrix<const float>& raw,
                      const FeatureStats& stats, std::size_t warmup, std::size_t columns,
                      const char* label) {
  const std::size_t n = raw.extent(0), f_count = raw.extent(1);
  if (columns < f_count)
    throw InputError("standardized features need at least as many columns as features");
  Matrix<T> out(Kokkos::view_alloc(space, std::string(label)), n, columns);  // padding stays 0
  standardize_into(space, raw, stats, warmup, out);
  return out;
}

// (Kernels live in free functions: CUDA allows no device lambda in a constructor.)
// The raw features of every bar from the warm-up on into raw, through log_return.
void raw_features(const ExecSpace& space, const FeatureSpec& spec,
                  const Kokkos::View<const double*, DeviceMemory>& close,
                  const Kokkos::View<const double*, DeviceMemory>& ofi,
                  const Kokkos::View<const double*, DeviceMemory>& extra,
                  const Kokkos::View<double*, DeviceMemory>& log_return, const Matrix<float>& raw) {
  const std::size_t n = close.extent(0);
  Kokkos::parallel_for(
      "dqntrader::features::log_returns", Kokkos::RangePolicy<ExecSpace>(space, 1, n),
      KOKKOS_LAMBDA(const std::size_t t) {
        log_return(t) = compat::kmath::log(close(t) / close(t - 1));
      });
  const int rw = spec.return_window, vw = spec.volatility_window, ow = spec.ofi_window;
  const std::size_t extras = spec.extra.size();
  Kokkos::parallel_for(
      "dqntrader::features::raw", Kokkos::RangePolicy<ExecSpace>(space, spec.warmup(), n),
      KOKKOS_LAMBDA(const std::size_t t) {
        std::size_t f = 0;
        for (int j = 0; j < rw; ++j)
          raw(t, f++) = static_cast<float>(log_return(t - j));
        double mean = 0.0;
        for (int j = 0; j < vw; ++j)
          mean += log_return(t - j);
        mean /= vw;
        double squares = 0.0;
        for (int j = 0; j < vw; ++j) {
          const double d = log_return(t - j) - mean;
          squares += d * d;
        }
        raw(t, f++) = static_cast<float>(compat::kmath::sqrt(squares / (vw - 1)));
        for (int j = 0; j < ow; ++j)
          raw(t, f++) = static_cast<float>(ofi(t - j));
        for (std::size_t e = 0; e < extras; ++e) {
          raw(t, f++) = static_cast<float>(extra(t * extras + e));
        }
      });
}

// The extra columns of bars that spec uses, interleaved: value [t * extras + e].
std::vector<double> extra_values(const FeatureSpec& spec, const Bars& bars) {
  const std::size_t n = bars.size();
  std::vector<double> values(n * spec.extra.size());
  for (std::size_t e = 0; e < spec.extra.size(); ++e) {
    const auto column = std::find_if(bars.extra.begin(), bars.extra.end(),
                                     [&](const NamedColumn& c) { return c.name == spec.extra[e]; });
    for (std::size_t t = 0; t < n; ++t)
      values[t * spec.extra.size() + e] = column->values[t];
  }
  return values;
}

}  // namespace

FeatureSet::FeatureSet(const ExecSpace& space, const Bars& bars, const FeatureSpec& spec)
    : m_space(space), m_spec(spec) {
  check_features_available(spec, bars, 1);
  const std::size_t n = bars.size();
  m_close = upload(space, bars.close, "dqntrader::features::close");
  if (spec.ofi_window > 0)
    m_ofi = upload(space, bars.ofi, "dqntrader::features::ofi");
  m_extra = upload(space, extra_values(spec, bars), "dqntrader::features::extra");
  m_log_return = Kokkos::View<double*, DeviceMemory>(
      Kokkos::view_alloc(space, std::string("dqntrader::features::log_return")), n);
  m_raw = Matrix<float>(Kokkos::view_alloc(space, std::string("dqntrader::features::raw")), n,
                        spec.count());
  raw_features(space, spec, m_close, m_ofi, m_extra, m_log_return, m_raw);
}

void FeatureSet::refresh(const Bars& bars) {
  check_features_available(m_spec, bars, 1);
  if (bars.size() != this->bars())
    throw InputError("refreshed features need as many bars as before");
  auto copy = [&](const std::vector<double>& from, const Kokkos::View<double*, DeviceMemory>& to) {
    Kokkos::deep_copy(
        m_space, to,
        Kokkos::View<const double*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
            from.data(), from.size()));
  };
  copy(bars.close, m_close);
  if (m_spec.ofi_window > 0)
    copy(bars.ofi, m_ofi);
  const std::vector<double> extra = extra_values(m_spec, bars);
  copy(extra, m_extra);
  raw_features(m_space, m_spec, m_close, m_ofi, m_extra, m_log_return, m_raw);
  compat::fence(m_space, "dqntrader::features::refresh: the host's bars may go away on return");
}

FeatureStats FeatureSet::fit(std::size_t begin, std::size_t end) const {
  const std::size_t f_count = m_spec.count();
  begin = std::max(begin, m_spec.warmup());
  if (end <= begin || end > bars()) {
    throw InputError("feature statistics need a non-empty training window after the warm-up of " +
                     std::to_string(m_spec.warmup()) + " bars");
  }
  const double count = static_cast<double>(end - begin);
  FeatureStats stats;
  stats.mean.assign(f_count, 0.0);
  stats.stdev.assign(f_count, 0.0);
  ColumnSums sums{f_count, m_raw, begin, {}, false};
  Kokkos::parallel_reduce("dqntrader::features::column_sums",
                          Kokkos::RangePolicy<ExecSpace>(m_space, 0, end - begin), sums,
                          compat::host_array_result(stats.mean.data(), f_count));
  for (double& m : stats.mean)
    m /= count;
  auto mean_d = upload(m_space, stats.mean, "dqntrader::features::mean");
  ColumnSums squares{f_count, m_raw, begin, mean_d, true};
  Kokkos::parallel_reduce("dqntrader::features::column_squares",
                          Kokkos::RangePolicy<ExecSpace>(m_space, 0, end - begin), squares,
                          compat::host_array_result(stats.stdev.data(), f_count));
  for (double& s : stats.stdev) {
    s = std::sqrt(s / count);
    if (!(s > 0.0))
      s = 1.0;
  }
  return stats;
}

Matrix<float> FeatureSet::standardized_float(const FeatureStats& stats, std::size_t columns) const {
  return standardize<float>(m_space, m_raw, stats, m_spec.warmup(),
                            std::max(columns, m_spec.count()), "dqntrader::features::standardized");
}

Matrix<bf16> FeatureSet::standardized_bf16(const FeatureStats& stats, std::size_t columns) const {
  return standardize<bf16>(m_space, m_raw, stats, m_spec.warmup(),
                           std::max(columns, m_spec.count()), "dqntrader::features::standardized");
}

void FeatureSet::standardize_into(const FeatureStats& stats, const Matrix<float>& out) const {
  data::standardize_into<float>(m_space, m_raw, stats, m_spec.warmup(), out);
}

void FeatureSet::standardize_into(const FeatureStats& stats, const Matrix<bf16>& out) const {
  data::standardize_into<bf16>(m_space, m_raw, stats, m_spec.warmup(), out);
}

}  // namespace dqntrader::data

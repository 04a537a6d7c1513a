#include "dqntrader/data/feature_spec.hpp"

#include <algorithm>
#include <string>

#include "dqntrader/core/error.hpp"

namespace dqntrader::data {

std::size_t FeatureSpec::count() const {
  return static_cast<std::size_t>(return_window) + 1 + static_cast<std::size_t>(ofi_window) +
         extra.size();
}

std::size_t FeatureSpec::warmup() const {
  return static_cast<std::size_t>(std::max({return_window, volatility_window, ofi_window - 1, 0}));
}

std::vector<std::string> FeatureSpec::names() const {
  std::vector<std::string> names;
  for (int j = 0; j < return_window; ++j)
    names.push_back("ret_" + std::to_string(j));
  names.push_back("vol");
  for (int j = 0; j < ofi_window; ++j)
    names.push_back("ofi_" + std::to_string(j));
  names.insert(names.end(), extra.begin(), extra.end());
  return names;
}

std::vector<FeatureSpec::Group> FeatureSpec::groups() const {
  std::vector<Group> groups;
  std::size_t at = 0;
  groups.push_back({"returns", at, at + static_cast<std::size_t>(return_window)});
  at += static_cast<std::size_t>(return_window);
  groups.push_back({"volatility", at, at + 1});
  at += 1;
  if (ofi_window > 0) {
    groups.push_back({"ofi", at, at + static_cast<std::size_t>(ofi_window)});
    at += static_cast<std::size_t>(ofi_window);
  }
  if (!extra.empty())
    groups.push_back({"extra", at, at + extra.size()});
  return groups;
}

bool FeatureSpec::operator==(const FeatureSpec& other) const {
  return return_window == other.return_window && volatility_window == other.volatility_window &&
         ofi_window == other.ofi_window && extra == other.extra;
}

FeatureSpec resolve_features(const FeatureConfig& config, const Bars& bars) {
  if (config.return_window < 1)
    throw InputError("return window must be at least 1");
  if (config.volatility_window < 2)
    throw InputError("volatility window must be at least 2");
  if (config.ofi_window < 0)
    throw InputError("ofi window must not be negative");
  FeatureSpec spec;
  spec.return_window = config.return_window;
  spec.volatility_window = config.volatility_window;
  spec.ofi_window = bars.has_ofi() ? config.ofi_window : 0;
  for (const NamedColumn& c : bars.extra)
    spec.extra.push_back(c.name);
  return spec;
}

void check_features_available(const FeatureSpec& spec, const Bars& bars, std::size_t min_bars) {
  check_feature_columns(spec, bars);
  if (bars.size() < spec.warmup() + min_bars) {
    throw InputError(bars.source, 0, 0,
                     "too few bars: " + std::to_string(bars.size()) +
                         " given, the feature window needs " + std::to_string(spec.warmup()) +
                         " before the first usable bar and " + std::to_string(min_bars) +
                         " usable bars are needed");
  }
}

void check_feature_columns(const FeatureSpec& spec, const Bars& bars) {
  if (spec.ofi_window > 0 && !bars.has_ofi()) {
    throw InputError(bars.source, 0, 0,
                     "the model uses ofi features but the data has no 'ofi' column");
  }
  for (const std::string& name : spec.extra) {
    const bool found = std::any_of(bars.extra.begin(), bars.extra.end(),
                                   [&](const NamedColumn& c) { return c.name == name; });
    if (!found) {
      throw InputError(bars.source, 0, 0,
                       "the model uses the column '" + name + "', which the data lacks");
    }
  }
}

}  // namespace dqntrader::data

#include "dqntrader/replay/vaccine_set.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/kokkos_compat.hpp"

namespace dqntrader::replay {

VaccineSet::VaccineSet(const ExecSpace& space, const std::vector<double>& close, std::size_t begin,
                       std::size_t end, double quantile, const RewardModel& rewards)
    : m_rewards(rewards) {
  if (end < begin + 2 || end > close.size())
    throw InputError("the vaccine needs a training window of 2 bars or more");
  const std::size_t decisions = end - 1 - begin;
  const std::size_t take = std::max<std::size_t>(1, static_cast<std::size_t>(quantile * decisions));
  std::vector<std::pair<double, std::int32_t>> moves, drawdowns;
  double peak = close[begin];
  for (std::size_t t = begin; t + 1 < end; ++t) {
    moves.push_back({std::fabs(close[t + 1] / close[t] - 1.0), static_cast<std::int32_t>(t)});
    peak = std::max(peak, close[t]);
    drawdowns.push_back({close[t] / peak - 1.0, static_cast<std::int32_t>(t)});
  }
  std::sort(moves.begin(), moves.end(),
            [](const auto& x, const auto& y) { return x.first > y.first; });
  std::sort(drawdowns.begin(), drawdowns.end());
  std::set<std::int32_t> chosen;
  for (std::size_t i = 0; i < take; ++i) {
    chosen.insert(moves[i].second);
    chosen.insert(drawdowns[i].second);
  }
  m_bars = Kokkos::View<std::int32_t*, DeviceMemory>(
      Kokkos::view_alloc(space, std::string("dqntrader::replay::vaccine_bars")), chosen.size());
  auto host = Kokkos::create_mirror_view(m_bars);
  std::size_t i = 0;
  for (std::int32_t bar : chosen)
    host(i++) = bar;
  Kokkos::deep_copy(space, m_bars, host);
  compat::fence(space, "dqntrader::replay::VaccineSet: the host list is released on return");
}

std::vector<std::int32_t> VaccineSet::stress_bars() const {
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), m_bars);
  return std::vector<std::int32_t>(host.data(), host.data() + host.extent(0));
}

}  // namespace dqntrader::replay

#include "dqntrader/eval/decisions.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/kokkos_compat.hpp"
#include "dqntrader/core/transfer.hpp"
#include "dqntrader/eval/q_policy.hpp"
#include "dqntrader/io/json_values.hpp"

namespace dqntrader::eval {

PolicyDecisions::PolicyDecisions(const ExecSpace& space, const nn::NetworkSpec& network,
                                 const data::FeatureSpec& features, const data::FeatureStats& stats,
                                 const std::vector<double>& positions,
                                 const std::vector<float>& parameters, Precision precision,
                                 std::size_t chunk_bars)
    : m_space(space),
      m_network(network),
      m_features(features),
      m_stats(stats),
      m_positions(positions),
      m_parameters(upload(space, parameters, "dqntrader::eval::decision_parameters")),
      m_precision(precision),
      m_chunk_bars(chunk_bars) {
  if (positions.size() != network.positions)
    throw InputError("the policy's positions and its network's disagree");
  if (parameters.size() != nn::ParameterLayout(network).size())
    throw InputError("the parameters do not fit the policy's network");
}

PolicyDecisions::~PolicyDecisions() = default;

namespace {

// The decisions path[0 .. n) with their Q-values q(i, a), for bars first .., the first coming in
// with positions[incoming].
std::vector<Decision> read_decisions(const ExecSpace& space,
                                     const Kokkos::View<const float**, DeviceMemory>& taken,
                                     const Kokkos::View<const std::int8_t*, DeviceMemory>& path,
                                     std::size_t first, std::size_t incoming,
                                     const std::vector<double>& positions) {
  const std::size_t n = path.extent(0), actions = taken.extent(1);
  auto q = Kokkos::create_mirror_view(taken);
  auto p = Kokkos::create_mirror_view(path);
  Kokkos::deep_copy(space, q, taken);
  Kokkos::deep_copy(space, p, path);
  compat::fence(space, "dqntrader::eval::decide: the host reads the decisions");
  std::vector<Decision> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    Decision& d = out[i];
    d.bar = first + i;
    d.incoming = positions[i == 0 ? incoming : static_cast<std::size_t>(p(i - 1))];
    d.q.assign(actions, 0.0f);
    for (std::size_t a = 0; a < actions; ++a)
      d.q[a] = q(i, a);
    d.action = static_cast<std::size_t>(p(i));
    d.position = positions[d.action];
  }
  return out;
}

}  // namespace

struct PolicyDecisions::Latest {
  Latest(const ExecSpace& space, const data::Bars& window, const data::FeatureSpec& spec,
         const nn::NetworkSpec& network, Precision precision, const data::FeatureStats& stats,
         std::size_t incoming)
      : features(space, window, spec),
        policy(space, network, precision, features, stats, 1, 1, 1, incoming),
        taken(Kokkos::view_alloc(space, std::string("dqntrader::eval::latest_q")), 1,
              network.actions) {}

  data::FeatureSet features;  // of the last warmup + 1 bars
  QPolicy policy;
  Kokkos::View<float**, DeviceMemory> taken;
};

std::vector<std::vector<Decision>> PolicyDecisions::decide(const data::Panel& panel,
                                                           const std::string& from,
                                                           const std::string& to,
                                                           std::size_t incoming) const {
  std::vector<std::vector<Decision>> made;
  data::for_each_instrument(panel, [&](const data::Bars& bars) {
    data::check_feature_columns(m_features, bars);
    const DecisionWindow w = decision_window(bars, warmup(), from, to);
    made.push_back(decide(bars, w.first, w.last, incoming));
  });
  return made;
}

std::vector<Decision> PolicyDecisions::decide(const data::Bars& bars, std::size_t first,
                                              std::size_t last, std::size_t incoming) const {
  const std::size_t warm = warmup();
  if (first < warm || last < first || last >= bars.size()) {
    throw InputError("decisions at bars " + std::to_string(first) + " .. " + std::to_string(last) +
                     " of " + std::to_string(bars.size()) + ": the policy decides from bar " +
                     std::to_string(warm) + " on (its features' warm-up)");
  }
  if (incoming >= m_positions.size())
    throw InputError("no incoming position " + std::to_string(incoming));
  // The bars the decisions read, and only those: a decision at the latest bar of a long file
  // computes the features of its warm-up alone.
  const std::size_t n = last - first + 1;
  const data::FeatureSet features(m_space, data::bars_between(bars, first - warm, last + 1),
                                  m_features);
  QPolicy policy(m_space, m_network, m_precision, features, m_stats, 1, std::min(m_chunk_bars, n),
                 n, incoming);
  policy.prepare(m_space, parameter_rows(m_parameters.data(), 1, m_parameters.extent(0)));
  Kokkos::View<float**, DeviceMemory> taken(
      Kokkos::view_alloc(m_space, std::string("dqntrader::eval::taken_q")), n, m_network.actions);
  policy.enqueue_taken(m_space, warm, n, incoming, taken);
  return read_decisions(m_space, taken, policy.path(0, n), first, incoming, m_positions);
}

Decision PolicyDecisions::decide_latest(const data::Bars& bars, std::size_t incoming) {
  const std::size_t warm = warmup();
  if (bars.size() < warm + 1) {
    throw InputError(
        bars.source, 0, 0,
        std::to_string(bars.size()) + " bars; a decision reads " + std::to_string(warm + 1));
  }
  if (incoming >= m_positions.size())
    throw InputError("no incoming position " + std::to_string(incoming));
  const data::Bars window = data::last_bars(bars, warm + 1);
  if (!m_latest) {
    m_latest = std::make_unique<Latest>(m_space, window, m_features, m_network, m_precision,
                                        m_stats, incoming);
    m_latest->policy.prepare(m_space,
                             parameter_rows(m_parameters.data(), 1, m_parameters.extent(0)));
  } else {
    m_latest->features.refresh(window);
    m_latest->policy.restandardize(m_latest->features, m_stats);
  }
  m_latest->policy.enqueue_taken(m_space, warm, 1, incoming, m_latest->taken);
  Decision d = read_decisions(m_space, m_latest->taken, m_latest->policy.path(0, 1),
                              bars.size() - 1, incoming, m_positions)
                   .front();
  return d;
}

std::size_t position_index(const std::string& text, const std::vector<double>& positions) {
  double value = 0.0;
  if (text == "flat") {
    value = 0.0;
  } else if (text == "long") {
    value = 1.0;
  } else if (text == "short") {
    value = -1.0;
  } else {
    // A decimal number ("-0.5", "1e-1"); not hexadecimal, not "inf".
    const char* first = text.data() + (!text.empty() && text.front() == '+' ? 1 : 0);
    const char* last = text.data() + text.size();
    const auto parsed = std::from_chars(first, last, value, std::chars_format::general);
    if (text.empty() || parsed.ec != std::errc() || parsed.ptr != last || !std::isfinite(value))
      throw InputError(field("position") + " '" + text +
                       "': expected a position (a number, or flat, long or short)");
  }
  for (std::size_t i = 0; i < positions.size(); ++i) {
    if (positions[i] == value)
      return i;
  }
  std::string list;
  for (double p : positions)
    list += (list.empty() ? "" : ", ") + io::format_metric(p);
  throw InputError(field("position") + " " + text + ": the policy's positions are " + list);
}

InputError too_few_bars(const data::Bars& bars, std::size_t warmup) {
  return InputError(bars.source, 0, 0,
                    std::to_string(bars.size()) + " bar" + (bars.size() == 1 ? "" : "s") +
                        "; the policy's first decision needs " + std::to_string(warmup + 1) +
                        " (its features read the " + std::to_string(warmup) + " bars before it)");
}

DecisionWindow decision_window(const data::Bars& bars, std::size_t warmup, const std::string& from,
                               const std::string& to) {
  if (bars.size() < warmup + 1)
    throw too_few_bars(bars, warmup);
  DecisionWindow w;
  w.last = to.empty() ? bars.size() - 1 : data::bar_index(field("end"), to, bars, false);
  const bool window = !from.empty() || !to.empty();
  w.first =
      from.empty() ? (window ? warmup : w.last) : data::bar_index(field("start"), from, bars, true);
  if (w.first < warmup) {
    throw InputError(field("start") + " " + from + " selects bar " + std::to_string(w.first) +
                     ", before bar " + std::to_string(warmup) +
                     ", the first at which the policy's features are defined");
  }
  if (from.empty() && w.last < w.first) {
    throw InputError(field("end") + " " + to + " selects bar " + std::to_string(w.last) +
                     ", before bar " + std::to_string(warmup) +
                     ", the first at which the policy's features are defined");
  }
  if (w.last < w.first) {
    throw InputError(field("start") + " " + from + " (bar " + std::to_string(w.first) +
                     ") comes after " + field("end") + " " + to + " (bar " +
                     std::to_string(w.last) + ")");
  }
  return w;
}

}  // namespace dqntrader::eval

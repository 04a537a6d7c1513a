#include "dqntrader/train/causal_probe.hpp"

#include "dqntrader/core/bf16.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/core/for_each_cell.hpp"
#include "dqntrader/core/kokkos_compat.hpp"
#include "dqntrader/core/random.hpp"
#include "dqntrader/env/states.hpp"

namespace dqntrader::train {

namespace {
// Block g + 1 of out = block 0 with the columns of group g set to 0. (A free function:
// CUDA allows no device lambda in a constructor.)
template <class T>
void make_variants(const ExecSpace& space, const Matrix<T>& out,
                   const std::vector<data::FeatureSpec::Group>& groups, std::size_t batch) {
  const std::size_t state = out.extent(1);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const std::size_t first = groups[g].begin, last = groups[g].end, offset = (g + 1) * batch;
    for_each_cell(
        "dqntrader::train::probe_variant", space, batch, state,
        KOKKOS_LAMBDA(const std::size_t i, const std::size_t j) {
          if (j >= first && j < last) {
            store(out(offset + i, j), 0.0f);
          } else {
            out(offset + i, j) = out(i, j);
          }
        });
  }
}
}  // namespace

template <class T>
CausalProbe<T>::CausalProbe(const ExecSpace& space, const Matrix<const T>& features,
                            const data::FeatureSpec& spec, std::size_t positions, std::size_t begin,
                            std::size_t end, std::size_t batch, std::uint64_t seed)
    : m_batch(batch) {
  if (end <= begin)
    throw InputError("the causal probe needs a non-empty training window");
  const std::vector<data::FeatureSpec::Group> groups = spec.groups();
  for (const auto& g : groups)
    m_names.push_back(g.name);
  const std::size_t state = spec.count() + positions;
  m_states = Matrix<T>(Kokkos::view_alloc(space, std::string("dqntrader::train::probe_states")),
                       (groups.size() + 1) * batch, state);
  Kokkos::View<std::int32_t*, DeviceMemory> bars(
      Kokkos::view_alloc(space, std::string("dqntrader::train::probe_bars")), batch);
  Kokkos::View<std::int8_t*, DeviceMemory> incoming(
      Kokkos::view_alloc(space, std::string("dqntrader::train::probe_positions")), batch);
  auto bars_host = Kokkos::create_mirror_view(bars);
  auto incoming_host = Kokkos::create_mirror_view(incoming);
  HostRng rng(seed ^ 0x50524F42ull);
  for (std::size_t i = 0; i < batch; ++i) {
    bars_host(i) = static_cast<std::int32_t>(begin + rng.below(end - begin));
    incoming_host(i) = static_cast<std::int8_t>(rng.below(positions));
  }
  Kokkos::deep_copy(space, bars, bars_host);
  Kokkos::deep_copy(space, incoming, incoming_host);
  env::assemble_states(space, features, env::StateSource{bars, incoming},
                       StridedMatrix<T>(m_states));
  make_variants(space, m_states, groups, batch);
  compat::fence(space, "dqntrader::train::CausalProbe: the host draws are released on return");
}

template <class T>
void CausalProbe<T>::accumulate(const ExecSpace& space, const Matrix<const float>& q,
                                const Kokkos::View<double*, DeviceMemory>& sums) const {
  using Member = Kokkos::TeamPolicy<ExecSpace>::member_type;
  const std::size_t batch = m_batch, actions = q.extent(1), cells = batch * actions;
#if defined(DQNTRADER_BACKEND_CUDA)
  const int team = 128;
#else
  const int team = 1;
#endif
  Kokkos::parallel_for(
      "dqntrader::train::probe_accumulate",
      Kokkos::TeamPolicy<ExecSpace>(space, static_cast<int>(m_names.size()), team),
      KOKKOS_LAMBDA(const Member& member) {
        const std::size_t g = static_cast<std::size_t>(member.league_rank());
        double total = 0.0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(member, cells),
            [&](const std::size_t c, double& partial) {
              const std::size_t i = c / actions, a = c % actions;
              partial +=
                  compat::kmath::fabs(static_cast<double>(q((g + 1) * batch + i, a)) - q(i, a));
            },
            total);
        Kokkos::single(Kokkos::PerTeam(member),
                       [&]() { sums(g) += total / static_cast<double>(cells); });
      });
}

template class CausalProbe<float>;
template class CausalProbe<bf16>;

}  // namespace dqntrader::train

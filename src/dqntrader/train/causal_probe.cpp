#include "dqntrader/train/causal_probe.hpp"

#include "dqntrader/core/bf16.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/core/for_each_cell.hpp"
#include "dqntrader/core/kokkos_compat.hpp"
#include "dqntrader/core/random.hpp"
#include "dqntrader/env/states.hpp"

namespace dqntrader::train {

namespace {
// Block g + 1 of each member's states = its block 0 with the columns of group g set to 0.
// (A free function: CUDA allows no device lambda in a constructor.)
template <class T>
void make_variants(const ExecSpace& space, const MatrixBatch<T>& out,
                   const std::vector<data::FeatureSpec::Group>& groups, std::size_t batch) {
  const std::size_t state = out.extent(2), members = out.extent(0);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const std::size_t first = groups[g].begin, last = groups[g].end, offset = (g + 1) * batch;
    for_each_cell(
        "dqntrader::train::probe_variant", space, members * batch, state,
        KOKKOS_LAMBDA(const std::size_t mi, const std::size_t j) {
          const std::size_t m = mi / batch, i = mi % batch;
          if (j >= first && j < last) {
            store(out(m, offset + i, j), 0.0f);
          } else {
            out(m, offset + i, j) = out(m, i, j);
          }
        });
  }
}
}  // namespace

template <class T>
CausalProbe<T>::CausalProbe(const ExecSpace& space, const Matrix<const T>& features,
                            const data::FeatureSpec& spec, std::size_t positions, std::size_t begin,
                            std::size_t end, std::size_t batch,
                            const std::vector<std::uint64_t>& seeds)
    : m_batch(batch) {
  if (end <= begin)
    throw InputError("the causal probe needs a non-empty training window");
  const std::vector<data::FeatureSpec::Group> groups = spec.groups();
  for (const auto& g : groups)
    m_names.push_back(g.name);
  const std::size_t state = spec.count() + positions;
  const std::size_t members = seeds.size();
  m_states =
      MatrixBatch<T>(Kokkos::view_alloc(space, std::string("dqntrader::train::probe_states")),
                     members, (groups.size() + 1) * batch, state);
  Kokkos::View<std::int32_t*, DeviceMemory> bars(
      Kokkos::view_alloc(space, std::string("dqntrader::train::probe_bars")), members * batch);
  Kokkos::View<std::int8_t*, DeviceMemory> incoming(
      Kokkos::view_alloc(space, std::string("dqntrader::train::probe_positions")), members * batch);
  auto bars_host = Kokkos::create_mirror_view(bars);
  auto incoming_host = Kokkos::create_mirror_view(incoming);
  for (std::size_t m = 0; m < members; ++m) {
    HostRng rng(seeds[m] ^ 0x50524F42ull);
    for (std::size_t i = 0; i < batch; ++i) {
      bars_host(m * batch + i) = static_cast<std::int32_t>(begin + rng.below(end - begin));
      incoming_host(m * batch + i) = static_cast<std::int8_t>(rng.below(positions));
    }
  }
  Kokkos::deep_copy(space, bars, bars_host);
  Kokkos::deep_copy(space, incoming, incoming_host);
  // Block 0 of each member's states: its first batch rows.
  env::assemble_states(
      space, features, env::StateSource{bars, incoming},
      gemm::StridedBatch<T>(m_states.data(), Kokkos::LayoutStride(members, m_states.stride(0),
                                                                  batch, state, state, 1)));
  make_variants(space, m_states, groups, batch);
  compat::fence(space, "dqntrader::train::CausalProbe: the host draws are released on return");
}

template <class T>
void CausalProbe<T>::accumulate(const ExecSpace& space, const gemm::StridedBatch<const float>& q,
                                const Kokkos::View<const MemberSettings*, DeviceMemory>& members,
                                const Kokkos::View<double**, DeviceMemory>& sums) const {
  using Member = Kokkos::TeamPolicy<ExecSpace>::member_type;
  const std::size_t batch = m_batch, actions = q.extent(2), cells = batch * actions;
  const std::size_t groups = m_names.size();
  if (q.extent(0) != m_states.extent(0) || sums.extent(0) < q.extent(0) ||
      sums.extent(1) < groups) {
    throw InputError("CausalProbe::accumulate: Q-values or sums not one per member");
  }
#if defined(DQNTRADER_BACKEND_CUDA)
  const int team = 128;
#else
  const int team = 1;
#endif
  Kokkos::parallel_for(
      "dqntrader::train::probe_accumulate",
      Kokkos::TeamPolicy<ExecSpace>(space, static_cast<int>(q.extent(0) * groups), team),
      KOKKOS_LAMBDA(const Member& member) {
        const std::size_t m = static_cast<std::size_t>(member.league_rank()) / groups;
        const std::size_t g = static_cast<std::size_t>(member.league_rank()) % groups;
        if (members(m).probe == 0)
          return;
        double total = 0.0;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(member, cells),
            [&](const std::size_t c, double& partial) {
              const std::size_t i = c / actions, a = c % actions;
              partial += compat::kmath::fabs(static_cast<double>(q(m, (g + 1) * batch + i, a)) -
                                             q(m, i, a));
            },
            total);
        Kokkos::single(Kokkos::PerTeam(member),
                       [&]() { sums(m, g) += total / static_cast<double>(cells); });
      });
}

template class CausalProbe<float>;
template class CausalProbe<bf16>;

}  // namespace dqntrader::train

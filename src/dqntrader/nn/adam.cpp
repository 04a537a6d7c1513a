#include "dqntrader/nn/adam.hpp"

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/team_sum.hpp"

namespace dqntrader::nn {

Schedule parse_schedule(const std::string& name) {
  if (name == "constant")
    return Schedule::constant;
  if (name == "linear")
    return Schedule::linear;
  if (name == "cosine")
    return Schedule::cosine;
  throw InputError("unknown learning-rate schedule '" + name +
                   "' (expected constant, linear or cosine)");
}

float Adam::learning_rate(std::int64_t calls) const {
  return scheduled_rate(m_settings.schedule, m_settings.learning_rate, m_settings.final_fraction,
                        calls, m_settings.schedule_steps);
}

namespace {

using Policy = Kokkos::TeamPolicy<ExecSpace>;
using Member = Policy::member_type;
using Scratch = TeamScratch<double>;

// Blocks of the gradient whose squared sums the norm adds: a fixed count, so that the sum
// is taken in the same order at every thread count; about one a multiprocessor, so that few
// teams meet at the counter and the last one adds few sums. A thread loads kNormAhead values
// of its block before it adds any, so that their loads overlap.
constexpr int kNormBlocks = 128, kNormAhead = 8;

// The update's teams: kUpdateThreads threads each (one on the host), each thread taking
// kAhead parameters at a time, kTileRounds times.
#if defined(DQNTRADER_BACKEND_CUDA)
constexpr int kUpdateThreads = 256, kTileRounds = 2;
#else
constexpr int kUpdateThreads = 1, kTileRounds = 512;
#endif
constexpr int kAhead = 4;

}  // namespace

Adam::Adam(const ExecSpace& space, std::size_t parameters, const AdamSettings& settings)
    : m_settings(settings),
      m_m(Kokkos::view_alloc(space, std::string("dqntrader::nn::adam_m")), parameters),
      m_v(Kokkos::view_alloc(space, std::string("dqntrader::nn::adam_v")), parameters),
      m_counters(Kokkos::view_alloc(space, std::string("dqntrader::nn::adam_counters"))),
      m_norm_blocks(Kokkos::view_alloc(space, std::string("dqntrader::nn::adam_norm_blocks")),
                    kNormBlocks),
      m_arrivals(Kokkos::view_alloc(space, std::string("dqntrader::nn::adam_arrivals"))),
      m_factors(Kokkos::view_alloc(space, std::string("dqntrader::nn::adam_factors"))) {
  Kokkos::deep_copy(space, m_counters, AdamCounters{0, 0, 0, 0, 1.0, 1.0});
}

// Two kernels. The first takes the squared sums of kNormBlocks blocks of the gradient, one
// team each; the team that arrives last adds them (its threads in a fixed pattern, then the
// tree), advances the counters (a non-finite norm skips the step) and works out the factors
// every parameter's update shares (clipping, rate, bias corrections). The second updates
// every parameter with them.
template <class T>
void Adam::step(const ExecSpace& space, const Kokkos::View<float*, DeviceMemory>& parameters,
                const Kokkos::View<const float*, DeviceMemory>& grads,
                const Kokkos::View<T*, DeviceMemory>& working) {
  const std::size_t n = parameters.extent(0);
  const std::size_t block = (n + kNormBlocks - 1) / kNormBlocks;
  const auto blocks = m_norm_blocks;
  const auto arrivals = m_arrivals;
  const AdamSettings s = m_settings;
  const auto m = m_m, v = m_v;
  const auto counters = m_counters;
  const auto factors = m_factors;
  const double beta1 = s.beta1, beta2 = s.beta2;
  const int team = tree_sum_team_size();
  Policy policy(space, kNormBlocks, team);
  policy.set_scratch_size(0, Kokkos::PerTeam(Scratch::shmem_size(team)));
  Kokkos::parallel_for(
      "dqntrader::nn::adam_norm", policy, KOKKOS_LAMBDA(const Member& member) {
        const int size = member.team_size(), rank = member.team_rank();
        const Scratch partial(member.team_scratch(0), size);
        const std::size_t first = static_cast<std::size_t>(member.league_rank()) * block;
        const std::size_t last = first + block < n ? first + block : n;
        const std::size_t stride = static_cast<std::size_t>(size);
        double sum = 0.0;
        for (std::size_t i0 = first + static_cast<std::size_t>(rank); i0 < last;
             i0 += stride * kNormAhead) {
          float g[kNormAhead];
          for (int k = 0; k < kNormAhead; ++k) {
            const std::size_t i = i0 + static_cast<std::size_t>(k) * stride;
            g[k] = i < last ? grads(i) : 0.0f;
          }
          for (int k = 0; k < kNormAhead; ++k)
            sum += static_cast<double>(g[k]) * g[k];
        }
        partial(rank) = sum;
        team_tree_sum(member, partial, 1);
        if (rank == 0)
          blocks(member.league_rank()) = partial(0);
        if (!last_to_arrive(member, &arrivals(), kNormBlocks))
          return;
        const volatile double* const sums = blocks.data();
        double mine = 0.0;
        for (int b = rank; b < kNormBlocks; b += size)
          mine += sums[b];
        partial(rank) = mine;
        team_tree_sum(member, partial, 1);
        if (rank != 0)
          return;
        const double squared = partial(0);
        AdamCounters& c = counters();
        c.calls += 1;
        AdamStepFactors f{0, 1.0f, 0.0f, 1.0f, 1.0f};
        if (squared <= compat::max_double) {
          c.applied += 1;
          c.consecutive = 0;
          c.beta1_power *= beta1;
          c.beta2_power *= beta2;
          const double norm = compat::kmath::sqrt(squared);
          f.apply = 1;
          f.scale = s.clip_norm > 0.0f && norm > s.clip_norm
                        ? static_cast<float>(s.clip_norm / norm)
                        : 1.0f;
          // The schedule's position before this step; the bias correction of this step,
          // t = applied: 1 - beta^t.
          f.rate = scheduled_rate(s.schedule, s.learning_rate, s.final_fraction, c.calls - 1,
                                  s.schedule_steps);
          f.bias1 = static_cast<float>(1.0 - c.beta1_power);
          f.bias2 = static_cast<float>(1.0 - c.beta2_power);
        } else {
          c.skipped += 1;
          c.consecutive += 1;
        }
        factors() = f;
      });
  // The update: a team per tile of kUpdateThreads * kTileRounds * kAhead parameters, its
  // threads kAhead parameters at a time, kUpdateThreads apart (loaded before any is stored,
  // so that the loads overlap).
  const bool write_working = working.extent(0) == n;
  const std::size_t tile = std::size_t{kUpdateThreads} * kTileRounds * kAhead;
  Kokkos::parallel_for(
      "dqntrader::nn::adam_update",
      Policy(space, static_cast<int>((n + tile - 1) / tile), kUpdateThreads),
      KOKKOS_LAMBDA(const Member& member) {
        const AdamStepFactors f = factors();
        if (f.apply == 0)
          return;  // NaN or infinity: skip the step
        const std::size_t size = kUpdateThreads;
        const std::size_t begin = static_cast<std::size_t>(member.league_rank()) * tile +
                                  static_cast<std::size_t>(member.team_rank());
        const std::size_t end = begin - static_cast<std::size_t>(member.team_rank()) + tile;
        for (std::size_t first = begin; first < end && first < n; first += size * kAhead) {
          float g[kAhead], mi[kAhead], vi[kAhead], p[kAhead];
          for (int k = 0; k < kAhead; ++k) {
            const std::size_t i = first + static_cast<std::size_t>(k) * size;
            const bool in = i < n;
            g[k] = in ? grads(i) * f.scale : 0.0f;
            mi[k] = in ? m(i) : 0.0f;
            vi[k] = in ? v(i) : 0.0f;
            p[k] = in ? parameters(i) : 0.0f;
          }
          for (int k = 0; k < kAhead; ++k) {
            const std::size_t i = first + static_cast<std::size_t>(k) * size;
            if (i >= n)
              break;
            mi[k] = s.beta1 * mi[k] + (1.0f - s.beta1) * g[k];
            vi[k] = s.beta2 * vi[k] + (1.0f - s.beta2) * g[k] * g[k];
            m(i) = mi[k];
            v(i) = vi[k];
            const float m_hat = mi[k] / f.bias1;
            const float v_hat = vi[k] / f.bias2;
            const float updated =
                p[k] -
                f.rate * (m_hat / (compat::kmath::sqrt(v_hat) + s.epsilon) + s.weight_decay * p[k]);
            parameters(i) = updated;
            if (write_working)
              store(working(i), updated);
          }
        }
      });
}

template void Adam::step<float>(const ExecSpace&, const Kokkos::View<float*, DeviceMemory>&,
                                const Kokkos::View<const float*, DeviceMemory>&,
                                const Kokkos::View<float*, DeviceMemory>&);
template void Adam::step<bf16>(const ExecSpace&, const Kokkos::View<float*, DeviceMemory>&,
                               const Kokkos::View<const float*, DeviceMemory>&,
                               const Kokkos::View<bf16*, DeviceMemory>&);

}  // namespace dqntrader::nn

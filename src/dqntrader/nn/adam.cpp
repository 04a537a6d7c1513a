#include "dqntrader/nn/adam.hpp"

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/team_sum.hpp"
#include "dqntrader/core/transfer.hpp"

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

float Adam::learning_rate(std::size_t member, std::int64_t calls) const {
  const AdamSettings& s = m_settings.at(member);
  return scheduled_rate(s.schedule, s.learning_rate, s.final_fraction, calls, s.schedule_steps);
}

void Adam::set_settings(std::size_t member, const AdamSettings& settings) {
  m_settings.at(member) = settings;
}

void Adam::upload_settings(const ExecSpace& space) const {
  Kokkos::deep_copy(
      space, m_device_settings,
      Kokkos::View<const AdamSettings*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
          m_settings.data(), m_settings.size()));
}

void Adam::copy_members(const ExecSpace& space, const MemberCopies& copies) const {
  copy_member_vectors(space, m_m, m_layout.size, m_layout.stride, copies);
  copy_member_vectors(space, m_v, m_layout.size, m_layout.stride, copies);
  const auto counters = m_counters;
  Kokkos::parallel_for(
      "dqntrader::nn::adam_copy_counters",
      Kokkos::RangePolicy<ExecSpace>(space, 0, copies.extent(0)), KOKKOS_LAMBDA(const int c) {
        const AdamCounters from = counters(copies(c, 1));
        AdamCounters& to = counters(copies(c, 0));
        to.calls = from.calls;
        to.applied = from.applied;
        to.beta1_power = from.beta1_power;
        to.beta2_power = from.beta2_power;
      });
}

namespace {

using Policy = Kokkos::TeamPolicy<ExecSpace>;
using Member = Policy::member_type;
using Scratch = TeamScratch<double>;

// Blocks of kNormValues values of a member's gradient, whose squared sums the norm adds: their
// count follows from the member's size alone, so that the sum is taken in the same order at
// every thread count and in a population of any size. On CUDA a block is one load of
// kNormAhead values for each of a team's 256 threads (loaded before any is added, so that
// they overlap): a small network's gradient takes few teams (each with its fence and atomic),
// not mostly idle ones, and the last team adds few sums.
constexpr int kNormAhead = 16;
constexpr std::size_t kNormValues = 4096;

std::size_t norm_blocks(std::size_t size) {
  return size > kNormValues ? (size + kNormValues - 1) / kNormValues : 1;
}

// The update's teams: kUpdateThreads threads each (one on the host), each thread taking
// kAhead parameters at a time, kTileRounds times.
#if defined(DQNTRADER_BACKEND_CUDA)
constexpr int kUpdateThreads = 256, kTileRounds = 2;
#else
constexpr int kUpdateThreads = 1, kTileRounds = 512;
#endif
constexpr int kAhead = 4;

}  // namespace

Adam::Adam(const ExecSpace& space, const MemberVectors& layout,
           const std::vector<AdamSettings>& settings)
    : m_layout(layout), m_settings(settings) {
  const std::size_t k = layout.members;
  if (k == 0 || settings.size() != k || (k > 1 && layout.stride < layout.size))
    throw InputError("Adam: one settings record per member, and members that do not overlap");
  const std::size_t extent = layout.extent();
  auto alloc = [&](const char* label) { return Kokkos::view_alloc(space, std::string(label)); };
  m_device_settings = upload(space, settings, "dqntrader::nn::adam_settings");
  m_m = Kokkos::View<float*, DeviceMemory>(alloc("dqntrader::nn::adam_m"), extent);
  m_v = Kokkos::View<float*, DeviceMemory>(alloc("dqntrader::nn::adam_v"), extent);
  m_counters = Kokkos::View<AdamCounters*, DeviceMemory>(alloc("dqntrader::nn::adam_counters"), k);
  m_norm_blocks = Kokkos::View<double**, Kokkos::LayoutRight, DeviceMemory>(
      alloc("dqntrader::nn::adam_norm_blocks"), k, norm_blocks(layout.size));
  m_arrivals = Kokkos::View<int*, DeviceMemory>(alloc("dqntrader::nn::adam_arrivals"), k);
  m_factors = Kokkos::View<AdamStepFactors*, DeviceMemory>(alloc("dqntrader::nn::adam_factors"), k);
  Kokkos::deep_copy(space, m_counters, AdamCounters{0, 0, 0, 0, 1.0, 1.0});
}

// Two kernels. The first takes the squared sums of the blocks of each member's
// gradient, one team each; the team that arrives last among a member's adds them (its threads
// in a fixed pattern, then the tree), advances the member's counters (a non-finite norm skips
// its step) and works out the factors every parameter's update shares (clipping, rate, bias
// corrections). The second updates every parameter of every member with its member's.
template <class T>
void Adam::step(const ExecSpace& space, const Kokkos::View<float*, DeviceMemory>& parameters,
                const Kokkos::View<const float*, DeviceMemory>& grads, std::size_t grad_stride,
                const Kokkos::View<T*, DeviceMemory>& working,
                const Kokkos::View<const int*, DeviceMemory>& active) {
  const std::size_t members = m_layout.members, n = m_layout.size, stride = m_layout.stride;
  const std::size_t extent = m_layout.extent();
  if (parameters.extent(0) < extent || grads.extent(0) < (members - 1) * grad_stride + n ||
      (members > 1 && grad_stride < n) || (active.extent(0) != 0 && active.extent(0) < members)) {
    throw InputError("Adam::step: the parameter or gradient buffers do not fit the members");
  }
  const int block_count = static_cast<int>(norm_blocks(n));
  const auto blocks = m_norm_blocks;
  const auto arrivals = m_arrivals;
  const auto settings = m_device_settings;
  const auto m = m_m, v = m_v;
  const auto counters = m_counters;
  const auto factors = m_factors;
  const bool all_active = active.extent(0) == 0;
  const int team = tree_sum_team_size();
  Policy policy(space, static_cast<int>(members) * block_count, team);
  policy.set_scratch_size(0, Kokkos::PerTeam(Scratch::shmem_size(team)));
  Kokkos::parallel_for(
      "dqntrader::nn::adam_norm", policy, KOKKOS_LAMBDA(const Member& member) {
        const int size = member.team_size(), rank = member.team_rank();
        const std::size_t k = static_cast<std::size_t>(member.league_rank() / block_count);
        const int b = member.league_rank() % block_count;
        const Scratch partial(member.team_scratch(0), size);
        const float* const g_k = grads.data() + k * grad_stride;
        const std::size_t first = static_cast<std::size_t>(b) * kNormValues;
        const std::size_t last = first + kNormValues < n ? first + kNormValues : n;
        const std::size_t step = static_cast<std::size_t>(size);
        double sum = 0.0;
        for (std::size_t i0 = first + static_cast<std::size_t>(rank); i0 < last;
             i0 += step * kNormAhead) {
          float g[kNormAhead];
          for (int a = 0; a < kNormAhead; ++a) {
            const std::size_t i = i0 + static_cast<std::size_t>(a) * step;
            g[a] = i < last ? g_k[i] : 0.0f;
          }
          for (int a = 0; a < kNormAhead; ++a)
            sum += static_cast<double>(g[a]) * g[a];
        }
        partial(rank) = sum;
        team_tree_sum(member, partial, 1);
        if (rank == 0)
          blocks(k, b) = partial(0);
        if (!last_to_arrive(member, &arrivals(k), block_count))
          return;
        const volatile double* const sums = &blocks(k, 0);
        double mine = 0.0;
        for (int c = rank; c < block_count; c += size)
          mine += sums[c];
        partial(rank) = mine;
        team_tree_sum(member, partial, 1);
        if (rank != 0)
          return;
        AdamStepFactors f{0, 1.0f, 0.0f, 1.0f, 1.0f};
        if (!all_active && active(k) == 0) {
          factors(k) = f;  // a stopped member: nothing changes
          return;
        }
        AdamCounters c = counters(k);
        f = step_factors(settings(k), c, partial(0));
        counters(k) = c;
        factors(k) = f;
      });
  // The update: a team per tile of kUpdateThreads * kTileRounds * kAhead parameters of one
  // member, its threads kAhead parameters at a time, kUpdateThreads apart (loaded before any
  // is stored, so that the loads overlap).
  const bool write_working = working.extent(0) >= extent;
  const std::size_t tile = std::size_t{kUpdateThreads} * kTileRounds * kAhead;
  const std::size_t tiles = (n + tile - 1) / tile;
  Kokkos::parallel_for(
      "dqntrader::nn::adam_update",
      Policy(space, static_cast<int>(members * tiles), kUpdateThreads),
      KOKKOS_LAMBDA(const Member& member) {
        const std::size_t k = static_cast<std::size_t>(member.league_rank()) / tiles;
        const AdamStepFactors f = factors(k);
        if (f.apply == 0)
          return;  // NaN or infinity, or a stopped member: skip the step
        const AdamSettings s = settings(k);
        const std::size_t at = k * stride;  // the member's parameters and moments
        const float* const g_k = grads.data() + k * grad_stride;
        const std::size_t size = kUpdateThreads;
        const std::size_t begin = static_cast<std::size_t>(member.league_rank()) % tiles * tile +
                                  static_cast<std::size_t>(member.team_rank());
        const std::size_t end = begin - static_cast<std::size_t>(member.team_rank()) + tile;
        for (std::size_t first = begin; first < end && first < n; first += size * kAhead) {
          float g[kAhead], mi[kAhead], vi[kAhead], p[kAhead];
          for (int a = 0; a < kAhead; ++a) {
            const std::size_t i = first + static_cast<std::size_t>(a) * size;
            const bool in = i < n;
            g[a] = in ? g_k[i] : 0.0f;
            mi[a] = in ? m(at + i) : 0.0f;
            vi[a] = in ? v(at + i) : 0.0f;
            p[a] = in ? parameters(at + i) : 0.0f;
          }
          for (int a = 0; a < kAhead; ++a) {
            const std::size_t i = first + static_cast<std::size_t>(a) * size;
            if (i >= n)
              break;
            const float value = updated(s, f, g[a], mi[a], vi[a], p[a]);
            m(at + i) = mi[a];
            v(at + i) = vi[a];
            parameters(at + i) = value;
            if (write_working)
              store(working(at + i), value);
          }
        }
      });
}

template void Adam::step<float>(const ExecSpace&, const Kokkos::View<float*, DeviceMemory>&,
                                const Kokkos::View<const float*, DeviceMemory>&, std::size_t,
                                const Kokkos::View<float*, DeviceMemory>&,
                                const Kokkos::View<const int*, DeviceMemory>&);
template void Adam::step<bf16>(const ExecSpace&, const Kokkos::View<float*, DeviceMemory>&,
                               const Kokkos::View<const float*, DeviceMemory>&, std::size_t,
                               const Kokkos::View<bf16*, DeviceMemory>&,
                               const Kokkos::View<const int*, DeviceMemory>&);

}  // namespace dqntrader::nn

#include "dqntrader/env/trading_env.hpp"

#include <string>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/random.hpp"
#include "dqntrader/core/team_sum.hpp"

namespace dqntrader::env {

namespace {
void start(const ExecSpace& space, const Kokkos::View<std::int32_t*, DeviceMemory>& bar,
           const Kokkos::View<std::int32_t*, DeviceMemory>& age,
           const Kokkos::View<std::int8_t*, DeviceMemory>& position, const EnvSettings s) {
  const std::size_t span = s.end - 1 - s.begin, count = s.environments;
  Kokkos::parallel_for(
      "dqntrader::env::start", Kokkos::RangePolicy<ExecSpace>(space, 0, bar.extent(0)),
      KOKKOS_LAMBDA(const std::size_t i) {
        // Spread over the window, and out of step so that episodes do not all end together;
        // every member's environments start alike.
        const std::size_t e = i % count;
        bar(i) = static_cast<std::int32_t>(s.begin + (e * span) / count);
        age(i) = static_cast<std::int32_t>((e * s.episode_length) / count);
        position(i) = static_cast<std::int8_t>(s.flat_index);
      });
}
}  // namespace

TradingEnv::TradingEnv(const ExecSpace& space, const replay::RewardModel& rewards,
                       const EnvSettings& settings)
    : m_rewards(rewards), m_settings(settings) {
  if (settings.end < settings.begin + 3)
    throw InputError("the training window needs at least 3 bars");
  const std::size_t all = rewards.members.extent(0) * settings.environments;
  auto alloc = [&](const char* label) { return Kokkos::view_alloc(space, std::string(label)); };
  m_bar = Kokkos::View<std::int32_t*, DeviceMemory>(alloc("dqntrader::env::bar"), all);
  m_age = Kokkos::View<std::int32_t*, DeviceMemory>(alloc("dqntrader::env::age"), all);
  m_position = Kokkos::View<std::int8_t*, DeviceMemory>(alloc("dqntrader::env::position"), all);
  m_arrivals = Kokkos::View<int, DeviceMemory>(alloc("dqntrader::env::arrivals"));
  start(space, m_bar, m_age, m_position, settings);
}

void TradingEnv::add_buffers(io::MemberBuffers& buffers) const {
  buffers.add_blocks("env_bar", m_bar);
  buffers.add_blocks("env_age", m_age);
  buffers.add_blocks("env_position", m_position);
}

void TradingEnv::step(const ExecSpace& space, const gemm::StridedBatch<const float>& q,
                      const replay::ReplayBuffer& replay,
                      const Kokkos::View<std::int64_t*, DeviceMemory>& step_counter,
                      const Kokkos::View<const int*, DeviceMemory>& active) const {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = Policy::member_type;
  const std::size_t members = this->members();
  if (q.extent(0) != members || q.extent(1) < m_settings.environments ||
      step_counter.extent(0) < members || replay.members() != members ||
      (active.extent(0) != 0 && active.extent(0) < members)) {
    throw InputError("TradingEnv::step: Q-values, counters or replay not one per member");
  }
  const EnvSettings s = m_settings;
  const replay::RewardModel rewards = m_rewards;
  const auto bar = m_bar, age = m_age;
  const auto position = m_position;
  const auto arrivals = m_arrivals;
  const replay::Ring ring = replay.ring();
  const auto total = replay.total();
  const std::int64_t capacity = static_cast<std::int64_t>(replay.capacity());
  const std::int64_t environments = static_cast<std::int64_t>(s.environments);
  const std::size_t actions = q.extent(2);
  const bool all_active = active.extent(0) == 0;
#if defined(DQNTRADER_BACKEND_CUDA)
  const int team = 64;
#else
  const int team = 1;
#endif
  // Teams never span two members.
  const int per_member = static_cast<int>((s.environments + team - 1) / team);
  const int teams = per_member * static_cast<int>(members);
  Kokkos::parallel_for(
      "dqntrader::env::step", recordable(Policy(space, teams, team)),
      KOKKOS_LAMBDA(const Member& member) {
        const std::size_t m = static_cast<std::size_t>(member.league_rank() / per_member);
        const MemberSettings& settings = rewards.members(m);
        const bool stepping = all_active || active(m) != 0;
        const std::int64_t step = step_counter(m), written = total(m);
        const std::size_t first =
            static_cast<std::size_t>(member.league_rank() % per_member) * team;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(member, team), [&](const int k) {
          const std::size_t e = first + static_cast<std::size_t>(k);
          if (e >= s.environments || !stepping)
            return;
          const std::size_t i = m * s.environments + e;  // the environment's arrays' index
          const std::uint64_t stream = 0x454E5653ull ^ static_cast<std::uint64_t>(step);
          int action = 0;
          if (to_unit_double(counter_random(settings.seed, stream, 3 * e)) <
              epsilon_at(settings, step)) {
            action = static_cast<int>(counter_random(settings.seed, stream, 3 * e + 1) % actions);
          } else {
            for (std::size_t a = 1; a < actions; ++a) {
              if (q(m, e, a) > q(m, e, action))
                action = static_cast<int>(a);
            }
          }
          const std::int32_t t = bar(i);
          const int incoming = position(i);
          const bool last = age(i) + 1 >= static_cast<std::int32_t>(s.episode_length) ||
                            static_cast<std::size_t>(t) + 2 >= s.end;
          const std::int64_t slot = static_cast<std::int64_t>(m) * capacity +
                                    (written + static_cast<std::int64_t>(e)) % capacity;
          ring.bar(slot) = t;
          ring.position(slot) = static_cast<std::int8_t>(incoming);
          ring.action(slot) = static_cast<std::int8_t>(action);
          ring.reward(slot) = rewards(m, static_cast<std::size_t>(t), incoming, action);
          ring.last(slot) = last ? 1 : 0;
          if (last) {
            const std::size_t span = s.end - 1 - s.begin;
            bar(i) = static_cast<std::int32_t>(
                s.begin + counter_random(settings.seed, stream, 3 * e + 2) % span);
            age(i) = 0;
            position(i) = static_cast<std::int8_t>(s.flat_index);
          } else {
            bar(i) = t + 1;
            age(i) += 1;
            position(i) = static_cast<std::int8_t>(action);
          }
        });
        // Every team has read the counters above before it arrives; the last advances every
        // member's, a thread a member (one thread in turn, each a chain of loads and stores,
        // was a long serial chain for a population).
        if (last_to_arrive(member, &arrivals(), teams)) {
          Kokkos::parallel_for(Kokkos::TeamThreadRange(member, members), [&](const std::size_t n) {
            if (all_active || active(n) != 0) {
              total(n) += environments;
              step_counter(n) += 1;
            }
          });
        }
      });
}

}  // namespace dqntrader::env

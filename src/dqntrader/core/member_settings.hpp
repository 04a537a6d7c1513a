// The settings a population's members may differ in, as the training kernels read them: one
// record per member in a small device array, indexed by the member (one agent is a
// population of one). Adam keeps its own per-member settings (nn::AdamSettings).
#pragma once

#include <cstdint>

namespace dqntrader {

struct MemberSettings {
  std::uint64_t seed = 1;  // every random stream of the member (exploration, draws)
  double gamma = 0.9;      // discount per bar
  int n_step = 1;          // bars summed into each return
  double reward_scale = 100.0;
  double huber_delta = 1.0;
  double epsilon_start = 1.0, epsilon_end = 0.05;
  std::int64_t epsilon_steps = 1500;
  std::int64_t target_update = 200;  // hard update every this many learning steps (tau = 0)
  double tau = 0.0;                  // soft update rate per step; 0: hard updates
  int vaccine = 1;                   // 1: vaccine batches at the population's interval, 0: none
  int probe = 1;                     // 1: the causal probe's sums are kept, 0: not
};

}  // namespace dqntrader

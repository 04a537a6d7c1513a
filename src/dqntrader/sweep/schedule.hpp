// A sweep's schedule: what a population does with its members between epochs.
//
//   none      every member trains for its whole budget with the settings it was given.
//   pbt       population based training (Jaderberg et al. 2017): at the end of every
//             `interval`-th epoch (from `burn_in` on, not after the last), the running members
//             are ranked by the epoch's validation Sharpe (descending; a NaN last; ties by
//             member index), and each of the bottom q = max(1, floor(fraction * n)) members
//             (q at most n / 2), in member order, copies a member of the top q drawn uniformly:
//             its networks, Adam's state and its settings (DqnTrainer::copy_members; its replay
//             ring and environments stay its own). Then each setting the space varies per
//             member (not its seed) is, in the space's order, drawn afresh from the space with
//             probability `resample`, or else perturbed: a range's number multiplied by one of
//             the two `perturb` factors (chosen evenly; rounded for whole-number settings and
//             kept within the range), a list's value moved to its neighbour (down for the
//             smaller factor, up for the larger; kept at the ends). A change the member could
//             not train with (its settings invalid, or an n-step longer than the population's
//             replay windows) is not made.
//   halving   successive halving: at the end of every `halving_interval`-th epoch (not after
//             the last), of the n running members the best ceil(n / rate) go on, by the same
//             ranking; the others stop (status stopped early) and their slots take no more
//             steps.
//
// The draws: HostRng(counter_random(seed, population, epoch)) (core/random.hpp), one stream
// per decision, consumed in the order above (for each bottom member: the top member's index,
// then per setting one uniform for the choice, then either the axis's draw (search_space.hpp:
// draw) or one uniform for the factor). The same command gives the same lineage, and a resume
// from any epoch the same decisions, without any generator state in checkpoints.
//
// Each population decides within itself (a sweep that needs several populations runs PBT in
// each); decide() takes scores and members of one population, and would take the whole
// sweep's the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "dqntrader/sweep/search_space.hpp"
#include "dqntrader/train/train_config.hpp"

namespace dqntrader::sweep {

struct ScheduleSettings {
  std::string kind = "none";  // none, pbt or halving
  std::size_t interval = 1;   // pbt: epochs between decisions
  double fraction = 0.25;     // pbt: the bottom and top quantile
  double perturb_down = 0.8, perturb_up = 1.2;
  double resample = 0.25;   // pbt: probability of drawing a setting afresh
  std::size_t burn_in = 0;  // pbt: no decision before the end of this epoch
  double halving_rate = 2;  // halving: 1 / rate of the running members go on
  std::size_t halving_interval = 1;
  std::uint64_t seed = 1;  // of the decisions' draws (the sweep's --random-seed)
};

/// InputError naming the flag when a setting is out of its range: kind none, pbt or halving;
/// intervals at least 1; fraction in (0, 0.5]; perturb factors positive, the first below 1
/// and the second above; resample in [0, 1]; halving rate above 1.
void check(const ScheduleSettings& settings);

/// InputError naming the flags when a schedule of pbt or halving would never decide in a run
/// of `epochs` epochs (decisions come after an epoch before the last: a multiple of the
/// interval, and for pbt at or after the burn-in).
void check_decides(const ScheduleSettings& settings, std::size_t epochs);

/// "0.8,1.2" -> the two factors (InputError naming --pbt-perturb when malformed).
std::pair<double, double> parse_perturb(const std::string& text);

/// As sweep.json records it (kind and the settings of that kind), and back (absent: none).
nlohmann::json to_json(const ScheduleSettings& settings);
ScheduleSettings schedule_from_json(const nlohmann::json& json, const std::string& source);

/// The settings a PBT decision changes: the space's axes whose setting is a member's own (the
/// rest form populations and stay).
std::vector<const Axis*> scheduled_axes(const SearchSpace& space);

/// One decision of a population.
struct Decision {
  std::vector<std::pair<std::size_t, std::size_t>> copies;  // (to, from) members
  std::vector<nlohmann::json> values;  // each copy's scheduled settings after it: name -> value
  std::vector<std::size_t> stops;      // halving: the members that stop
};

/// The decision at the end of `epoch` (of `epochs`) for population `population` of a sweep
/// of `space`: scores[m] is member m's validation Sharpe of the epoch, running[m] whether it
/// still trains, now[m] its settings now. take(m, settings) gives member m new settings, or
/// throws InputError, leaving it as it was, when it cannot train with them
/// (DqnTrainer::set_member); the copies of the members' state are the caller's. Empty when
/// no decision falls at this epoch.
Decision decide(const ScheduleSettings& settings, const SearchSpace& space, std::size_t population,
                std::size_t epoch, std::size_t epochs, const std::vector<double>& scores,
                const std::vector<bool>& running, const std::vector<train::TrainConfig>& now,
                const std::function<void(std::size_t, const train::TrainConfig&)>& take);

/// The running members in rank order: descending score, a NaN last, ties by member index.
std::vector<std::size_t> ranking(const std::vector<double>& scores,
                                 const std::vector<bool>& running);

}  // namespace dqntrader::sweep

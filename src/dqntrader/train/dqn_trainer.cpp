#include "dqntrader/train/dqn_trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <type_traits>

#include "backends/execution.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/core/kokkos_compat.hpp"
#include "dqntrader/core/transfer.hpp"
#include "dqntrader/env/states.hpp"
#include "dqntrader/env/trading_env.hpp"
#include "dqntrader/eval/backtest_evaluator.hpp"
#include "dqntrader/io/member_buffers.hpp"
#include "dqntrader/io/record.hpp"
#include "dqntrader/nn/adam.hpp"
#include "dqntrader/nn/mlp.hpp"
#include "dqntrader/replay/replay_buffer.hpp"
#include "dqntrader/replay/vaccine_set.hpp"
#include "dqntrader/train/causal_probe.hpp"
#include "dqntrader/train/injected_faults.hpp"
#include "dqntrader/train/learning_step.hpp"
#include "dqntrader/train/member_networks.hpp"
#include "dqntrader/train/td_loss.hpp"
#include "dqntrader/train/training_guard.hpp"

namespace dqntrader::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Rows [first, first + count) of every matrix of a batch.
template <class T>
gemm::StridedBatch<T> rows_of(const gemm::StridedBatch<T>& m, std::size_t first,
                              std::size_t count) {
  return gemm::StridedBatch<T>(
      m.data() + first * m.stride(1),
      Kokkos::LayoutStride(m.extent(0), m.stride(0), count, m.stride(1), m.extent(2), 1));
}

// The first count matrices of a batch.
template <class T>
gemm::StridedBatch<T> first_matrices(const gemm::StridedBatch<T>& m, std::size_t count) {
  return gemm::StridedBatch<T>(
      m.data(), Kokkos::LayoutStride(count, m.stride(0), m.extent(1), m.stride(1), m.extent(2), 1));
}

// The population's host counters (the same for every member, which step together) and each
// member's counts at its last epoch's end.
struct HostCounters {
  std::int64_t steps = 0, learning_steps = 0, epoch = 0;
};
template <class S, class F,
          class = std::enable_if_t<std::is_same<std::remove_const_t<S>, HostCounters>::value>>
void for_each_field(S& s, F&& f) {
  f("steps", s.steps);
  f("learning_steps", s.learning_steps);
  f("epoch", s.epoch);
}
struct MemberCounters {
  std::int64_t skipped_before, restores_before;
};
// Every member's counters as one record (io/record.hpp): "skipped_before.<m>",
// "restores_before.<m>".
template <class V, class F>
void member_counter_fields(V& counters, F&& f) {
  for (std::size_t m = 0; m < counters.size(); ++m) {
    f("skipped_before." + std::to_string(m), counters[m].skipped_before);
    f("restores_before." + std::to_string(m), counters[m].restores_before);
  }
}

// A batch's sampler for each member: from the vaccine set on a vaccine step when the member
// uses it, from its replay ring otherwise.
struct LearningSampler {
  replay::ReplaySampler replay;
  replay::VaccineSet::Sampler vaccine;
  Kokkos::View<const MemberSettings*, DeviceMemory> members;
  bool vaccine_step;

  KOKKOS_INLINE_FUNCTION replay::Sample operator()(std::size_t m, std::size_t i) const {
    return vaccine_step && members(m).vaccine != 0 ? vaccine(m, i) : replay(m, i);
  }
};

}  // namespace

class DqnTrainer::Engine {
 public:
  virtual ~Engine() = default;
  virtual std::vector<EpochReport> run_epoch(const std::function<bool()>& interrupted) = 0;
  virtual std::vector<float> parameters(std::size_t member) const = 0;
  virtual void snapshot(io::Snapshot& out) const = 0;
  // The state of the members at positions keep (ascending), laid out as a population of
  // those members holds it.
  virtual std::vector<io::Section> state(const std::vector<std::size_t>& keep) const = 0;
  virtual void restore(const std::vector<io::Section>& sections, const std::string& source) = 0;
  virtual void inject_fault(std::size_t member, const std::string& kind) = 0;
  virtual void stop(std::size_t member) = 0;
  virtual void copy_members(const std::vector<std::pair<std::size_t, std::size_t>>& copies) = 0;
  virtual void set_member(std::size_t member, const TrainConfig& settings) = 0;
  virtual double recorded_kernels_per_step() const = 0;

  std::vector<TrainConfig> members;
  TrainConfig config;  // the population's loop (population_config)
  nn::NetworkSpec network;
  data::FeatureSpec feature_spec;
  data::FeatureStats stats;
  std::vector<double> positions = {-1.0, 0.0, 1.0};
  std::size_t train_begin = 0, train_end = 0, val_begin = 0, val_end = 0, vaccine_bars = 0;
  std::vector<eval::BarRange> windows;  // walk-forward validation windows
  std::vector<int> active;              // host copy: members that still step
  LearningPath learning_path = LearningPath::products;
};

namespace {

template <class T>
class EngineImpl final : public DqnTrainer::Engine {
 public:
  // loop: the population's loop (population_config of every member it was made with);
  // n_step_windows: the n-step the replay's windows are sized for (their largest).
  EngineImpl(const ExecSpace& space, const std::vector<TrainConfig>& member_configs,
             const TrainConfig& loop, int n_step_windows, const data::Bars& bars,
             const data::Bars* validation, const data::FeatureSpec& spec)
      : m_space(space),
        m_train_features(space, bars, spec),
        m_faults(space, member_configs.size()),
        m_copies(space, member_configs.size()),
        m_buffers(member_configs.size()) {
    members = member_configs;
    config = loop;
    feature_spec = spec;
    split_and_standardize(bars.size(), validation);
    network.features = spec.count();
    network.positions = positions.size();
    network.actions = positions.size();
    network.hidden = config.hidden;
    network.dueling = config.dueling;
    const std::vector<std::uint64_t> seeds = upload_member_settings();
    make_environments(bars, n_step_windows, seeds);
    make_learning_step();
    register_checkpoint_buffers();
    make_validation();
    compat::fence(space, "dqntrader::train: setup uploads finish before the host vectors go");
  }

  std::vector<EpochReport> run_epoch(const std::function<bool()>& interrupted) override {
    const auto start = Clock::now();
    upload_changed_settings();
    for (std::size_t done = 0; done < config.steps_per_epoch;) {
      if (interrupted && interrupted())
        throw Interrupted("training interrupted after step " + std::to_string(done) +
                          " of the epoch; the last checkpoint is the run's state");
      done += advance(config.steps_per_epoch - done);  // recorded cycles where they fit
    }
    std::vector<EpochReport> reports = read_epoch(start);
    validate_members(reports);
    return reports;
  }

  std::vector<float> parameters(std::size_t member) const override {
    return m_networks->parameters(m_space, member);
  }

  void snapshot(io::Snapshot& out) const override {
    m_buffers.save(out, m_space);
    std::vector<std::size_t> every(count());
    std::iota(every.begin(), every.end(), std::size_t{0});
    std::vector<io::Section> host;
    save_host_state(host, every);
    for (io::Section& s : host)
      out.add(std::move(s));
  }

  std::vector<io::Section> state(const std::vector<std::size_t>& keep) const override {
    std::vector<io::Section> out;
    m_buffers.save(out, keep, m_space);
    save_host_state(out, keep);
    return out;
  }

  void restore(const std::vector<io::Section>& sections, const std::string& source) override {
    m_buffers.load(sections, source);
    // Whether the loaded targets are the loaded snapshot's is not saved: the guard's next
    // check checks and copies them.
    Kokkos::deep_copy(m_guard->target_changed(), 1);
    const auto host =
        io::read_record<HostCounters>(io::find_section(sections, "host_counters", source), source);
    m_steps = host.steps;
    m_learning_steps = host.learning_steps;
    m_epoch = static_cast<std::size_t>(host.epoch);
    const io::RecordReader counters(io::find_section(sections, "member_counters", source), source);
    member_counter_fields(m_member_counters, counters);
    // The settings a schedule changed (checkpoints from before schedules have none): the
    // others stand as given.
    for (const io::Section& section : sections) {
      if (section.name != "member_settings")
        continue;
      const nlohmann::json saved = nlohmann::json::parse(section.bytes, nullptr, false);
      if (!saved.is_object())
        throw InputError(source, 0, 0, "bad member_settings section");
      for (const auto& item : saved.items()) {
        const std::size_t m = std::stoul(item.key());
        if (m >= members.size())
          throw InputError(source, 0, 0, "bad member_settings section");
        TrainConfig member = members[m];
        apply_settings(member, item.value(), source);
        set_member(m, member);
      }
    }
    auto active_host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), m_active);
    for (std::size_t m = 0; m < active.size(); ++m)
      active[m] = active_host(m);
    m_networks->refresh_working(m_space);
    compat::fence(m_space, "dqntrader::train: the restored state is in place");
  }

  void inject_fault(std::size_t member, const std::string& kind) override {
    m_faults.inject(member, kind);
  }

  void copy_members(const std::vector<std::pair<std::size_t, std::size_t>>& copies) override {
    if (copies.empty())
      return;
    const MemberCopies pairs = m_copies.upload(m_space, copies);
    m_networks->copy_members(m_space, pairs);
    m_adam->copy_members(m_space, pairs);
    m_guard->copy_members(m_space, pairs);  // the next epoch's work follows them on the stream
  }

  void set_member(std::size_t member, const TrainConfig& settings) override {
    auto soft = [this] {
      return std::any_of(m_settings_host.begin(), m_settings_host.end(),
                         [](const MemberSettings& s) { return s.tau > 0.0; });
    };
    const bool was_soft = soft();
    members.at(member) = settings;
    m_rescheduled[member] = 1;
    // On the host now, on the device before the next step (run_epoch()): one upload however
    // many members a decision changes.
    const MemberRecords records = member_records(settings, config);
    m_settings_host[member] = records.kernels;
    m_adam->set_settings(member, records.adam);
    m_settings_changed = true;
    // A recorded cycle holds the soft target updates only when some member makes them: it is
    // recorded again (after a cycle of eager steps) when that changes.
    if (soft() != was_soft) {
      m_cycle.clear();
      m_first_cycle = -1;
    }
  }

  void stop(std::size_t member) override {
    active.at(member) = 0;
    const Kokkos::View<int*, DeviceMemory> all = m_active;
    const int m = static_cast<int>(member);
    Kokkos::parallel_for(
        "dqntrader::train::stop", Kokkos::RangePolicy<ExecSpace>(m_space, 0, 1),
        KOKKOS_LAMBDA(const int) { all(m) = 0; });
  }

 private:
  // The windows of the bars (training, validation: run_data's split), the validation bars'
  // features when they are a file of their own, the training window's feature statistics and
  // the standardized features the learning step reads.
  void split_and_standardize(std::size_t bars, const data::Bars* validation) {
    const RunWindows w =
        split_windows(config, bars, validation ? validation->size() : 0, feature_spec.warmup());
    train_begin = w.train_begin;
    train_end = w.train_end;
    val_begin = w.val_begin;
    val_end = w.val_end;
    if (validation != nullptr)
      m_val_features = std::make_unique<data::FeatureSet>(m_space, *validation, feature_spec);
    stats = m_train_features.fit(train_begin, train_end);
    m_features = standardized();
  }

  // The members' settings in the small device arrays the kernels read, which members step,
  // and their networks (initialised from their seeds, which it returns).
  std::vector<std::uint64_t> upload_member_settings() {
    const std::size_t k = members.size();
    std::vector<MemberSettings> settings;
    std::vector<std::uint64_t> seeds;
    for (const TrainConfig& m : members) {
      const MemberRecords records = member_records(m, config);
      settings.push_back(records.kernels);
      m_adam_settings.push_back(records.adam);
      seeds.push_back(m.seed);
    }
    m_settings_host = settings;
    m_settings = upload(m_space, settings, "dqntrader::train::member_settings");
    active.assign(k, 1);
    m_active = upload(m_space, active, "dqntrader::train::active");
    m_rescheduled.assign(k, 0);
    m_networks = std::make_unique<MemberNetworks<T>>(m_space, nn::ParameterLayout(network), seeds);
    return seeds;
  }

  // The environments on the training window, the replay rings, the vaccine's stress bars and
  // the causal probe, all rewarded by one reward model.
  void make_environments(const data::Bars& bars, int n_step_windows,
                         const std::vector<std::uint64_t>& seeds) {
    const TrainConfig& c = config;
    const Kokkos::View<double*, DeviceMemory> position_values =
        upload(m_space, positions, "dqntrader::train::positions");
    const replay::RewardModel rewards{m_train_features.close(), position_values, c.cost, m_settings,
                                      m_faults.poisoned()};
    env::EnvSettings env_settings;
    env_settings.environments = c.environments;
    env_settings.begin = train_begin;
    env_settings.end = train_end;
    env_settings.episode_length = c.episode_length;
    env_settings.flat_index = 1;
    m_env = std::make_unique<env::TradingEnv>(m_space, rewards, env_settings);
    m_replay = std::make_unique<replay::ReplayBuffer>(m_space, m_settings, c.replay_capacity,
                                                      c.environments, n_step_windows);
    m_vaccine = std::make_unique<replay::VaccineSet>(m_space, bars.close, train_begin, train_end,
                                                     c.vaccine_quantile, rewards);
    vaccine_bars = m_vaccine->bars();
    m_probe = std::make_unique<CausalProbe<T>>(m_space, m_features, feature_spec, positions.size(),
                                               train_begin, train_end, c.probe_batch, seeds);
  }

  // The learning step on its path, Adam, the guard, and the step's buffers: the batch, the
  // states it assembles, the online Q-values, the loss's sums and the step counters.
  void make_learning_step() {
    const TrainConfig& c = config;
    const std::size_t k = members.size(), b = c.batch_size, e = c.environments;
    const std::size_t online_rows = std::max(2 * b + e, m_probe->rows());
    learning_path = choose(c.learning_path, network, c.precision);
    m_learn = std::make_unique<LearningStep<T>>(m_space, network, c.precision, k, b, e, online_rows,
                                                learning_path);
    m_adam = std::make_unique<nn::Adam>(m_space, m_networks->layout(), m_adam_settings);
    m_guard = std::make_unique<TrainingGuard>(m_space, m_networks->layout(), c.guard_limit);
    auto alloc = [&](const char* label) { return Kokkos::view_alloc(m_space, std::string(label)); };
    m_batch = replay::Batch(m_space, k * b);
    m_states =
        MatrixBatch<T>(alloc("dqntrader::train::states"), k, 2 * b + e, network.state_size());
    m_q_online = MatrixBatch<float>(alloc("dqntrader::train::q"), k, online_rows, network.actions);
    m_loss = Kokkos::View<LossSums*, DeviceMemory>(alloc("dqntrader::train::loss"), k);
    m_sums = Kokkos::View<LossTotals*, DeviceMemory>(alloc("dqntrader::train::epoch_sums"), k);
    m_probe_sums = Kokkos::View<double**, DeviceMemory>(alloc("dqntrader::train::probe_sums"), k,
                                                        m_probe->groups().size());
    m_step = Kokkos::View<std::int64_t*, DeviceMemory>(alloc("dqntrader::train::step"), k);
    m_member_counters.assign(k, MemberCounters{0, 0});
    m_guard->snapshot(m_space, m_networks->learner_state(*m_adam));
  }

  // The device buffers a checkpoint holds, in the order of its format (the sections of
  // checkpoint-<E>.dqnckpt before the host's and the run's: train/run_checkpoint.hpp): a buffer
  // added here is a new section, and its place in this list is its place in the file.
  void register_checkpoint_buffers() {
    m_networks->add_buffers(m_buffers);  // online and target parameters, working copies
    m_buffers.add_strided("adam_m", m_adam->first_moment(), m_adam->layout().stride);
    m_buffers.add_strided("adam_v", m_adam->second_moment(), m_adam->layout().stride);
    m_buffers.add_blocks("adam_counters", m_adam->counters());
    m_guard->add_buffers(m_buffers);   // its snapshot and counters
    m_replay->add_buffers(m_buffers);  // the rings and their counts
    m_env->add_buffers(m_buffers);     // the environments' positions and bars
    m_buffers.add_blocks("step", m_step);
    m_buffers.add_blocks("poisoned", m_faults.poisoned());
    m_buffers.add_blocks("active", m_active);
  }

  // The evaluator of every member's online network on the validation window, and the
  // walk-forward windows it is cut into.
  void make_validation() {
    const TrainConfig& c = config;
    const data::FeatureSet& val_features = m_val_features ? *m_val_features : m_train_features;
    m_evaluator = std::make_unique<eval::BacktestEvaluator>(
        m_space, val_features, stats, network, eval::BarRange{val_begin, val_end},
        backtest_config(c, positions), members.size());
    const std::size_t span = (val_end - val_begin) / c.val_windows;
    for (std::size_t i = 0; i < c.val_windows; ++i) {
      windows.push_back(
          {val_begin + i * span, i + 1 == c.val_windows ? val_end : val_begin + (i + 1) * span});
    }
  }

  Matrix<T> standardized() const {
    if constexpr (std::is_same<T, bf16>::value) {
      return m_train_features.standardized_bf16(stats);
    } else {
      return m_train_features.standardized_float(stats);
    }
  }

  std::size_t count() const { return members.size(); }

  // The host's sections: its counters, and each member's counters and the settings that
  // set_member changed, of the members at positions keep, numbered in keep's order.
  void save_host_state(std::vector<io::Section>& out, const std::vector<std::size_t>& keep) const {
    out.push_back(io::record("host_counters", HostCounters{m_steps, m_learning_steps,
                                                           static_cast<std::int64_t>(m_epoch)}));
    std::vector<MemberCounters> counters;
    nlohmann::json changed = nlohmann::json::object();
    for (std::size_t i = 0; i < keep.size(); ++i) {
      counters.push_back(m_member_counters[keep[i]]);
      if (m_rescheduled[keep[i]] != 0)
        changed[std::to_string(i)] = member_settings_json(members[keep[i]]);
    }
    io::RecordWriter record;
    member_counter_fields(counters, record);
    out.push_back({"member_counters", record.bytes()});
    out.push_back({"member_settings", changed.dump()});
  }

  double recorded_kernels_per_step() const override {
    const std::size_t steps = recorded_steps(config);
    return steps > 0 ? static_cast<double>(m_cycle.kernels()) / static_cast<double>(steps) : 0.0;
  }

  // The settings set_member changed, on the device before the epoch's first step.
  void upload_changed_settings() {
    if (!m_settings_changed)
      return;
    // The epoch's read-back waits for these copies, before any set_member can follow.
    Kokkos::deep_copy(m_space, m_settings,
                      Kokkos::View<const MemberSettings*, Kokkos::HostSpace,
                                   Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
                          m_settings_host.data(), m_settings_host.size()));
    m_adam->upload_settings(m_space);
    m_settings_changed = false;
  }

  // The one read-back of the epoch (every member's sums and counters, after its steps, which
  // began at start) as each member's report; the sums start again from zero.
  std::vector<EpochReport> read_epoch(Clock::time_point start) {
    const TrainConfig& c = config;
    auto sums = Kokkos::create_mirror_view(m_sums);
    auto adam = Kokkos::create_mirror_view(m_adam->counters());
    auto guard = Kokkos::create_mirror_view(m_guard->counters());
    auto probe = Kokkos::create_mirror_view(m_probe_sums);
    auto steps = Kokkos::create_mirror_view(m_step);
    Kokkos::deep_copy(m_space, sums, m_sums);
    Kokkos::deep_copy(m_space, adam, m_adam->counters());
    Kokkos::deep_copy(m_space, guard, m_guard->counters());
    Kokkos::deep_copy(m_space, probe, m_probe_sums);
    Kokkos::deep_copy(m_space, steps, m_step);
    compat::fence(m_space, "dqntrader::train: the epoch summary is read on the host");
    const double train_seconds = seconds_since(start);
    ++m_epoch;

    const double nan = std::numeric_limits<double>::quiet_NaN();
    std::vector<EpochReport> reports(count());
    for (std::size_t m = 0; m < count(); ++m) {
      EpochReport& r = reports[m];
      r.epoch = m_epoch;
      r.steps = steps(m);
      r.learning_steps = adam(m).calls;
      const double samples = sums(m).batches * static_cast<double>(c.batch_size);
      r.loss = samples > 0 ? sums(m).loss / samples : nan;
      r.mean_q = samples > 0 ? sums(m).q / samples : nan;
      r.epsilon = env::epsilon_at(m_settings_host[m], steps(m));
      r.learning_rate = m_adam->learning_rate(m, adam(m).calls);
      r.skipped = adam(m).skipped - m_member_counters[m].skipped_before;
      r.restores = guard(m).restores - m_member_counters[m].restores_before;
      r.consecutive_faults = std::max(adam(m).consecutive, guard(m).consecutive);
      m_member_counters[m] = MemberCounters{adam(m).skipped, guard(m).restores};
      const double probes = static_cast<double>(m_probes_this_epoch);
      for (std::size_t g = 0; g < m_probe->groups().size(); ++g) {
        r.probe.push_back({m_probe->groups()[g], probes > 0 && m_settings_host[m].probe != 0
                                                     ? probe(m, g) / probes
                                                     : nan});
      }
      r.train_seconds = train_seconds;
    }
    Kokkos::deep_copy(m_space, m_sums, LossTotals{0, 0, 0});
    Kokkos::deep_copy(m_space, m_probe_sums, 0.0);
    m_probes_this_epoch = 0;
    return reports;
  }

  // Every member's validation on every window, in one evaluation, into its report.
  void validate_members(std::vector<EpochReport>& reports) {
    const auto start = Clock::now();
    const nn::MemberVectors& vectors = m_networks->layout();
    const eval::ParameterRows rows =
        eval::parameter_rows(m_networks->online().data(), count(), vectors.size, vectors.stride);
    const std::vector<std::vector<eval::WindowMetrics>> validation =
        windows.size() == 1
            ? std::vector<std::vector<eval::WindowMetrics>>{m_evaluator->evaluate_graphed(rows)}
            : m_evaluator->walk_forward(rows, windows);  // [window][member]
    const double seconds = seconds_since(start);
    for (std::size_t m = 0; m < count(); ++m) {
      EpochReport& r = reports[m];
      double sharpe = 0.0;
      for (const auto& window : validation) {
        r.validation.push_back(window[m]);
        sharpe += window[m].sharpe;
      }
      r.validation_sharpe = sharpe / static_cast<double>(validation.size());
      r.validation_seconds = seconds;
    }
  }

  // Whether a hard target update is due for some member after learning step `learning`.
  bool hard_update_due(std::int64_t learning) const {
    for (std::size_t m = 0; m < count(); ++m) {
      const MemberSettings& s = m_settings_host[m];
      if (active[m] != 0 && s.tau == 0.0 && learning % s.target_update == 0)
        return true;
    }
    return false;
  }

  void hard_updates(std::int64_t learning) {
    if (hard_update_due(learning)) {
      m_networks->update_targets(m_space, m_settings, m_active, false, learning,
                                 m_guard->target_changed());
    }
  }

  // Takes up to `left` steps and returns how many: one recorded cycle of graph_steps steps
  // when a cycle fits and learning runs throughout it, else one step. A cycle covers whole
  // periods of the vaccine, guard and probe, so that every replay repeats the same pattern;
  // the hard target updates, which need longer periods, run between replays.
  std::size_t advance(std::size_t left) {
    const TrainConfig& c = config;
    const std::int64_t cycle = static_cast<std::int64_t>(recorded_steps(c));
    // The first recorded cycle starts after a whole cycle of eager steps (every kernel warm),
    // counted from this trainer's first step, restored or not.
    if (cycle > 0 && m_first_cycle < 0)
      m_first_cycle = (m_learning_steps / cycle + 2) * cycle;
    const bool cyclic = cycle > 0 && m_learning_steps >= m_first_cycle &&
                        m_learning_steps % cycle == 0 && left >= static_cast<std::size_t>(cycle) &&
                        !m_faults.pending();
    if (!cyclic) {
      step();
      return 1;
    }
    if (!m_cycle.captured()) {
      compat::fence(m_space, "dqntrader::train: the stream must be idle before graph capture");
      m_cycle.capture(m_space, [this, cycle] {
        m_side.fork(m_space);  // the side's work is recorded with the cycle's
        // Records (or, without graphs, runs) the cycle's work; the host's counters are
        // advanced by the caller for every replay, so they are put back here.
        const std::int64_t steps = m_steps, learning = m_learning_steps;
        const std::size_t probes = m_probes_this_epoch;
        m_recording = true;
        for (std::int64_t i = 0; i < cycle; ++i)
          step();
        m_recording = false;
        m_steps = steps;
        m_learning_steps = learning;
        m_probes_this_epoch = probes;
      });
    }
    m_cycle.replay(m_space);
    // The side stream itself is not ordered after the replay (its recorded work is in the
    // graph): the next step's work there waits for the whole cycle.
    m_side.fork(m_space);
    m_steps += cycle;
    if (c.probe_interval > 0)
      m_probes_this_epoch += static_cast<std::size_t>(cycle) / c.probe_interval;
    for (std::int64_t i = 0; i < cycle; ++i)
      hard_updates(++m_learning_steps);
    return static_cast<std::size_t>(cycle);
  }

  // One step of every member. Work on the side stream (m_side) runs beside the main stream's:
  // the environments' step and the TD loss's sums across teams beside the backward pass, the
  // weight gradients' products beside the chain of input gradients (Mlp::backward), and the
  // next learning step's state assembly beside this one's Adam, guard and probe. The side is
  // joined back before anything on the main stream reads what it wrote, and by the end of
  // every step.
  void step() {
    const TrainConfig& c = config;
    const std::size_t b = c.batch_size, e = c.environments, k = count();
    if (m_faults.before_step(m_space))
      m_side.fork(m_space);  // the side's assembly and environments read the rewards
    // Learning, once the replay holds enough complete n-step windows (the host knows the
    // count: every step writes E transitions to each ring), draws its batches first, so that
    // one pass evaluates every member's online network on the batches' states s and s' and
    // the environments' (rows [2B, 2B + E)) and, beside it, its target network on s' (rows
    // [B, 2B)), one batched product per hidden layer each, and the TD loss, which evaluates
    // the heads, gives the environments' Q-values with the loss; then the environments act and
    // write their transitions, and the learning step follows.
    const std::int64_t total = m_steps * static_cast<std::int64_t>(e);
    const bool ready = total >= static_cast<std::int64_t>(c.learning_starts) &&
                       m_replay->end_sampleable(total) > m_replay->first_sampleable(total);
    const env::StateSource environments{m_env->bars(), m_env->positions()};
    const gemm::StridedBatch<float> q(m_q_online);
    gemm::StridedBatch<const float> env_q;
    if (ready) {
      // On the side, after the environments' last step and the last backward's reads of the
      // states, which went there too.
      assemble_learning_states(environments);
      m_side.join(m_space);
      loss();
      env_q = rows_of(gemm::StridedBatch<const float>(q), 2 * b, e);
    } else {
      const gemm::StridedBatch<T> online_states = first_matrices(m_states, k);
      env::assemble_states(m_space, Matrix<const T>(m_features), environments,
                           rows_of(online_states, 0, e));
      m_learn->evaluate(m_space, m_networks->online_weights(), online_states, e, rows_of(q, 0, e));
      env_q = rows_of(gemm::StridedBatch<const float>(q), 0, e);
    }
    ++m_steps;
    m_side.fork(m_space);
    // ... and advances the replays' totals and the members' step counters.
    m_env->step(m_side.space(), env_q, *m_replay, m_step, m_active);
    if (!ready) {
      m_side.join(m_space);
      return;
    }
    learn();  // its gradients join the side: the environments' Q-values are free after it
    monitor(b);
  }

  // The TD loss of this learning step's batches through the online and target networks; it
  // also writes the online Q-values of every row, the environments' included.
  void loss() {
    ++m_learning_steps;
    m_faults.before_loss(m_space, m_batch);
    m_learn->loss(m_space, m_side, m_networks->pair_weights(), m_states, m_batch, m_settings,
                  m_q_online, m_networks->gradients());
  }

  // Draws the batches of this learning step, from the vaccine set every vaccine_interval-th
  // step for the members that use it, and assembles their states and the environments' in one
  // kernel, on the side.
  void assemble_learning_states(const env::StateSource& environments) {
    const TrainConfig& c = config;
    const std::int64_t learning_step = m_learning_steps + 1;
    const bool vaccine_step = c.vaccine_interval > 0 &&
                              learning_step % static_cast<std::int64_t>(c.vaccine_interval) == 0;
    const LearningSampler sampler{m_replay->sampler(m_step), m_vaccine->sampler(m_step), m_settings,
                                  vaccine_step};
    env::assemble_learning_states(m_side.space(), Matrix<const T>(m_features), sampler, m_batch,
                                  environments, m_states);
  }

  // The rest of the learning step, after loss(): the gradients and Adam's step (the loss's
  // sums on the side, which the guard reads), the target networks.
  void learn() {
    const MemberNetworks<T>& nets = *m_networks;
    const nn::Gradients grads = nets.gradients();
    m_learn->learn(m_space, m_side, nets.online_weights(), grads, m_loss, m_sums,
                   Update<T>{m_adam.get(), nets.online(), nets.online_working(),
                             Kokkos::View<const int*, DeviceMemory>(m_active)},
                   m_faults);
    m_faults.after_update(m_space, nets.online(), nets.layout().stride);
    if (std::any_of(m_settings_host.begin(), m_settings_host.end(),
                    [](const MemberSettings& s) { return s.tau > 0.0; })) {
      nets.update_targets(m_space, m_settings, m_active, true, m_learning_steps,
                          m_guard->target_changed());
    }
    if (!m_recording)
      hard_updates(m_learning_steps);
  }

  // The guard's check and the causal probe, at their intervals, after learning step b.
  void monitor(std::size_t b) {
    const TrainConfig& c = config;
    const gemm::StridedBatch<float> q(m_q_online);
    if (c.guard_interval > 0 &&
        m_learning_steps % static_cast<std::int64_t>(c.guard_interval) == 0) {
      m_guard->check(m_space, m_networks->learner_state(*m_adam),
                     rows_of(gemm::StridedBatch<const float>(q), 0, 2 * b),
                     Kokkos::View<const LossSums*, DeviceMemory>(m_loss),
                     Kokkos::View<const int*, DeviceMemory>(m_active));
    }
    if (c.probe_interval > 0 &&
        m_learning_steps % static_cast<std::int64_t>(c.probe_interval) == 0) {
      const std::size_t rows = m_probe->rows();
      m_learn->evaluate(m_space, m_networks->online_weights(), m_probe->states(), rows,
                        rows_of(q, 0, rows));
      m_probe->accumulate(m_space, rows_of(gemm::StridedBatch<const float>(q), 0, rows), m_settings,
                          m_probe_sums);
      ++m_probes_this_epoch;
    }
  }

  ExecSpace m_space;
  data::FeatureSet m_train_features;
  std::unique_ptr<data::FeatureSet> m_val_features;
  Matrix<T> m_features;
  std::vector<MemberSettings> m_settings_host;
  std::vector<nn::AdamSettings> m_adam_settings;  // as made; set_member changes Adam's own
  Kokkos::View<MemberSettings*, DeviceMemory> m_settings;
  Kokkos::View<int*, DeviceMemory> m_active;  // members that still step
  InjectedFaults m_faults;
  std::vector<int> m_rescheduled;   // per member: set_member changed its settings
  CopyList m_copies;                // copy_members()'s list on the device
  io::MemberBuffers m_buffers;      // the device buffers a checkpoint holds
  bool m_settings_changed = false;  // the device's settings are behind the host's
  std::unique_ptr<MemberNetworks<T>> m_networks;
  std::unique_ptr<env::TradingEnv> m_env;
  std::unique_ptr<replay::ReplayBuffer> m_replay;
  std::unique_ptr<replay::VaccineSet> m_vaccine;
  std::unique_ptr<CausalProbe<T>> m_probe;
  std::unique_ptr<LearningStep<T>> m_learn;
  std::unique_ptr<nn::Adam> m_adam;
  std::unique_ptr<TrainingGuard> m_guard;
  std::unique_ptr<eval::BacktestEvaluator> m_evaluator;
  replay::Batch m_batch;
  // [s; s'; the environments' states] of member m in block m (its target reads them there
  // too).
  gemm::StridedBatch<T> m_states;
  MatrixBatch<float> m_q_online;  // each member's online network's Q-values
  Kokkos::View<LossSums*, DeviceMemory> m_loss;
  Kokkos::View<LossTotals*, DeviceMemory> m_sums;  // the epoch's, read once per epoch
  Kokkos::View<double**, DeviceMemory> m_probe_sums;
  Kokkos::View<std::int64_t*, DeviceMemory> m_step;
  std::vector<MemberCounters> m_member_counters;
  std::int64_t m_steps = 0, m_learning_steps = 0;
  std::size_t m_epoch = 0, m_probes_this_epoch = 0;
  exec::SideStream m_side;  // work beside the main stream's (step())
  exec::CapturedWork m_cycle;
  std::int64_t m_first_cycle = -1;
  bool m_recording = false;
};

}  // namespace

DqnTrainer::DqnTrainer(const ExecSpace& space, const std::vector<TrainConfig>& members,
                       const data::Bars& bars, const data::Bars* validation)
    : m_space(space), m_bars(&bars), m_validation(validation), m_members(members) {
  for (const TrainConfig& c : members)
    train::validate(c);
  check_population(members);
  const TrainConfig& config = members.front();
  m_spec = data::resolve_features(feature_config(config), bars);
  data::check_features_available(m_spec, bars,
                                 3 * static_cast<std::size_t>(largest_n_step(members)) + 8);
  if (validation != nullptr)
    data::check_features_available(m_spec, *validation, 2 * config.val_windows + 1);
  m_loop = population_config(members);
  m_n_step_windows = largest_n_step(members);
  m_shared = population_settings(members.front());
  for (std::size_t m = 0; m < members.size(); ++m)
    m_slots.push_back(m);
  m_engine = make_engine(m_slots);
}

DqnTrainer::DqnTrainer(const ExecSpace& space, const TrainConfig& config, const data::Bars& bars,
                       const data::Bars* validation)
    : DqnTrainer(space, std::vector<TrainConfig>{config}, bars, validation) {}

DqnTrainer::~DqnTrainer() = default;

std::unique_ptr<DqnTrainer::Engine> DqnTrainer::make_engine(
    const std::vector<std::size_t>& slots) const {
  std::vector<TrainConfig> configs;
  for (const std::size_t m : slots)
    configs.push_back(m_members[m]);
  if (m_loop.precision == Precision::bf16) {
    return std::make_unique<EngineImpl<bf16>>(m_space, configs, m_loop, m_n_step_windows, *m_bars,
                                              m_validation, m_spec);
  }
  return std::make_unique<EngineImpl<float>>(m_space, configs, m_loop, m_n_step_windows, *m_bars,
                                             m_validation, m_spec);
}

std::size_t DqnTrainer::slot(std::size_t member) const {
  const auto at = std::find(m_slots.begin(), m_slots.end(), member);
  if (member >= m_members.size() || at == m_slots.end()) {
    throw Error("DqnTrainer: member " + std::to_string(member) +
                " has no slot (it stopped, and compact() freed it)");
  }
  return static_cast<std::size_t>(at - m_slots.begin());
}

std::size_t DqnTrainer::members() const {
  return m_members.size();
}

std::vector<EpochReport> DqnTrainer::run_epoch(const std::function<bool()>& interrupted) {
  const std::vector<EpochReport> held = m_engine->run_epoch(interrupted);
  std::vector<EpochReport> out(m_members.size());
  for (EpochReport& r : out) {
    r.epoch = held.front().epoch;
    r.validation_sharpe = r.loss = r.mean_q = std::numeric_limits<double>::quiet_NaN();
  }
  for (std::size_t i = 0; i < m_slots.size(); ++i)
    out[m_slots[i]] = held[i];
  return out;
}

std::vector<float> DqnTrainer::parameters(std::size_t member) const {
  return m_engine->parameters(slot(member));
}

std::vector<io::Section> DqnTrainer::state() const {
  io::Snapshot out;
  snapshot(out);
  return out.copy();
}

void DqnTrainer::snapshot(io::Snapshot& out) const {
  m_engine->snapshot(out);
  const std::vector<std::uint64_t> slots(m_slots.begin(), m_slots.end());
  out.add({"slots", std::string(reinterpret_cast<const char*>(slots.data()),
                                slots.size() * sizeof(std::uint64_t))});
}

void DqnTrainer::restore(const std::vector<io::Section>& sections, const std::string& source) {
  // The members whose slots the state holds (a state from before compaction holds all).
  std::vector<std::size_t> slots(m_members.size());
  for (std::size_t m = 0; m < slots.size(); ++m)
    slots[m] = m;
  for (const io::Section& s : sections) {
    if (s.name != "slots")
      continue;
    if (s.bytes.size() % sizeof(std::uint64_t) != 0 || s.bytes.empty())
      throw InputError(source, 0, 0, "bad slots section");
    std::vector<std::uint64_t> saved(s.bytes.size() / sizeof(std::uint64_t));
    std::memcpy(saved.data(), s.bytes.data(), s.bytes.size());
    slots.assign(saved.begin(), saved.end());
    for (std::size_t i = 0; i < slots.size(); ++i) {
      if (slots[i] >= m_members.size() || (i > 0 && slots[i] <= slots[i - 1]))
        throw InputError(source, 0, 0, "bad slots section");
    }
  }
  if (slots != m_slots) {
    m_engine.reset();
    m_engine = make_engine(slots);
    m_slots = slots;
  }
  m_engine->restore(sections, source);
  for (std::size_t i = 0; i < m_slots.size(); ++i)
    m_members[m_slots[i]] = m_engine->members[i];
}

void DqnTrainer::compact() {
  std::vector<std::size_t> keep;  // positions of the slots that still step
  for (std::size_t i = 0; i < m_slots.size(); ++i) {
    if (m_engine->active[i] != 0)
      keep.push_back(i);
  }
  if (keep.empty() || keep.size() == m_slots.size())
    return;
  const std::vector<io::Section> kept = m_engine->state(keep);
  std::vector<std::size_t> slots;
  for (const std::size_t i : keep)
    slots.push_back(m_slots[i]);
  m_engine.reset();  // its memory is free before the smaller population is made
  m_engine = make_engine(slots);
  m_slots = slots;
  m_engine->restore(kept, "the population's compaction");
}

std::size_t DqnTrainer::slots() const {
  return m_slots.size();
}

void DqnTrainer::inject_fault(std::size_t member, const std::string& kind) {
  m_engine->inject_fault(slot(member), kind);
}

void DqnTrainer::stop(std::size_t member) {
  if (std::find(m_slots.begin(), m_slots.end(), member) != m_slots.end())
    m_engine->stop(slot(member));
}

void DqnTrainer::copy_members(const std::vector<std::pair<std::size_t, std::size_t>>& copies) {
  std::vector<int> role(members(), 0);  // 1: copied to, 2: copied from
  std::vector<std::pair<std::size_t, std::size_t>> slots;
  for (const auto& [to, from] : copies) {
    if (to >= members() || from >= members() || to == from || role[to] != 0 || role[from] == 1)
      throw Error("DqnTrainer::copy_members: a member copied to twice, or both to and from");
    role[to] = 1;
    role[from] = 2;
    slots.push_back({slot(to), slot(from)});
  }
  m_engine->copy_members(slots);
}

const TrainConfig& DqnTrainer::member(std::size_t m) const {
  return m_members.at(m);
}

void DqnTrainer::set_member(std::size_t m, const TrainConfig& settings) {
  check_member(m, settings);
  m_engine->set_member(slot(m), settings);
  m_members[m] = settings;
}

void DqnTrainer::check_member(std::size_t m, const TrainConfig& settings) const {
  const TrainConfig& now = m_members.at(m);
  validate(settings);
  if (settings.seed != now.seed)
    throw InputError("a member's seed keys its random streams and cannot change");
  // What check_population requires of a member, against the member as it trains now (the
  // population was checked when it was made).
  const auto shared = population_settings(settings);
  for (std::size_t i = 0; i < shared.size(); ++i) {
    if (shared[i].second != m_shared[i].second) {
      throw InputError(field(shared[i].first) +
                       " fixes a population's shapes or loop and cannot change for one member");
    }
  }
  if (settings.vaccine_interval != now.vaccine_interval ||
      settings.probe_interval != now.probe_interval)
    throw InputError("a member's " + field("vaccine-interval") + " and " + field("probe-interval") +
                     " stay as they are");
  if (settings.n_step > m_n_step_windows) {
    throw InputError(field("n-step") + " " + std::to_string(settings.n_step) +
                     " is longer than the replay's windows (" + std::to_string(m_n_step_windows) +
                     ", the population's largest when it was made)");
  }
  if (settings.n_step != m_n_step_windows &&
      settings.learning_starts <=
          static_cast<std::size_t>(m_n_step_windows - 1) * settings.environments)
    throw InputError(field("learning-starts") +
                     " does not hold an n-step window of the population's "
                     "largest " +
                     field("n-step") + " for every environment");
}

double DqnTrainer::recorded_kernels_per_step() const {
  return m_engine->recorded_kernels_per_step();
}

eval::PolicyFile DqnTrainer::policy(const std::vector<float>& parameters) const {
  eval::PolicyFile p;
  p.network = m_engine->network;
  p.features = m_engine->feature_spec;
  p.stats = m_engine->stats;
  p.positions = m_engine->positions;
  p.parameters = parameters;
  return p;
}

const nn::NetworkSpec& DqnTrainer::network() const {
  return m_engine->network;
}
const data::FeatureSpec& DqnTrainer::features() const {
  return m_engine->feature_spec;
}
std::pair<std::size_t, std::size_t> DqnTrainer::training_window() const {
  return {m_engine->train_begin, m_engine->train_end};
}
std::pair<std::size_t, std::size_t> DqnTrainer::validation_window() const {
  return {m_engine->val_begin, m_engine->val_end};
}
const std::vector<eval::BarRange>& DqnTrainer::validation_windows() const {
  return m_engine->windows;
}
const std::vector<double>& DqnTrainer::positions() const {
  return m_engine->positions;
}
std::size_t DqnTrainer::vaccine_bars() const {
  return m_engine->vaccine_bars;
}
LearningPath DqnTrainer::learning_path() const {
  return m_engine->learning_path;
}

}  // namespace dqntrader::train

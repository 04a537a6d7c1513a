#include "dqntrader/train/dqn_trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "backends/execution.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/core/kokkos_compat.hpp"
#include "dqntrader/core/transfer.hpp"
#include "dqntrader/env/states.hpp"
#include "dqntrader/env/trading_env.hpp"
#include "dqntrader/eval/backtest_evaluator.hpp"
#include "dqntrader/io/view_sections.hpp"
#include "dqntrader/nn/adam.hpp"
#include "dqntrader/nn/mlp.hpp"
#include "dqntrader/replay/replay_buffer.hpp"
#include "dqntrader/replay/vaccine_set.hpp"
#include "dqntrader/train/causal_probe.hpp"
#include "dqntrader/train/td_loss.hpp"
#include "dqntrader/train/training_guard.hpp"

namespace dqntrader::train {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// target = tau * online + (1 - tau) * target, and its working copy.
template <class T>
void soft_update(const ExecSpace& space, const Kokkos::View<const float*, DeviceMemory>& online,
                 const Kokkos::View<float*, DeviceMemory>& target,
                 const Kokkos::View<T*, DeviceMemory>& working, float tau) {
  const bool write_working = working.extent(0) == target.extent(0);
  Kokkos::parallel_for(
      "dqntrader::train::soft_update", Kokkos::RangePolicy<ExecSpace>(space, 0, target.extent(0)),
      KOKKOS_LAMBDA(const std::size_t i) {
        const float v = tau * online(i) + (1.0f - tau) * target(i);
        target(i) = v;
        if (write_working)
          store(working(i), v);
      });
}

template <class T>
void to_working(const ExecSpace& space, const Kokkos::View<const float*, DeviceMemory>& from,
                const Kokkos::View<T*, DeviceMemory>& to) {
  Kokkos::parallel_for(
      "dqntrader::train::to_working", Kokkos::RangePolicy<ExecSpace>(space, 0, from.extent(0)),
      KOKKOS_LAMBDA(const std::size_t i) { store(to(i), from(i)); });
}

// Rows [first, first + count) of a matrix as a matrix.
template <class T>
Matrix<T> rows_of(const Matrix<T>& m, std::size_t first, std::size_t count) {
  return Matrix<T>(m.data() + first * m.extent(1), count, m.extent(1));
}

struct HostCounters {
  std::int64_t steps, learning_steps, epoch, skipped_before, restores_before;
};

void write_nan(const ExecSpace& space, const Kokkos::View<float*, DeviceMemory>& view,
               std::size_t count) {
  Kokkos::parallel_for(
      "dqntrader::train::inject_nan", Kokkos::RangePolicy<ExecSpace>(space, 0, count),
      KOKKOS_LAMBDA(const std::size_t i) { view(i) = static_cast<float>(compat::quiet_nan()); });
}

void write_nan(const ExecSpace& space, const Kokkos::View<double*, DeviceMemory>& view) {
  Kokkos::parallel_for(
      "dqntrader::train::inject_nan", Kokkos::RangePolicy<ExecSpace>(space, 0, view.extent(0)),
      KOKKOS_LAMBDA(const std::size_t i) { view(i) = compat::quiet_nan(); });
}

}  // namespace

class DqnTrainer::Engine {
 public:
  virtual ~Engine() = default;
  virtual EpochReport run_epoch() = 0;
  virtual std::vector<eval::WindowMetrics> validate(const std::vector<float>& parameters) = 0;
  virtual std::vector<float> parameters() const = 0;
  virtual std::vector<io::Section> state() const = 0;
  virtual void restore(const std::vector<io::Section>& sections, const std::string& source) = 0;
  virtual void inject_fault(const std::string& kind) = 0;
  virtual double recorded_kernels_per_step() const = 0;

  TrainConfig config;
  nn::NetworkSpec network;
  data::FeatureSpec feature_spec;
  data::FeatureStats stats;
  std::vector<double> positions = {-1.0, 0.0, 1.0};
  std::size_t train_begin = 0, train_end = 0, val_begin = 0, val_end = 0, vaccine_bars = 0;
  std::vector<eval::BarRange> windows;  // walk-forward validation windows
};

namespace {

template <class T>
class EngineImpl final : public DqnTrainer::Engine {
 public:
  EngineImpl(const ExecSpace& space, const TrainConfig& c, const data::Bars& bars,
             const data::Bars* validation, const data::FeatureSpec& spec)
      : m_space(space), m_train_features(space, bars, spec) {
    config = c;
    feature_spec = spec;
    const RunWindows w =
        split_windows(c, bars.size(), validation ? validation->size() : 0, spec.warmup());
    train_begin = w.train_begin;
    train_end = w.train_end;
    val_begin = w.val_begin;
    val_end = w.val_end;
    if (validation != nullptr)
      m_val_features = std::make_unique<data::FeatureSet>(space, *validation, spec);
    stats = m_train_features.fit(train_begin, train_end);
    m_features = standardized();

    network.features = spec.count();
    network.positions = positions.size();
    network.actions = positions.size();
    network.hidden = c.hidden;
    network.dueling = c.dueling;
    const nn::ParameterLayout layout(network);
    const std::size_t p = layout.size(), b = c.batch_size, e = c.environments, a = network.actions;
    const std::size_t s = network.state_size();

    auto alloc = [&](const char* label) { return Kokkos::view_alloc(space, std::string(label)); };
    // Online and target parameters in one buffer, the target m_target_offset after the
    // online (rounded up to 128 values, 256-byte aligned in bf16), so that one batched
    // product per layer evaluates both networks; the same for the working copies.
    m_target_offset = (p + 127) / 128 * 128;
    m_parameters = Kokkos::View<float*, DeviceMemory>(alloc("dqntrader::train::parameters"),
                                                      2 * m_target_offset);
    m_online = Kokkos::View<float*, DeviceMemory>(m_parameters.data(), p);
    m_target = Kokkos::View<float*, DeviceMemory>(m_parameters.data() + m_target_offset, p);
    m_grads = Kokkos::View<float*, DeviceMemory>(alloc("dqntrader::train::grads"), p);
    if constexpr (std::is_same<T, bf16>::value) {
      m_working =
          Kokkos::View<T*, DeviceMemory>(alloc("dqntrader::train::working"), 2 * m_target_offset);
      m_online_working = Kokkos::View<T*, DeviceMemory>(m_working.data(), p);
      m_target_working = Kokkos::View<T*, DeviceMemory>(m_working.data() + m_target_offset, p);
    }
    const std::vector<float> initial = nn::initial_parameters(layout, c.seed);
    Kokkos::deep_copy(
        space, m_online,
        Kokkos::View<const float*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
            initial.data(), p));
    Kokkos::deep_copy(space, m_target, m_online);
    refresh_working();

    m_close = m_train_features.close();
    // The environments' own copy of the prices (the one fault injection may spoil).
    m_close_mutable =
        Kokkos::View<double*, DeviceMemory>(alloc("dqntrader::train::close"), m_close.extent(0));
    Kokkos::deep_copy(space, m_close_mutable, m_close);
    Kokkos::View<double*, DeviceMemory> position_values(alloc("dqntrader::train::positions"),
                                                        positions.size());
    auto host_positions = Kokkos::create_mirror_view(position_values);
    for (std::size_t i = 0; i < positions.size(); ++i)
      host_positions(i) = positions[i];
    Kokkos::deep_copy(space, position_values, host_positions);
    const replay::RewardModel rewards{m_close_mutable, position_values, c.cost, c.reward_scale};

    env::EnvSettings env_settings;
    env_settings.environments = e;
    env_settings.begin = train_begin;
    env_settings.end = train_end;
    env_settings.episode_length = c.episode_length;
    env_settings.epsilon_start = c.epsilon_start;
    env_settings.epsilon_end = c.epsilon_end;
    env_settings.epsilon_steps = static_cast<std::int64_t>(c.epsilon_steps);
    env_settings.seed = c.seed;
    env_settings.flat_index = 1;
    m_env = std::make_unique<env::TradingEnv>(space, rewards, env_settings);
    m_replay =
        std::make_unique<replay::ReplayBuffer>(space, c.replay_capacity, e, c.n_step, c.gamma);
    m_vaccine = std::make_unique<replay::VaccineSet>(space, bars.close, train_begin, train_end,
                                                     c.vaccine_quantile, rewards, c.gamma);
    vaccine_bars = m_vaccine->bars();
    m_probe = std::make_unique<CausalProbe<T>>(space, m_features, spec, positions.size(),
                                               train_begin, train_end, c.probe_batch, c.seed);

    const std::size_t probe_rows = m_probe->states().extent(0);
    const std::size_t online_rows = std::max(2 * b + e, probe_rows);
    m_net = std::make_unique<nn::Mlp<T>>(space, network, c.precision, online_rows, 2);

    nn::AdamSettings adam;
    adam.learning_rate = static_cast<float>(c.learning_rate);
    adam.beta1 = static_cast<float>(c.adam_beta1);
    adam.beta2 = static_cast<float>(c.adam_beta2);
    adam.epsilon = static_cast<float>(c.adam_epsilon);
    adam.weight_decay = static_cast<float>(c.weight_decay);
    adam.clip_norm = static_cast<float>(c.clip_norm);
    adam.schedule = nn::parse_schedule(c.lr_schedule);
    adam.schedule_steps = static_cast<std::int64_t>(c.epochs * c.steps_per_epoch);
    adam.final_fraction = static_cast<float>(c.lr_final_fraction);
    m_adam = std::make_unique<nn::Adam>(space, p, adam);
    m_guard = std::make_unique<TrainingGuard>(space, p, c.guard_limit);

    m_batch = replay::Batch(space, b);
    m_states = nn::rows_with_ones<T>(space, "dqntrader::train::states", 2 * b + e, s);
    m_q_online = Matrix<float>(alloc("dqntrader::train::q"), online_rows, a);
    m_td = std::make_unique<TdLoss>(space, b, e, m_net->head_width());
    m_loss = Kokkos::View<LossSums, DeviceMemory>(alloc("dqntrader::train::loss"));
    m_sums = Kokkos::View<LossTotals, DeviceMemory>(alloc("dqntrader::train::epoch_sums"));
    m_probe_sums = Kokkos::View<double*, DeviceMemory>(alloc("dqntrader::train::probe_sums"),
                                                       m_probe->groups().size());
    m_step = Kokkos::View<std::int64_t, DeviceMemory>(alloc("dqntrader::train::step"));
    m_guard->snapshot(space, learner_state());

    const eval::BacktestConfig backtest = backtest_config(c, positions);
    const data::FeatureSet& val_features = m_val_features ? *m_val_features : m_train_features;
    m_evaluator = std::make_unique<eval::BacktestEvaluator>(
        space, val_features, stats, network, eval::BarRange{val_begin, val_end}, backtest);
    const std::size_t span = (val_end - val_begin) / c.val_windows;
    for (std::size_t w = 0; w < c.val_windows; ++w) {
      windows.push_back(
          {val_begin + w * span, w + 1 == c.val_windows ? val_end : val_begin + (w + 1) * span});
    }
    compat::fence(space, "dqntrader::train: setup uploads finish before the host vectors go");
  }

  EpochReport run_epoch() override {
    const TrainConfig& c = config;
    const auto start = Clock::now();
    for (std::size_t done = 0; done < c.steps_per_epoch;)
      done += advance(c.steps_per_epoch - done);  // recorded cycles where they fit
    // The one read-back of the epoch: sums and counters.
    auto sums = Kokkos::create_mirror_view(m_sums);
    auto adam = Kokkos::create_mirror_view(m_adam->counters());
    auto guard = Kokkos::create_mirror_view(m_guard->counters());
    auto probe = Kokkos::create_mirror_view(m_probe_sums);
    Kokkos::deep_copy(m_space, sums, m_sums);
    Kokkos::deep_copy(m_space, adam, m_adam->counters());
    Kokkos::deep_copy(m_space, guard, m_guard->counters());
    Kokkos::deep_copy(m_space, probe, m_probe_sums);
    compat::fence(m_space, "dqntrader::train: the epoch summary is read on the host");
    const double train_seconds = seconds_since(start);

    EpochReport r;
    r.epoch = ++m_epoch;
    r.steps = m_steps;
    r.learning_steps = m_learning_steps;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double samples = sums().batches * static_cast<double>(c.batch_size);
    r.loss = samples > 0 ? sums().loss / samples : nan;
    r.mean_q = samples > 0 ? sums().q / samples : nan;
    r.epsilon = env::epsilon_at(m_env->settings(), m_steps);
    r.learning_rate = m_adam->learning_rate(adam().calls);
    r.skipped = adam().skipped - m_skipped_before;
    r.restores = guard().restores - m_restores_before;
    r.consecutive_faults = std::max(adam().consecutive, guard().consecutive);
    m_skipped_before = adam().skipped;
    m_restores_before = guard().restores;
    const double probes = static_cast<double>(m_probes_this_epoch);
    for (std::size_t g = 0; g < m_probe->groups().size(); ++g) {
      r.probe.push_back({m_probe->groups()[g], probes > 0 ? probe(g) / probes : nan});
    }
    r.train_seconds = train_seconds;
    Kokkos::deep_copy(m_space, m_sums, LossTotals{0, 0, 0});
    Kokkos::deep_copy(m_space, m_probe_sums, 0.0);
    m_probes_this_epoch = 0;

    const auto validation_start = Clock::now();
    r.validation = validate_online();
    r.validation_seconds = seconds_since(validation_start);
    double sharpe = 0.0;
    for (const auto& m : r.validation)
      sharpe += m.sharpe;
    r.validation_sharpe = sharpe / static_cast<double>(r.validation.size());
    return r;
  }

  std::vector<eval::WindowMetrics> validate(const std::vector<float>& parameters) override {
    const auto device = upload(m_space, parameters, "dqntrader::train::validate");
    return windows.size() == 1 ? std::vector<eval::WindowMetrics>{m_evaluator->evaluate(device)}
                               : m_evaluator->walk_forward(device, windows);
  }

  std::vector<float> parameters() const override {
    std::vector<float> host(m_online.extent(0));
    Kokkos::deep_copy(
        m_space,
        Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
            host.data(), host.size()),
        m_online);
    compat::fence(m_space, "dqntrader::train: the parameters are read on the host");
    return host;
  }

  std::vector<io::Section> state() const override {
    std::vector<io::Section> out;
    using io::save;
    save(out, "online", m_online);
    save(out, "target", m_target);
    save(out, "adam_m", m_adam->first_moment());
    save(out, "adam_v", m_adam->second_moment());
    save(out, "adam_counters", m_adam->counters());
    m_guard->save(out);
    const replay::Ring& ring = m_replay->ring();
    save(out, "replay_bar", ring.bar);
    save(out, "replay_position", ring.position);
    save(out, "replay_action", ring.action);
    save(out, "replay_reward", ring.reward);
    save(out, "replay_last", ring.last);
    save(out, "replay_total", m_replay->total());
    m_env->save(out);
    save(out, "step", m_step);
    save(out, "close", m_close_mutable);
    const HostCounters host{m_steps, m_learning_steps, static_cast<std::int64_t>(m_epoch),
                            m_skipped_before, m_restores_before};
    out.push_back(
        {"host_counters", std::string(reinterpret_cast<const char*>(&host), sizeof host)});
    return out;
  }

  void restore(const std::vector<io::Section>& sections, const std::string& source) override {
    using io::load;
    load(sections, "online", m_online, source);
    load(sections, "target", m_target, source);
    load(sections, "adam_m", m_adam->first_moment(), source);
    load(sections, "adam_v", m_adam->second_moment(), source);
    load(sections, "adam_counters", m_adam->counters(), source);
    m_guard->load(sections, source);
    const replay::Ring& ring = m_replay->ring();
    load(sections, "replay_bar", ring.bar, source);
    load(sections, "replay_position", ring.position, source);
    load(sections, "replay_action", ring.action, source);
    load(sections, "replay_reward", ring.reward, source);
    load(sections, "replay_last", ring.last, source);
    load(sections, "replay_total", m_replay->total(), source);
    m_env->load(sections, source);
    load(sections, "step", m_step, source);
    load(sections, "close", m_close_mutable, source);
    const io::Section& h = io::find_section(sections, "host_counters", source);
    if (h.bytes.size() != sizeof(HostCounters))
      throw InputError(source, 0, 0, "bad host_counters section");
    HostCounters host;
    std::memcpy(&host, h.bytes.data(), sizeof host);
    m_steps = host.steps;
    m_learning_steps = host.learning_steps;
    m_epoch = static_cast<std::size_t>(host.epoch);
    m_skipped_before = host.skipped_before;
    m_restores_before = host.restores_before;
    refresh_working();
    compat::fence(m_space, "dqntrader::train: the restored state is in place");
  }

  void inject_fault(const std::string& kind) override {
    if (kind != "batch" && kind != "gradient" && kind != "weight" && kind != "price") {
      throw InputError("unknown fault '" + kind + "' (expected batch, gradient, weight or price)");
    }
    m_fault = kind;
  }

 private:
  Matrix<T> standardized() const {
    if constexpr (std::is_same<T, bf16>::value) {
      return m_train_features.standardized_bf16(stats);
    } else {
      return m_train_features.standardized_float(stats);
    }
  }

  nn::Weights<T> online_weights() const {
    if constexpr (std::is_same<T, bf16>::value) {
      return {m_online_working, m_online};
    } else {
      return {m_online, m_online};
    }
  }

  // Both networks' parameters, the target's m_target_offset after the online's.
  nn::Weights<T> pair_weights() const {
    if constexpr (std::is_same<T, bf16>::value) {
      return {m_working, m_parameters};
    } else {
      return {m_parameters, m_parameters};
    }
  }

  LearnerState<T> learner_state() const {
    return LearnerState<T>{
        m_online,         m_target,        m_adam->first_moment(), m_adam->second_moment(),
        m_online_working, m_target_working};
  }

  void refresh_working() const {
    if constexpr (std::is_same<T, bf16>::value) {
      to_working(m_space, Kokkos::View<const float*, DeviceMemory>(m_online), m_online_working);
      to_working(m_space, Kokkos::View<const float*, DeviceMemory>(m_target), m_target_working);
    }
  }

  double recorded_kernels_per_step() const override {
    const std::size_t steps = recorded_steps(config);
    return steps > 0 ? static_cast<double>(m_cycle.kernels()) / static_cast<double>(steps) : 0.0;
  }

  std::vector<eval::WindowMetrics> validate_online() {
    if (windows.size() == 1)
      return {m_evaluator->evaluate_graphed(m_online)};
    return m_evaluator->walk_forward(m_online, windows);
  }

  // Takes up to `left` steps and returns how many: one recorded cycle of graph_steps steps
  // when a cycle fits and learning runs throughout it, else one step. A cycle covers whole
  // periods of the vaccine, guard and probe, so that every replay repeats the same pattern;
  // the hard target update, which needs a longer period, runs between replays.
  std::size_t advance(std::size_t left) {
    const TrainConfig& c = config;
    const std::int64_t cycle = static_cast<std::int64_t>(recorded_steps(c));
    // The first recorded cycle starts after a whole cycle of eager steps (every kernel warm),
    // counted from this trainer's first step, restored or not.
    if (cycle > 0 && m_first_cycle < 0)
      m_first_cycle = (m_learning_steps / cycle + 2) * cycle;
    const bool cyclic = cycle > 0 && m_learning_steps >= m_first_cycle &&
                        m_learning_steps % cycle == 0 && left >= static_cast<std::size_t>(cycle) &&
                        m_fault.empty();
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
    for (std::int64_t i = 0; i < cycle; ++i) {
      ++m_learning_steps;
      if (c.tau == 0.0 && m_learning_steps % static_cast<std::int64_t>(c.target_update) == 0) {
        Kokkos::deep_copy(m_space, m_target, m_online);
        if constexpr (std::is_same<T, bf16>::value)
          Kokkos::deep_copy(m_space, m_target_working, m_online_working);
      }
    }
    return static_cast<std::size_t>(cycle);
  }

  // One step. Work on the side stream (m_side) runs beside the main stream's: the
  // environments' step and the TD loss's sums across teams beside the backward pass, the
  // weight gradients' products beside the chain of input gradients (Mlp::backward), and the
  // next learning step's state assembly beside this one's Adam, guard and probe. The side is
  // joined back before anything on the main stream reads what it wrote, and by the end of
  // every step.
  void step() {
    const TrainConfig& c = config;
    const std::size_t b = c.batch_size, e = c.environments;
    if (m_fault == "price") {
      write_nan(m_space, m_close_mutable);  // every price from now on
      m_fault.clear();
      m_side.fork(m_space);  // the side's assembly and environments read the prices
    }
    // Learning, once the replay holds enough complete n-step windows (the host knows the
    // count: every step writes E transitions), draws its batch first, so that one pass of
    // the online and target networks together (one batched product per hidden layer)
    // evaluates the batch's states and the environments' (rows [2B, 2B + E)), and the TD
    // loss, which evaluates the head, gives the environments' Q-values with the loss; then
    // the environments act and write their transitions, and the learning step follows.
    const std::int64_t total = m_steps * static_cast<std::int64_t>(e);
    const bool ready = total >= static_cast<std::int64_t>(c.learning_starts) &&
                       m_replay->end_sampleable(total) > m_replay->first_sampleable(total);
    const env::StateSource environments{m_env->bars(), m_env->positions()};
    Matrix<const float> env_q;
    TdLoss::Partials loss_partials;
    if (ready) {
      // On the side, after the environments' last step and the last backward's reads of the
      // states, which went there too.
      assemble_learning_states(environments);
      m_side.join(m_space);
      loss_partials = loss(
          b, m_net->forward_pair(m_space, pair_weights(), m_target_offset, m_states, 2 * b + e));
      env_q = rows_of(Matrix<const float>(m_q_online), 2 * b, e);
    } else {
      env::assemble_states(m_space, Matrix<const T>(m_features), environments,
                           StridedMatrix<T>(Kokkos::subview(
                               m_states, std::make_pair(std::size_t{0}, e), Kokkos::ALL)));
      m_net->forward(m_space, online_weights(), m_states, e, m_q_online);
      env_q = rows_of(Matrix<const float>(m_q_online), 0, e);
    }
    ++m_steps;
    m_side.fork(m_space);
    m_env->step(m_side.space(), env_q, *m_replay, m_step);  // and advances the replay and m_step
    if (!ready) {
      m_side.join(m_space);
      return;
    }
    // The loss's sums across teams and the head's bias gradient, beside the head's backward
    // pass: Adam, after the side is joined, reads the gradient; the guard reads the sums.
    m_td->add(m_side.space(), loss_partials, m_net->output_gradient(b, m_grads), m_loss, m_sums);
    learn(b);  // its backward joins the side: the environments' Q-values are free after it
    monitor(b);
  }

  // The TD loss of this learning step's batch, through the head of both networks on the
  // hidden layers evaluated in step(); it also writes the online Q-values of every row, the
  // environments' included. Returns its sums across teams, which step() adds on the side.
  TdLoss::Partials loss(std::size_t b, const nn::HeadInputs<T>& head) {
    const TrainConfig& c = config;
    ++m_learning_steps;
    if (m_fault == "batch")
      write_nan(m_space, m_batch.return_n, 1);
    return m_td->compute(m_space, head, 2 * b + c.environments, m_q_online, m_batch, c.huber_delta,
                         m_net->output_gradient(b, m_grads));
  }

  // Draws the batch of this learning step, from the vaccine set every vaccine_interval-th
  // step, and assembles its states and the environments' in one kernel, on the side.
  void assemble_learning_states(const env::StateSource& environments) {
    const TrainConfig& c = config;
    const std::int64_t learning_step = m_learning_steps + 1;
    const Matrix<const T> features(m_features);
    const ExecSpace& side = m_side.space();
    if (c.vaccine_interval > 0 &&
        learning_step % static_cast<std::int64_t>(c.vaccine_interval) == 0) {
      env::assemble_learning_states(side, features, m_vaccine->sampler(c.seed, m_step), m_batch,
                                    environments, m_states);
    } else {
      env::assemble_learning_states(side, features, m_replay->sampler(c.seed, m_step), m_batch,
                                    environments, m_states);
    }
  }

  // The rest of the learning step, after loss(): backward, Adam, the target network.
  void learn(std::size_t b) {
    const TrainConfig& c = config;
    m_net->backward(m_space, m_side, online_weights(), b, m_grads);
    if (m_fault == "gradient")
      write_nan(m_space, m_grads, 1);
    m_adam->step(m_space, m_online, m_grads, m_online_working);
    if (m_fault == "weight")
      write_nan(m_space, m_online, 1);
    if (m_fault != "price")
      m_fault.clear();  // one-shot faults are spent
    if (c.tau > 0.0) {
      soft_update(m_space, Kokkos::View<const float*, DeviceMemory>(m_online), m_target,
                  m_target_working, static_cast<float>(c.tau));
    } else if (!m_recording && m_learning_steps % static_cast<std::int64_t>(c.target_update) == 0) {
      Kokkos::deep_copy(m_space, m_target, m_online);
      if constexpr (std::is_same<T, bf16>::value)
        Kokkos::deep_copy(m_space, m_target_working, m_online_working);
    }
  }

  // The guard's check and the causal probe, at their intervals, after learning step b.
  void monitor(std::size_t b) {
    const TrainConfig& c = config;
    if (c.guard_interval > 0 &&
        m_learning_steps % static_cast<std::int64_t>(c.guard_interval) == 0) {
      m_guard->check(m_space, learner_state(), rows_of(Matrix<const float>(m_q_online), 0, 2 * b),
                     m_loss);
    }
    if (c.probe_interval > 0 &&
        m_learning_steps % static_cast<std::int64_t>(c.probe_interval) == 0) {
      const Matrix<const T> states = m_probe->states();
      m_net->forward(m_space, online_weights(), states, states.extent(0), m_q_online);
      m_probe->accumulate(m_space, rows_of(Matrix<const float>(m_q_online), 0, states.extent(0)),
                          m_probe_sums);
      ++m_probes_this_epoch;
    }
  }

  ExecSpace m_space;
  data::FeatureSet m_train_features;
  std::unique_ptr<data::FeatureSet> m_val_features;
  Matrix<T> m_features;
  Kokkos::View<const double*, DeviceMemory> m_close;
  Kokkos::View<double*, DeviceMemory> m_close_mutable;
  std::string m_fault;
  std::size_t m_target_offset = 0;
  Kokkos::View<float*, DeviceMemory> m_parameters;  // [online | target]
  Kokkos::View<float*, DeviceMemory> m_online, m_target, m_grads;
  Kokkos::View<T*, DeviceMemory> m_working;  // bf16: [online | target] working copies
  Kokkos::View<T*, DeviceMemory> m_online_working, m_target_working;
  std::unique_ptr<env::TradingEnv> m_env;
  std::unique_ptr<replay::ReplayBuffer> m_replay;
  std::unique_ptr<replay::VaccineSet> m_vaccine;
  std::unique_ptr<CausalProbe<T>> m_probe;
  std::unique_ptr<nn::Mlp<T>> m_net;  // the online network, and the target with it
  std::unique_ptr<nn::Adam> m_adam;
  std::unique_ptr<TrainingGuard> m_guard;
  std::unique_ptr<eval::BacktestEvaluator> m_evaluator;
  replay::Batch m_batch;
  StridedMatrix<T> m_states;  // [s; s'; the environments' states], rows_with_ones
  Matrix<float> m_q_online;   // the online network's Q-values
  std::unique_ptr<TdLoss> m_td;
  Kokkos::View<LossSums, DeviceMemory> m_loss;
  Kokkos::View<LossTotals, DeviceMemory> m_sums;  // the epoch's, read once per epoch
  Kokkos::View<double*, DeviceMemory> m_probe_sums;
  Kokkos::View<std::int64_t, DeviceMemory> m_step;
  std::int64_t m_steps = 0, m_learning_steps = 0, m_skipped_before = 0, m_restores_before = 0;
  std::size_t m_epoch = 0, m_probes_this_epoch = 0;
  exec::SideStream m_side;  // work beside the main stream's (step())
  exec::CapturedWork m_cycle;
  std::int64_t m_first_cycle = -1;
  bool m_recording = false;
};

}  // namespace

RunWindows split_windows(const TrainConfig& c, std::size_t bars, std::size_t validation_bars,
                         std::size_t warmup) {
  RunWindows w;
  w.train_begin = warmup;
  if (validation_bars == 0) {
    w.train_end = warmup + static_cast<std::size_t>((bars - warmup) * (1.0 - c.val_fraction));
    w.val_begin = w.train_end;
    w.val_end = bars;
  } else {
    w.train_end = bars;
    w.val_begin = warmup;
    w.val_end = validation_bars;
  }
  if (w.train_end < w.train_begin + 3 * c.n_step + 3)
    throw InputError("too few training bars after the feature warm-up");
  if (w.val_end < w.val_begin + 2 * c.val_windows + 1)
    throw InputError("too few validation bars for the validation windows");
  return w;
}

DqnTrainer::DqnTrainer(const ExecSpace& space, const TrainConfig& config, const data::Bars& bars,
                       const data::Bars* validation) {
  train::validate(config);
  data::FeatureConfig features;
  features.return_window = config.return_window;
  features.volatility_window = config.volatility_window;
  features.ofi_window = config.ofi_window;
  const data::FeatureSpec spec = data::resolve_features(features, bars);
  data::check_features_available(spec, bars, 3 * static_cast<std::size_t>(config.n_step) + 8);
  if (validation != nullptr)
    data::check_features_available(spec, *validation, 2 * config.val_windows + 1);
  if (config.precision == Precision::bf16) {
    m_engine = std::make_unique<EngineImpl<bf16>>(space, config, bars, validation, spec);
  } else {
    m_engine = std::make_unique<EngineImpl<float>>(space, config, bars, validation, spec);
  }
}

DqnTrainer::~DqnTrainer() = default;

EpochReport DqnTrainer::run_epoch() {
  return m_engine->run_epoch();
}

std::vector<eval::WindowMetrics> DqnTrainer::validate(const std::vector<float>& parameters) {
  return m_engine->validate(parameters);
}

std::vector<float> DqnTrainer::parameters() const {
  return m_engine->parameters();
}
std::vector<io::Section> DqnTrainer::state() const {
  return m_engine->state();
}

void DqnTrainer::restore(const std::vector<io::Section>& sections, const std::string& source) {
  m_engine->restore(sections, source);
}

void DqnTrainer::inject_fault(const std::string& kind) {
  m_engine->inject_fault(kind);
}

double DqnTrainer::recorded_kernels_per_step() const {
  return m_engine->recorded_kernels_per_step();
}

io::PolicyFile DqnTrainer::policy(const std::vector<float>& parameters) const {
  io::PolicyFile p;
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

}  // namespace dqntrader::train

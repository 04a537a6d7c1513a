// The learning step's paths (train/learning_step.hpp). On CUDA the fused path against the
// products path on the same state: every member's online Q-values, loss sums and gradient, for
// every pair of widths the fused loss kernel is compiled for (a state of 24, 50 and 100 values,
// hidden layers 32, 64 and 128 wide), 1 to 4 hidden layers, dueling on and off, populations of
// 1, 7 and 64 members and batches of 256 and 100 samples (100: not a multiple of any chunk).
// Both paths keep activations, output gradients and layer gradients in bf16 and accumulate in
// float; they differ in the order of the sums, so an activation may round to the neighbouring
// bf16 (a relative 2^-8) on one path and not the other, and each layer a value passes through
// adds its roundings. The bounds below are stated in those terms. The online heads are biased
// so that each member's greedy next action leads by a wide margin (a different action for
// different members): a near tie would let one rounding pick another target, a difference of a
// whole sample that says nothing about either path.
// The fused path's Adam step, in the kernel that sums its gradient, against Adam::step on that
// gradient.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "backends/execution.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/nn/adam.hpp"
#include "dqntrader/nn/network_spec.hpp"
#include "dqntrader/train/fused/plan.hpp"
#include "dqntrader/train/learning_step.hpp"
#include "test_support.hpp"

namespace dqntrader {
namespace {

using train::LearningPath;

// On every backend: the fused path trains only what it takes, and says so.
TEST(LearningStep, TheFusedPathTakesOnlyNarrowBf16NetworksOnCuda) {
  nn::NetworkSpec spec;
  spec.features = 21;
  spec.hidden = {128, 128};
  const bool cuda = std::string(gemm::backend_name()) == "cuda";
  EXPECT_EQ(train::fused_takes(spec, Precision::bf16), cuda);
  EXPECT_FALSE(train::fused_takes(spec, Precision::fp32));
  spec.hidden = {129};
  EXPECT_FALSE(train::fused_takes(spec, Precision::bf16));
  spec.hidden = {64, 64, 64, 64, 64};
  EXPECT_FALSE(train::fused_takes(spec, Precision::bf16));
  spec.hidden = {512, 512};
  exec::StreamSpace stream;
  try {
    train::LearningStep<float> step(stream.space(), spec, Precision::fp32, 1, 32, 4, 68,
                                    LearningPath::fused);
    ADD_FAILURE() << "the fused path took a 512-wide fp32 network";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("learning-path fused"), std::string::npos) << e.what();
  }
}

// On every backend: products and fused name their path (a learning step refuses what the fused
// path does not take, above); auto takes the fused path wherever it takes the networks (on CUDA,
// whatever the population: measured faster at every size, docs/BENCHMARKS.md), else the
// products path.
TEST(LearningStep, AutoTakesTheFusedPathWhereItTakesTheNetworks) {
  nn::NetworkSpec spec;
  spec.features = 21;
  spec.hidden = {128, 128};
  const bool cuda = std::string(gemm::backend_name()) == "cuda";
  const LearningPath fused_on_cuda = cuda ? LearningPath::fused : LearningPath::products;
  EXPECT_EQ(train::choose("products", spec, Precision::bf16), LearningPath::products);
  EXPECT_EQ(train::choose("fused", spec, Precision::fp32), LearningPath::fused);
  EXPECT_EQ(train::choose("auto", spec, Precision::fp32), LearningPath::products);
  EXPECT_EQ(train::choose("auto", spec, Precision::bf16), fused_on_cuda);
  spec.dueling = true;
  spec.hidden = {32, 32, 32, 32};
  EXPECT_EQ(train::choose("auto", spec, Precision::bf16), fused_on_cuda);
  spec.hidden = {256, 128};
  EXPECT_EQ(train::choose("auto", spec, Precision::bf16), LearningPath::products);
  spec.hidden = {64, 64, 64, 64, 64};
  EXPECT_EQ(train::choose("auto", spec, Precision::bf16), LearningPath::products);
}

#if defined(DQNTRADER_BACKEND_CUDA)

struct Case {
  std::size_t state;
  std::vector<std::size_t> hidden;
  bool dueling;
  std::size_t members, batch, environments;
};

// One learning step's inputs on the device, drawn from rng.
struct Inputs {
  nn::NetworkSpec spec;
  std::size_t k = 0, b = 0, e = 0, stride = 0;
  Kokkos::View<float*, DeviceMemory> master;
  Kokkos::View<bf16*, DeviceMemory> working;
  MatrixBatch<bf16> states;
  replay::Batch batch;
  Kokkos::View<MemberSettings*, DeviceMemory> settings;
};

Inputs draw(const ExecSpace& space, const Case& c, std::mt19937_64& rng) {
  Inputs in;
  in.spec.features = c.state - in.spec.positions;
  in.spec.hidden = c.hidden;
  in.spec.dueling = c.dueling;
  in.k = c.members;
  in.b = c.batch;
  in.e = c.environments;
  const nn::ParameterLayout layout(in.spec);
  const std::size_t p = layout.size(), actions = in.spec.actions;
  in.stride = (p + 127) / 128 * 128;
  std::vector<float> master(2 * in.k * in.stride, 0.0f);
  for (std::size_t set = 0; set < 2 * in.k; ++set) {
    const std::vector<float> values = nn::initial_parameters(layout, rng());
    std::copy(values.begin(), values.end(), master.begin() + set * in.stride);
  }
  const std::size_t head = layout.layers() - 1;
  for (std::size_t m = 0; m < in.k; ++m) {
    const std::size_t leader = (c.dueling ? 1 : 0) + m % actions;
    master[m * in.stride + layout.bias(head).offset + leader] += 3.0f;
  }
  std::vector<bf16> working(master.size());
  for (std::size_t i = 0; i < master.size(); ++i)
    working[i] = to_bf16(master[i]);
  in.master = testing::upload(master);
  in.working = testing::upload(working);

  const std::size_t rows = 2 * in.b + in.e, s = in.spec.state_size();
  std::uniform_real_distribution<float> state(-1.5f, 1.5f);
  in.states = MatrixBatch<bf16>("test::states", in.k, rows, s);
  auto states = Kokkos::create_mirror_view(in.states);
  for (std::size_t m = 0; m < in.k; ++m) {
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t j = 0; j < s; ++j)
        states(m, r, j) = to_bf16(state(rng));
    }
  }
  Kokkos::deep_copy(in.states, states);

  in.batch = replay::Batch(space, in.k * in.b);
  std::uniform_int_distribution<int> action(0, static_cast<int>(actions) - 1);
  std::normal_distribution<float> reward(0.0f, 0.7f);
  std::uniform_real_distribution<float> discount(0.5f, 0.99f);
  auto taken = Kokkos::create_mirror_view(in.batch.action);
  auto returns = Kokkos::create_mirror_view(in.batch.return_n);
  auto discounts = Kokkos::create_mirror_view(in.batch.discount);
  for (std::size_t i = 0; i < in.k * in.b; ++i) {
    taken(i) = static_cast<std::int8_t>(action(rng));
    returns(i) = reward(rng);
    discounts(i) = discount(rng);
  }
  Kokkos::deep_copy(in.batch.action, taken);
  Kokkos::deep_copy(in.batch.return_n, returns);
  Kokkos::deep_copy(in.batch.discount, discounts);

  std::vector<MemberSettings> settings(in.k);
  std::uniform_real_distribution<double> delta(0.2, 2.0);  // both sides of the Huber threshold
  for (MemberSettings& m : settings)
    m.huber_delta = delta(rng);
  in.settings = testing::upload(settings);
  space.fence();
  return in;
}

struct Outputs {
  std::vector<float> q, grads;
  std::vector<train::LossSums> sums;
  std::vector<train::LossTotals> totals;
  // after Adam's step: the online networks, their working copy, the moments and counters
  std::vector<float> parameters, working, m, v;
  std::vector<nn::AdamCounters> counters;
};

// Learning steps of in's members, path's way, each with Adam's step (settings adam, members
// active) on copies of the online networks: every step's loss reads in's networks as drawn.
class Learner {
 public:
  Learner(const ExecSpace& space, const Inputs& in, LearningPath path,
          const std::vector<nn::AdamSettings>& adam, const std::vector<int>& active)
      : m_in(in),
        m_learning(space, in.spec, Precision::bf16, in.k, in.b, in.e, 2 * in.b + in.e, path),
        m_adam(space, nn::MemberVectors{in.k, nn::ParameterLayout(in.spec).size(), in.stride},
               adam),
        m_faults(space, in.k) {
    EXPECT_EQ(m_learning.path(), path);
    const auto online = std::make_pair(std::size_t{0}, in.k * in.stride);
    m_parameters = Kokkos::View<float*, DeviceMemory>("test::parameters", in.k * in.stride);
    m_working = Kokkos::View<bf16*, DeviceMemory>("test::working", in.k * in.stride);
    Kokkos::deep_copy(m_parameters, Kokkos::subview(in.master, online));
    Kokkos::deep_copy(m_working, Kokkos::subview(in.working, online));
    if (!active.empty())
      m_active = testing::upload(active);
  }

  train::InjectedFaults& faults() { return m_faults; }

  Outputs step(const ExecSpace& space) {
    const Inputs& in = m_in;
    const std::size_t rows = 2 * in.b + in.e, n = in.k * in.stride;
    exec::SideStream side;
    MatrixBatch<float> q("test::q", in.k, rows, in.spec.actions);
    Kokkos::View<float*, DeviceMemory> grads("test::grads", n);
    Kokkos::View<train::LossSums*, DeviceMemory> sums("test::sums", in.k);
    Kokkos::View<train::LossTotals*, DeviceMemory> totals("test::totals", in.k);
    const nn::Weights<bf16> pair{in.working, in.master, in.k, in.stride};
    const nn::Weights<bf16> online{Kokkos::subview(in.working, std::make_pair(std::size_t{0}, n)),
                                   Kokkos::subview(in.master, std::make_pair(std::size_t{0}, n)),
                                   in.k, in.stride};
    const nn::Gradients g{grads, in.k, in.stride};
    m_learning.loss(space, side, pair, in.states, in.batch,
                    Kokkos::View<const MemberSettings*, DeviceMemory>(in.settings), q, g);
    side.fork(space);
    m_learning.learn(space, side, online, g, sums, totals,
                     train::Update<bf16>{&m_adam, m_parameters, m_working, m_active}, m_faults);
    space.fence();
    Outputs out;
    auto q_host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), q);
    out.q.assign(q_host.data(), q_host.data() + q_host.size());
    out.grads = testing::download(grads);
    out.sums = testing::download(sums);
    out.totals = testing::download(totals);
    out.parameters = testing::download(m_parameters);
    for (bf16 w : testing::download(m_working))
      out.working.push_back(to_float(w));
    out.m = testing::download(m_adam.first_moment());
    out.v = testing::download(m_adam.second_moment());
    out.counters = testing::download(m_adam.counters());
    return out;
  }

 private:
  const Inputs& m_in;
  train::LearningStep<bf16> m_learning;
  nn::Adam m_adam;
  train::InjectedFaults m_faults;
  Kokkos::View<float*, DeviceMemory> m_parameters;
  Kokkos::View<bf16*, DeviceMemory> m_working;
  Kokkos::View<const int*, DeviceMemory> m_active;
};

Outputs step(const ExecSpace& space, const Inputs& in, LearningPath path) {
  return Learner(space, in, path, std::vector<nn::AdamSettings>(in.k), {}).step(space);
}

// The largest of |a - b| / scale over values, with scale the largest |b| (at least floor).
double worst(const float* a, const float* b, std::size_t count, double floor) {
  double scale = floor, diff = 0.0;
  for (std::size_t i = 0; i < count; ++i) {
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - b[i]));
  }
  return diff / scale;
}

// ||a - b|| / ||b|| over values.
double relative_norm(const float* a, const float* b, std::size_t count) {
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < count; ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  return norm > 0.0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

TEST(LearningStep, TheFusedStepEqualsTheProductsStepWithinBf16Rounding) {
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE(testing::seed_note(seed));
  std::mt19937_64 rng(seed);
  exec::StreamSpace stream;
  const ExecSpace& space = stream.space();
  // Bounds for two hidden layers: Q within 2% of the member's largest |Q| (a few bf16 steps
  // through three products); the loss's sums within 1%; each tensor's gradient within 2% in
  // norm and 5% of its largest value at any one element. A network of L hidden layers passes
  // its values through L + 1 products each way: its bounds are these times (L + 1) / 3, and no
  // less.
  constexpr double kQ = 0.02, kLoss = 0.01, kNorm = 0.02, kElement = 0.05;
  double seen_q = 0.0, seen_loss = 0.0, seen_norm = 0.0, seen_element = 0.0;
  int cases = 0;
  // A state of each compiled width: 24 values in 32, 50 in 64, 100 in 128.
  for (const auto [state, in_width] : {std::pair<std::size_t, int>{24, 32}, {50, 64}, {100, 128}}) {
    for (std::size_t width : {32, 64, 128}) {
      for (std::size_t layers = 1; layers <= 4; ++layers) {
        const double depth = std::max(1.0, static_cast<double>(layers + 1) / 3.0);
        for (bool dueling : {false, true}) {
          for (std::size_t members : {1, 7, 64}) {
            // Batches of 256 and 100 samples in turn.
            const std::size_t batch = cases % 2 == 0 ? 256 : 100;
            // Seven members take 600 environments and 64 members 136: a chunk's share takes
            // more than one pass, with both weight sets held and with one at a time.
            const std::size_t environments = members == 7 ? 600 : members == 64 ? 136 : 24;
            const Case c{state,   std::vector<std::size_t>(layers, width),
                         dueling, members,
                         batch,   environments};
            SCOPED_TRACE("state " + std::to_string(state) + ", width " + std::to_string(width) +
                         " x " + std::to_string(layers) + (dueling ? " dueling" : "") + ", " +
                         std::to_string(members) + " members, batch " + std::to_string(batch) +
                         ", " + std::to_string(environments) + " environments");
            const Inputs in = draw(space, c, rng);
            // The loss kernel of this pair of widths runs.
            const train::fused::Geometry g =
                train::fused::geometry(train::fused::shape_of(in.spec));
            EXPECT_EQ(g.in, in_width);
            EXPECT_EQ(g.width, static_cast<int>(width));
            const Outputs fused = step(space, in, LearningPath::fused);
            const Outputs products = step(space, in, LearningPath::products);
            ++cases;
            const nn::ParameterLayout layout(in.spec);
            const std::size_t rows = 2 * in.b + in.e, a = in.spec.actions;
            for (std::size_t m = 0; m < in.k; ++m) {
              const std::size_t at = m * rows * a;
              const double q = worst(&fused.q[at], &products.q[at], rows * a, 1e-3) / depth;
              seen_q = std::max(seen_q, q);
              EXPECT_LE(q, kQ) << "member " << m << ": Q";
              const train::LossSums& f = fused.sums[m];
              const train::LossSums& r = products.sums[m];
              const double loss =
                  std::fabs(f.loss - r.loss) / std::max(std::fabs(r.loss), 1e-6) / depth;
              seen_loss = std::max(seen_loss, loss);
              EXPECT_LE(loss, kLoss) << "member " << m << ": loss " << f.loss << " " << r.loss;
              // The batch's sum of Q(s, a) may nearly cancel: against the sum of |Q| instead.
              double scale = 0.0;
              for (std::size_t i = 0; i < in.b * a; ++i)
                scale += std::fabs(products.q[at + i]);
              EXPECT_LE(std::fabs(f.q - r.q), kLoss * depth * scale) << "member " << m << ": Q sum";
              EXPECT_EQ(f.finite, 1.0);
              EXPECT_EQ(r.finite, 1.0);
              EXPECT_EQ(fused.totals[m].batches, 1.0);
              EXPECT_EQ(fused.totals[m].loss, f.loss);
              EXPECT_EQ(fused.totals[m].q, f.q);
              for (std::size_t l = 0; l < layout.layers(); ++l) {
                for (const nn::Tensor* t : {&layout.weight(l), &layout.bias(l)}) {
                  const std::size_t first = m * in.stride + t->offset;
                  const double norm =
                      relative_norm(&fused.grads[first], &products.grads[first], t->size()) / depth;
                  const double element =
                      worst(&fused.grads[first], &products.grads[first], t->size(), 1e-12) / depth;
                  seen_norm = std::max(seen_norm, norm);
                  seen_element = std::max(seen_element, element);
                  EXPECT_LE(norm, kNorm) << "member " << m << ": " << t->name;
                  EXPECT_LE(element, kElement) << "member " << m << ": " << t->name;
                }
              }
            }
          }
        }
      }
    }
  }
  RecordProperty("cases", cases);
  RecordProperty("worst_q", std::to_string(seen_q));
  RecordProperty("worst_loss", std::to_string(seen_loss));
  RecordProperty("worst_gradient_norm", std::to_string(seen_norm));
  RecordProperty("worst_gradient_element", std::to_string(seen_element));
  std::printf(
      "fused against products over %d cases: Q %.2e, loss %.2e, gradient norm %.2e, "
      "element %.2e (of the largest, over the depth's factor)\n",
      cases, seen_q, seen_loss, seen_norm, seen_element);
}

// One case of TheFusedUpdateIsAdamsStepWithItsGradient (below).
void adam_matches(const ExecSpace& space, const Inputs& in) {
  const std::size_t members = in.k;
  {
    const std::size_t p = nn::ParameterLayout(in.spec).size(), n = members * in.stride;
    std::vector<nn::AdamSettings> adam(members);
    for (std::size_t m = 0; m < members; ++m) {
      adam[m].learning_rate = 1e-3f;
      adam[m].weight_decay = 0.01f;
      adam[m].schedule = nn::Schedule::cosine;
      adam[m].schedule_steps = 3;
      adam[m].clip_norm = m % 2 == 0 ? 1e-3f : 0.0f;  // a gradient's norm is far above 1e-3
    }
    std::vector<int> active(members, 1);
    const std::size_t stopped = members > 1 ? 1 : members, faulty = members > 2 ? 2 : members;
    if (stopped < members)
      active[stopped] = 0;
    Learner learner(space, in, LearningPath::fused, adam, active);
    if (faulty < members)
      learner.faults().inject(faulty, "gradient");

    nn::Adam oracle(space, nn::MemberVectors{members, p, in.stride}, adam);
    Kokkos::View<float*, DeviceMemory> parameters("test::oracle_parameters", n);
    Kokkos::View<bf16*, DeviceMemory> working("test::oracle_working", n);
    Kokkos::deep_copy(parameters, Kokkos::subview(in.master, std::make_pair(std::size_t{0}, n)));
    const std::vector<float> initial = testing::download(parameters);
    const auto active_device = testing::upload(active);
    for (int step = 1; step <= 2; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const Outputs out = learner.step(space);
      learner.faults().after_update(space, Kokkos::View<float*, DeviceMemory>(), 0);  // spent
      oracle.step(space, parameters, testing::upload(out.grads), in.stride, working,
                  Kokkos::View<const int*, DeviceMemory>(active_device));
      space.fence();
      const std::vector<float> want = testing::download(parameters);
      const std::vector<float> want_m = testing::download(oracle.first_moment());
      const std::vector<float> want_v = testing::download(oracle.second_moment());
      const std::vector<nn::AdamCounters> want_counters = testing::download(oracle.counters());
      for (std::size_t m = 0; m < members; ++m) {
        SCOPED_TRACE("member " + std::to_string(m));
        const nn::AdamCounters& c = out.counters[m];
        const nn::AdamCounters& w = want_counters[m];
        EXPECT_EQ(c.calls, w.calls);
        EXPECT_EQ(c.applied, w.applied);
        EXPECT_EQ(c.skipped, w.skipped);
        EXPECT_EQ(c.consecutive, w.consecutive);
        EXPECT_EQ(c.beta1_power, w.beta1_power);
        EXPECT_EQ(c.beta2_power, w.beta2_power);
        const std::int64_t steps = m == stopped ? 0 : step, skipped = m == faulty ? 1 : 0;
        EXPECT_EQ(c.calls, steps);
        EXPECT_EQ(c.applied, steps - skipped);
        EXPECT_EQ(c.skipped, skipped);
        const std::size_t first = m * in.stride;
        double scale_m = 1e-30, scale_v = 1e-30, worst_p = 0.0, worst_m = 0.0, worst_v = 0.0;
        std::size_t moved = 0, working_off = 0;
        for (std::size_t i = first; i < first + p; ++i) {
          scale_m = std::max(scale_m, std::fabs(static_cast<double>(want_m[i])));
          scale_v = std::max(scale_v, std::fabs(static_cast<double>(want_v[i])));
          worst_p = std::max(worst_p, std::fabs(static_cast<double>(out.parameters[i]) - want[i]) /
                                          std::max(std::fabs(static_cast<double>(want[i])), 1e-3));
          worst_m = std::max(worst_m, std::fabs(static_cast<double>(out.m[i]) - want_m[i]));
          worst_v = std::max(worst_v, std::fabs(static_cast<double>(out.v[i]) - want_v[i]));
          moved += out.parameters[i] != initial[i] ? 1 : 0;
          working_off += out.working[i] != to_float(to_bf16(out.parameters[i])) ? 1 : 0;
        }
        // A few float roundings of the clip factor, through the moments to the parameters.
        EXPECT_LE(worst_p, 1e-6);
        EXPECT_LE(worst_m / scale_m, 1e-5);
        EXPECT_LE(worst_v / scale_v, 1e-5);
        EXPECT_EQ(working_off, 0u);
        if (m == stopped || (m == faulty && step == 1))
          EXPECT_EQ(moved, 0u);
        else
          EXPECT_GT(moved, p / 2);
      }
    }
  }
}

// The fused path's update is Adam::step's (nn/adam.hpp) with the gradient the step wrote: the
// same counters and, within float rounding, the same parameters and moments (the squared norm
// is added in another order, so that a clipped member's factor may differ in its last bit), and
// a working copy that is its parameters in bf16. Members are clipped and not, decay their
// weights and follow a cosine schedule; one is stopped (it stays as it is) and one has a
// gradient fault at the first step (it skips that step, counted). Two steps: the second
// corrects its moments' bias with t = 2, or 1 for the member that skipped. Networks of every
// pair of widths the loss kernel is compiled for, 1 to 4 hidden layers in turn, dueling every
// other one: every compiled kernel runs here without the products path, so that racecheck
// (which cannot follow cuBLASLt's kernels) covers them all.
TEST(LearningStep, TheFusedUpdateIsAdamsStepWithItsGradient) {
  const std::uint64_t seed = testing::test_seed();
  SCOPED_TRACE(testing::seed_note(seed));
  std::mt19937_64 rng(seed);
  exec::StreamSpace stream;
  const ExecSpace& space = stream.space();
  int shape = 0;
  for (std::size_t state : {24, 50, 100}) {
    for (std::size_t width : {32, 64, 128}) {
      const std::vector<std::size_t> hidden(static_cast<std::size_t>(shape % 4 + 1), width);
      const bool dueling = shape++ % 2 == 1;
      for (std::size_t members : {1, 7, 64}) {
        SCOPED_TRACE("state " + std::to_string(state) + ", width " + std::to_string(width) + " x " +
                     std::to_string(hidden.size()) + (dueling ? " dueling" : "") + ", " +
                     std::to_string(members) + " members");
        adam_matches(space, draw(space, Case{state, hidden, dueling, members, 256, 64}, rng));
      }
    }
  }
}

#endif

}  // namespace
}  // namespace dqntrader

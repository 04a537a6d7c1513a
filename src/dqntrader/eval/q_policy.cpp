#include "dqntrader/eval/q_policy.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "backends/gemm.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/core/kokkos_compat.hpp"
#include "dqntrader/core/team_sum.hpp"

namespace dqntrader::eval {

namespace {

using gemm::Op;

// A position map on at most 8 positions: entry i (4 bits at 4i) is where incoming
// position i goes.
KOKKOS_INLINE_FUNCTION std::uint32_t identity_map(int positions) {
  std::uint32_t m = 0;
  for (int i = 0; i < positions; ++i)
    m |= static_cast<std::uint32_t>(i) << (4 * i);
  return m;
}

// The map "first, then second".
KOKKOS_INLINE_FUNCTION std::uint32_t then(std::uint32_t first, std::uint32_t second,
                                          int positions) {
  std::uint32_t m = 0;
  for (int i = 0; i < positions; ++i) {
    const std::uint32_t middle = (first >> (4 * i)) & 15u;
    m |= ((second >> (4 * middle)) & 15u) << (4 * i);
  }
  return m;
}

// The position paths of several policies, cut into blocks of kBlockBars decisions, a team a
// block (policy k's block b is team k blocks + b). Each thread composes the maps of a run of
// consecutive decisions; the runs' maps are scanned across the team (in rank order). A path of
// several blocks first has each block's map (BlockMaps); then (BlockPaths) each block combines
// the maps of the blocks before it the same way, and each thread walks its run again from the
// position the decisions before it leave: p_i = map_i(p_{i-1}), the sequential loop's path.
struct PathBlocks {
  const std::uint32_t* maps;  // policy k's at maps + k * stride
  std::int8_t* paths;         // likewise
  std::uint32_t* block_maps;  // policy k's blocks' at k * blocks
  std::size_t stride, n, blocks;
  int positions, start;

  // The composed maps of the team's thread runs of items [0, count) (item(i): a map), scanned:
  // on return runs[t] holds runs 0 .. t.
  template <class Item>
  KOKKOS_INLINE_FUNCTION void scan_runs(const Kokkos::TeamPolicy<ExecSpace>::member_type& team,
                                        std::uint32_t* runs, std::size_t count,
                                        const Item& item) const {
    const ThreadRun run = thread_run(count, team.team_size(), team.team_rank());
    std::uint32_t mine = identity_map(positions);
    for (std::size_t i = run.lo; i < run.hi; ++i)
      mine = then(mine, item(i), positions);
    runs[team.team_rank()] = mine;
    const int p = positions;
    team_inclusive_scan(team, runs, [p](std::uint32_t earlier, std::uint32_t later) {
      return then(earlier, later, p);
    });
  }
  KOKKOS_INLINE_FUNCTION std::size_t first(std::size_t b) const { return b * kBlockBars; }
  KOKKOS_INLINE_FUNCTION std::size_t last(std::size_t b) const {
    return (b + 1) * kBlockBars < n ? (b + 1) * kBlockBars : n;
  }
};

struct BlockMaps {
  PathBlocks at;

  KOKKOS_INLINE_FUNCTION void operator()(
      const Kokkos::TeamPolicy<ExecSpace>::member_type& team) const {
    const std::size_t k = static_cast<std::size_t>(team.league_rank()) / at.blocks;
    const std::size_t b = static_cast<std::size_t>(team.league_rank()) % at.blocks;
    std::uint32_t* const runs =
        TeamScratch<std::uint32_t>(team.team_scratch(0), team.team_size()).data();
    const std::uint32_t* const map = at.maps + k * at.stride + at.first(b);
    at.scan_runs(team, runs, at.last(b) - at.first(b), [map](std::size_t i) { return map[i]; });
    if (team.team_rank() == 0)
      at.block_maps[k * at.blocks + b] = runs[team.team_size() - 1];
  }
};

struct BlockPaths {
  PathBlocks at;

  KOKKOS_INLINE_FUNCTION void operator()(
      const Kokkos::TeamPolicy<ExecSpace>::member_type& team) const {
    const int threads = team.team_size(), t = team.team_rank();
    const std::size_t k = static_cast<std::size_t>(team.league_rank()) / at.blocks;
    const std::size_t b = static_cast<std::size_t>(team.league_rank()) % at.blocks;
    std::uint32_t* const runs = TeamScratch<std::uint32_t>(team.team_scratch(0), threads).data();
    // The map of the blocks before this one, then of the runs before this thread's.
    const std::uint32_t* const blocks = at.block_maps + k * at.blocks;
    at.scan_runs(team, runs, b, [blocks](std::size_t j) { return blocks[j]; });
    const std::uint32_t before_block = runs[threads - 1];
    team.team_barrier();
    const std::size_t lo = at.first(b), hi = at.last(b);
    const std::uint32_t* const map = at.maps + k * at.stride + lo;
    // The runs before this thread's (a team of one thread has none: it skips the pass).
    if (threads > 1)
      at.scan_runs(team, runs, hi - lo, [map](std::size_t i) { return map[i]; });
    const std::uint32_t before =
        then(before_block, t == 0 ? identity_map(at.positions) : runs[t - 1], at.positions);
    std::uint32_t p = (before >> (4 * at.start)) & 15u;
    std::int8_t* const path = at.paths + k * at.stride + lo;
    const ThreadRun run = thread_run(hi - lo, threads, t);
    for (std::size_t i = run.lo; i < run.hi; ++i) {
      p = (map[i] >> (4 * p)) & 15u;
      path[i] = static_cast<std::int8_t>(p);
    }
  }
};

// Copies rows [row_begin, row_begin + rows) of a weight tensor of every policy into
// out[k][r][c], converted to the compute type.
template <class T>
void gather_weight(const ExecSpace& space, const ParameterRows& parameters,
                   const nn::Tensor& tensor, std::size_t row_begin, std::size_t rows,
                   const MatrixBatch<T>& out) {
  const std::size_t policies = parameters.extent(0), cols = tensor.cols;
  const std::size_t offset = tensor.offset + row_begin * tensor.cols;
  Kokkos::parallel_for(
      "dqntrader::eval::gather_weight",
      Kokkos::RangePolicy<ExecSpace>(space, 0, policies * rows * cols),
      KOKKOS_LAMBDA(const std::size_t flat) {
        const std::size_t k = flat / (rows * cols), rc = flat % (rows * cols);
        store(out(k, rc / cols, rc % cols), parameters(k, offset + rc));
      });
}

// out[k * stride + j] = bias j of every policy, converted.
template <class T>
void gather_bias(const ExecSpace& space, const ParameterRows& parameters, const nn::Tensor& tensor,
                 std::size_t stride, const Kokkos::View<T*, DeviceMemory>& out) {
  const std::size_t policies = parameters.extent(0), cols = tensor.cols, offset = tensor.offset;
  Kokkos::parallel_for(
      "dqntrader::eval::gather_bias", Kokkos::RangePolicy<ExecSpace>(space, 0, policies * cols),
      KOKKOS_LAMBDA(const std::size_t flat) {
        store(out(flat / cols * stride + flat % cols),
              parameters(flat / cols, offset + flat % cols));
      });
}

// The first layer's bias for each incoming position: out[(k * positions + p) * width + h] =
// b1[h] + W1[features + p][h] (the one-hot row of the position).
template <class T>
void position_biases(const ExecSpace& space, const ParameterRows& parameters,
                     const nn::Tensor& weight, const nn::Tensor& bias, std::size_t features,
                     std::size_t positions, const Kokkos::View<T*, DeviceMemory>& out) {
  const std::size_t policies = parameters.extent(0), width = weight.cols;
  const std::size_t w_offset = weight.offset + features * width, b_offset = bias.offset;
  Kokkos::parallel_for(
      "dqntrader::eval::position_biases",
      Kokkos::RangePolicy<ExecSpace>(space, 0, policies * positions * width),
      KOKKOS_LAMBDA(const std::size_t flat) {
        const std::size_t k = flat / (positions * width), ph = flat % (positions * width),
                          h = ph % width;
        store(out(flat), parameters(k, b_offset + h) + parameters(k, w_offset + ph));
      });
}

// The dueling head folded into one linear layer: Q_a = V + A_a - mean_b A_b is linear in
// the last hidden layer, with weight w_V + w_a - mean_b w_b and bias b_V + b_a - mean_b b_b.
template <class T>
void fold_dueling(const ExecSpace& space, const ParameterRows& parameters, const nn::Tensor& head_w,
                  const nn::Tensor& head_b, const MatrixBatch<T>& weight, std::size_t stride,
                  const Kokkos::View<float*, DeviceMemory>& bias) {
  const std::size_t policies = parameters.extent(0), hidden = head_w.rows, outputs = head_w.cols;
  const std::size_t actions = outputs - 1, w = head_w.offset, b = head_b.offset;
  Kokkos::parallel_for(
      "dqntrader::eval::fold_dueling_weight",
      Kokkos::RangePolicy<ExecSpace>(space, 0, policies * hidden),
      KOKKOS_LAMBDA(const std::size_t flat) {
        const std::size_t k = flat / hidden, h = flat % hidden, row = w + h * outputs;
        float mean = 0.0f;
        for (std::size_t a = 1; a <= actions; ++a)
          mean += parameters(k, row + a);
        mean /= static_cast<float>(actions);
        for (std::size_t a = 0; a < actions; ++a) {
          store(weight(k, h, a), parameters(k, row) + parameters(k, row + 1 + a) - mean);
        }
      });
  Kokkos::parallel_for(
      "dqntrader::eval::fold_dueling_bias", Kokkos::RangePolicy<ExecSpace>(space, 0, policies),
      KOKKOS_LAMBDA(const std::size_t k) {
        float mean = 0.0f;
        for (std::size_t a = 1; a <= actions; ++a)
          mean += parameters(k, b + a);
        mean /= static_cast<float>(actions);
        for (std::size_t a = 0; a < actions; ++a)
          bias(k * stride + a) = parameters(k, b) + parameters(k, b + 1 + a) - mean;
      });
}

// maps[k * stride + first + i] = the position map of bar i: argmax over actions (ties to
// the lowest action) for every incoming position.
void argmax_maps(const ExecSpace& space, const MatrixBatch<const float>& q, std::size_t actions,
                 std::size_t positions, std::size_t c,
                 const Kokkos::View<std::uint32_t*, DeviceMemory>& maps, std::size_t stride,
                 std::size_t first) {
  Kokkos::parallel_for(
      "dqntrader::eval::argmax_maps", Kokkos::RangePolicy<ExecSpace>(space, 0, q.extent(0) * c),
      KOKKOS_LAMBDA(const std::size_t flat) {
        const std::size_t k = flat / c, i = flat % c;
        std::uint32_t m = 0;
        for (std::size_t p = 0; p < positions; ++p) {
          const std::size_t row = p * c + i;
          std::size_t best = 0;
          float best_q = q(k, row, 0);
          for (std::size_t a = 1; a < actions; ++a) {
            if (q(k, row, a) > best_q) {
              best_q = q(k, row, a);
              best = a;
            }
          }
          m |= static_cast<std::uint32_t>(best) << (4 * p);
        }
        maps(k * stride + first + i) = m;
      });
}

// all_q[((first + i) * positions + p) * actions + a] = q of policy 0 at bar first + i, incoming
// position p: a chunk's Q-values kept.
void keep_q(const ExecSpace& space, const MatrixBatch<const float>& q, std::size_t actions,
            std::size_t positions, std::size_t c, const Kokkos::View<float*, DeviceMemory>& all_q,
            std::size_t first) {
  Kokkos::parallel_for(
      "dqntrader::eval::keep_q", Kokkos::RangePolicy<ExecSpace>(space, 0, c * positions * actions),
      KOKKOS_LAMBDA(const std::size_t flat) {
        const std::size_t i = flat / (positions * actions), p = flat / actions % positions,
                          a = flat % actions;
        all_q(((first + i) * positions + p) * actions + a) = q(0, p * c + i, a);
      });
}

// taken(i, a) = the Q-values of decision i for the position it came in with: the start for the
// first, the path's previous position after.
void take_q(const ExecSpace& space, const Kokkos::View<const float*, DeviceMemory>& all_q,
            const Kokkos::View<const std::int8_t*, DeviceMemory>& path, std::size_t start,
            std::size_t positions, const Kokkos::View<float**, DeviceMemory>& taken) {
  const std::size_t n = path.extent(0), actions = taken.extent(1);
  Kokkos::parallel_for(
      "dqntrader::eval::take_q", Kokkos::RangePolicy<ExecSpace>(space, 0, n * actions),
      KOKKOS_LAMBDA(const std::size_t flat) {
        const std::size_t i = flat / actions, a = flat % actions;
        const std::size_t incoming = i == 0 ? start : static_cast<std::size_t>(path(i - 1));
        taken(i, a) = all_q((i * positions + incoming) * actions + a);
      });
}

}  // namespace

class QPolicy::Engine {
 public:
  virtual ~Engine() = default;
  virtual void enqueue(const ExecSpace& space, const ParameterRows& parameters, std::size_t begin,
                       std::size_t n) = 0;
  virtual void prepare(const ExecSpace& space, const ParameterRows& parameters) = 0;
  virtual void enqueue_taken(const ExecSpace& space, std::size_t begin, std::size_t n,
                             std::size_t start,
                             const Kokkos::View<float**, DeviceMemory>& taken) = 0;
  virtual void restandardize(const data::FeatureSet& features, const data::FeatureStats& stats) = 0;
  virtual std::vector<float> q_values(const ExecSpace& space, const ParameterRows& parameters,
                                      std::size_t k, std::size_t begin, std::size_t n) = 0;
  std::size_t max_policies = 0, max_decisions = 0;
  Kokkos::View<std::uint32_t*, DeviceMemory> maps;
  Kokkos::View<std::int8_t*, DeviceMemory> paths;
};

namespace {

using BiasRows = Kokkos::View<float**, Kokkos::LayoutRight, DeviceMemory>;

// n rounded up to a multiple of 8 (16 bytes of bf16, 32 of float).
std::size_t padded(std::size_t n) {
  return (n + 7) / 8 * 8;
}

template <class T>
class EngineImpl final : public QPolicy::Engine {
 public:
  EngineImpl(const ExecSpace& space, const nn::NetworkSpec& spec, Precision precision,
             Matrix<T> features, std::size_t policies, std::size_t chunk, std::size_t decisions,
             std::size_t start_index)
      : m_layout(spec),
        m_precision(precision),
        m_own_features(features),
        m_features(features),
        m_chunk(chunk),
        m_start(start_index) {
    max_policies = policies;
    max_decisions = decisions;
    const std::size_t positions = spec.positions, first_width = spec.hidden.front();
    std::size_t widest = 0;
    for (std::size_t w : spec.hidden)
      widest = std::max(widest, w);
    auto alloc = [&](const char* label) { return Kokkos::view_alloc(space, std::string(label)); };
    // Feature rows and head columns are padded with zeros to the backend's preferred width
    // (16-byte aligned rows for tensor cores); the zeros add nothing.
    m_first_weight = MatrixBatch<T>(alloc("dqntrader::eval::w_first"), policies,
                                    padded(spec.features), first_width);
    m_first_bias = Kokkos::View<T*, DeviceMemory>(alloc("dqntrader::eval::b_first"),
                                                  policies * positions * first_width);
    for (std::size_t l = 1; l < spec.hidden.size(); ++l) {
      m_weights.push_back(MatrixBatch<T>(alloc("dqntrader::eval::weight"), policies,
                                         spec.hidden[l - 1], spec.hidden[l]));
      m_biases.push_back(Kokkos::View<T*, DeviceMemory>(alloc("dqntrader::eval::bias"),
                                                        policies * spec.hidden[l]));
    }
    m_head = MatrixBatch<T>(alloc("dqntrader::eval::w_head"), policies, spec.hidden.back(),
                            padded(spec.actions));
    m_head_bias = Kokkos::View<float*, DeviceMemory>(alloc("dqntrader::eval::b_head"),
                                                     policies * padded(spec.actions));
    // Every pass writes these before it reads them (each product writes its whole output, the
    // maps of every decision come before the paths, the paths before the metrics): allocated
    // without the zeros.
    auto scratch = [&](const char* label) {
      return Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string(label));
    };
    const std::size_t activation = policies * positions * chunk * widest;
    m_ping = Kokkos::View<T*, DeviceMemory>(scratch("dqntrader::eval::activations_a"), activation);
    m_pong = Kokkos::View<T*, DeviceMemory>(scratch("dqntrader::eval::activations_b"), activation);
    m_q = MatrixBatch<float>(scratch("dqntrader::eval::q"), policies, positions * chunk,
                             padded(spec.actions));
    maps = Kokkos::View<std::uint32_t*, DeviceMemory>(scratch("dqntrader::eval::maps"),
                                                      policies * decisions);
    paths = Kokkos::View<std::int8_t*, DeviceMemory>(scratch("dqntrader::eval::paths"),
                                                     policies * decisions);
    m_block_maps = Kokkos::View<std::uint32_t*, DeviceMemory>(
        scratch("dqntrader::eval::block_maps"),
        policies * ((decisions + kBlockBars - 1) / kBlockBars));
  }

  void enqueue(const ExecSpace& space, const ParameterRows& parameters, std::size_t begin,
               std::size_t n) override {
    check(parameters, begin, n);
    prepare_weights(space, parameters);
    decide(space, parameters.extent(0), begin, n, m_start, {});
  }

  void prepare(const ExecSpace& space, const ParameterRows& parameters) override {
    if (parameters.extent(0) != 1)
      throw InputError("one policy is prepared at a time, not " +
                       std::to_string(parameters.extent(0)));
    check(parameters, 0, 0);
    prepare_weights(space, parameters);
    m_prepared = true;
  }

  void enqueue_taken(const ExecSpace& space, std::size_t begin, std::size_t n, std::size_t start,
                     const Kokkos::View<float**, DeviceMemory>& taken) override {
    const std::size_t positions = m_layout.spec().positions, actions = m_layout.spec().actions;
    if (!m_prepared)
      throw InputError("enqueue_taken needs a policy prepared first");
    if (taken.extent(0) < n || taken.extent(1) != actions)
      throw InputError("Q-values along a path need n x actions of room");
    if (start >= positions)
      throw InputError("no incoming position " + std::to_string(start));
    if (n > max_decisions || begin + n > m_features.extent(0))
      throw InputError("decision window out of range");
    if (m_all_q.extent(0) < max_decisions * positions * actions) {
      m_all_q = Kokkos::View<float*, DeviceMemory>(
          Kokkos::view_alloc(space, std::string("dqntrader::eval::all_q")),
          max_decisions * positions * actions);
    }
    decide(space, 1, begin, n, start, taken);
  }

  void restandardize(const data::FeatureSet& features, const data::FeatureStats& stats) override {
    if (features.bars() != m_features.extent(0))
      throw InputError("restandardized features need as many bars as before");
    features.standardize_into(stats, m_own_features);
  }

  std::vector<float> q_values(const ExecSpace& space, const ParameterRows& parameters,
                              std::size_t k, std::size_t begin, std::size_t n) override {
    const std::size_t positions = m_layout.spec().positions, actions = m_layout.spec().actions;
    std::vector<float> values(n * positions * actions);
    check(parameters, begin, n);
    prepare_weights(space, parameters);
    forward(space, parameters.extent(0), begin, n,
            [&](std::size_t first, std::size_t c, const MatrixBatch<const float>& q) {
              auto host = Kokkos::create_mirror_view(q);
              Kokkos::deep_copy(space, host, q);
              compat::fence(space, "dqntrader::eval::q_values: the host reads the Q-values");
              for (std::size_t i = 0; i < c; ++i) {
                for (std::size_t p = 0; p < positions; ++p) {
                  for (std::size_t a = 0; a < actions; ++a) {
                    values[((first + i) * positions + p) * actions + a] = host(k, p * c + i, a);
                  }
                }
              }
            });
    return values;
  }

 private:
  // The decisions of k_count prepared policies at bars [begin, begin + n), coming in with the
  // position of index start; with taken (one policy), its Q-values along the path kept too.
  void decide(const ExecSpace& space, std::size_t k_count, std::size_t begin, std::size_t n,
              std::size_t start, const Kokkos::View<float**, DeviceMemory>& taken) {
    const std::size_t positions = m_layout.spec().positions, actions = m_layout.spec().actions;
    const bool keep = taken.extent(0) > 0;
    forward(space, k_count, begin, n,
            [&](std::size_t first, std::size_t c, const MatrixBatch<const float>& q) {
              argmax_maps(space, q, actions, positions, c, maps, max_decisions, first);
              if (keep)
                keep_q(space, q, actions, positions, c, m_all_q, first);
            });
    const std::size_t blocks = (n + kBlockBars - 1) / kBlockBars;
    const PathBlocks at{
        maps.data(), paths.data(), m_block_maps.data(),         max_decisions,
        n,           blocks,       static_cast<int>(positions), static_cast<int>(start)};
    const int threads = evaluation_team_size(space);
    Kokkos::TeamPolicy<ExecSpace> policy(space, static_cast<int>(k_count * blocks), threads);
    policy.set_scratch_size(0, Kokkos::PerTeam(TeamScratch<std::uint32_t>::shmem_size(threads)));
    if (blocks > 1)
      Kokkos::parallel_for("dqntrader::eval::block_maps", recordable(policy), BlockMaps{at});
    Kokkos::parallel_for("dqntrader::eval::position_paths", recordable(policy), BlockPaths{at});
    if (keep)
      take_q(space, m_all_q, Kokkos::subview(paths, std::make_pair(std::size_t{0}, n)), start,
             positions, taken);
  }

  void check(const ParameterRows& parameters, std::size_t begin, std::size_t n) const {
    const std::size_t k_count = parameters.extent(0);
    if (k_count == 0 || k_count > max_policies) {
      throw InputError("evaluation of " + std::to_string(k_count) +
                       " policies; this evaluator serves 1 to " + std::to_string(max_policies));
    }
    if (parameters.extent(1) != m_layout.size()) {
      throw InputError("parameter vectors hold " + std::to_string(parameters.extent(1)) +
                       " values, the network has " + std::to_string(m_layout.size()));
    }
    if (n > max_decisions || begin + n > m_features.extent(0))
      throw InputError("decision window out of range");
  }

  // Runs the networks over bars [begin, begin + n) chunk by chunk; after each chunk calls
  // on_chunk(first, c, q) with q[k][p * c + i][a] = Q of bar begin + first + i, incoming p.
  // Every layer is one product with its bias and ReLU in the epilogue; the first layer runs
  // once per incoming position, with that position's one-hot row folded into its bias.
  template <class OnChunk>
  void forward(const ExecSpace& space, std::size_t k_count, std::size_t begin, std::size_t n,
               const OnChunk& on_chunk) {
    const nn::NetworkSpec& spec = m_layout.spec();

    const std::size_t positions = spec.positions, first_width = spec.hidden.front();
    for (std::size_t first = 0; first < n; first += m_chunk) {
      const std::size_t c = std::min(m_chunk, n - first), rows = positions * c;
      const std::size_t row_width = m_features.extent(1);  // the features, padded
      MatrixBatch<const T> x(m_features.data() + (begin + first) * row_width, 1, c, row_width);
      MatrixBatch<T> hidden(m_ping.data(), k_count, rows, first_width);
      for (std::size_t p = 0; p < positions; ++p) {
        gemm::Epilogue<T> epilogue;
        epilogue.bias = Kokkos::View<const T*, DeviceMemory>(
            m_first_bias.data() + p * first_width, m_first_bias.extent(0) - p * first_width);
        epilogue.bias_stride = positions * first_width;
        epilogue.relu = true;
        gemm::product_batched<T, T>(
            space, m_precision, x, sub(m_first_weight, k_count),
            Kokkos::subview(hidden, Kokkos::ALL, std::make_pair(p * c, (p + 1) * c), Kokkos::ALL),
            epilogue);
      }
      T* in = m_ping.data();
      T* out = m_pong.data();
      for (std::size_t l = 1; l < spec.hidden.size(); ++l) {
        MatrixBatch<const T> a(in, k_count, rows, spec.hidden[l - 1]);
        MatrixBatch<T> next(out, k_count, rows, spec.hidden[l]);
        gemm::Epilogue<T> epilogue;
        epilogue.bias = m_biases[l - 1];
        epilogue.bias_stride = spec.hidden[l];
        epilogue.relu = true;
        gemm::product_batched<T, T>(space, m_precision, a, sub(m_weights[l - 1], k_count), next,
                                    epilogue);
        std::swap(in, out);
      }
      MatrixBatch<const T> last(in, k_count, rows, spec.hidden.back());
      MatrixBatch<float> q(m_q.data(), k_count, rows, padded(spec.actions));
      gemm::Epilogue<float> head;
      head.bias = m_head_bias;
      head.bias_stride = padded(spec.actions);
      gemm::product_batched<T, float>(space, m_precision, last, sub(m_head, k_count), q, head);
      on_chunk(first, c, MatrixBatch<const float>(q));
    }
  }

  static MatrixBatch<T> sub(const MatrixBatch<T>& v, std::size_t k_count) {
    return Kokkos::subview(v, std::make_pair(std::size_t{0}, k_count), Kokkos::ALL, Kokkos::ALL);
  }

  void prepare_weights(const ExecSpace& space, const ParameterRows& parameters) {
    const nn::NetworkSpec& spec = m_layout.spec();
    const std::size_t k_count = parameters.extent(0);
    gather_weight(space, parameters, m_layout.weight(0), 0, spec.features,
                  sub(m_first_weight, k_count));
    position_biases(space, parameters, m_layout.weight(0), m_layout.bias(0), spec.features,
                    spec.positions, m_first_bias);
    for (std::size_t l = 1; l < spec.hidden.size(); ++l) {
      gather_weight(space, parameters, m_layout.weight(l), 0, spec.hidden[l - 1],
                    sub(m_weights[l - 1], k_count));
      gather_bias(space, parameters, m_layout.bias(l), spec.hidden[l], m_biases[l - 1]);
    }
    const std::size_t head = spec.hidden.size();
    if (spec.dueling) {
      fold_dueling(space, parameters, m_layout.weight(head), m_layout.bias(head),
                   sub(m_head, k_count), padded(spec.actions), m_head_bias);
    } else {
      gather_weight(space, parameters, m_layout.weight(head), 0, spec.hidden.back(),
                    sub(m_head, k_count));
      gather_bias(space, parameters, m_layout.bias(head), padded(spec.actions), m_head_bias);
    }
  }

  nn::ParameterLayout m_layout;
  Precision m_precision;
  Matrix<T> m_own_features;  // standardized at construction, and again by restandardize()
  Matrix<const T> m_features;
  std::size_t m_chunk, m_start;
  bool m_prepared = false;                     // prepare() has converted one policy's weights
  Kokkos::View<float*, DeviceMemory> m_all_q;  // [decision][incoming][action], when kept
  MatrixBatch<T> m_first_weight;
  Kokkos::View<T*, DeviceMemory> m_first_bias;
  std::vector<MatrixBatch<T>> m_weights;
  std::vector<Kokkos::View<T*, DeviceMemory>> m_biases;
  MatrixBatch<T> m_head;
  Kokkos::View<float*, DeviceMemory> m_head_bias;
  MatrixBatch<float> m_q;
  Kokkos::View<T*, DeviceMemory> m_ping, m_pong;
  Kokkos::View<std::uint32_t*, DeviceMemory> m_block_maps;  // each block's composed map
};

}  // namespace

QPolicy::QPolicy(const ExecSpace& space, const nn::NetworkSpec& spec, Precision precision,
                 const data::FeatureSet& features, const data::FeatureStats& stats,
                 std::size_t max_policies, std::size_t chunk_bars, std::size_t max_decisions,
                 std::size_t start_index) {
  nn::validate(spec);
  if (spec.features != features.spec().count()) {
    throw InputError("the network expects " + std::to_string(spec.features) +
                     " features, the data gives " + std::to_string(features.spec().count()));
  }
  if (spec.positions != spec.actions || spec.positions > 8) {
    throw InputError(
        "every action is a target position: the network needs as many actions as positions (at "
        "most 8)");
  }
  if (max_policies == 0 || chunk_bars == 0)
    throw InputError("evaluator sizes must be positive");
  if (start_index >= spec.positions)
    throw InputError("the incoming position's index " + std::to_string(start_index) +
                     " is not one of the network's " + std::to_string(spec.positions));
  if (precision == Precision::bf16) {
    m_engine = std::make_unique<EngineImpl<bf16>>(
        space, spec, precision, features.standardized_bf16(stats, padded(spec.features)),
        max_policies, chunk_bars, max_decisions, start_index);
  } else {
    m_engine = std::make_unique<EngineImpl<float>>(
        space, spec, precision, features.standardized_float(stats, padded(spec.features)),
        max_policies, chunk_bars, max_decisions, start_index);
  }
}

QPolicy::~QPolicy() = default;

void QPolicy::enqueue(const ExecSpace& space, const ParameterRows& parameters, std::size_t begin,
                      std::size_t n) {
  m_engine->enqueue(space, parameters, begin, n);
}

void QPolicy::prepare(const ExecSpace& space, const ParameterRows& parameters) {
  m_engine->prepare(space, parameters);
}

void QPolicy::enqueue_taken(const ExecSpace& space, std::size_t begin, std::size_t n,
                            std::size_t start, const Kokkos::View<float**, DeviceMemory>& taken) {
  m_engine->enqueue_taken(space, begin, n, start, taken);
}

void QPolicy::restandardize(const data::FeatureSet& features, const data::FeatureStats& stats) {
  m_engine->restandardize(features, stats);
}

std::vector<float> QPolicy::q_values(const ExecSpace& space, const ParameterRows& parameters,
                                     std::size_t k, std::size_t begin, std::size_t n) {
  if (k >= parameters.extent(0))
    throw InputError("q_values: no policy " + std::to_string(k));
  return m_engine->q_values(space, parameters, k, begin, n);
}

Kokkos::View<const std::int8_t*, DeviceMemory> QPolicy::path(std::size_t k, std::size_t n) const {
  const std::size_t start = k * m_engine->max_decisions;
  return Kokkos::subview(m_engine->paths, std::make_pair(start, start + n));
}

Paths QPolicy::paths(std::size_t count, std::size_t n) const {
  return Paths{m_engine->paths, n, count, m_engine->max_decisions};
}

std::size_t QPolicy::max_policies() const {
  return m_engine->max_policies;
}
std::size_t QPolicy::max_decisions() const {
  return m_engine->max_decisions;
}

}  // namespace dqntrader::eval

#include "dqntrader/nn/mlp.hpp"

#include <string>
#include <type_traits>
#include <utility>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/for_each_cell.hpp"
#include "dqntrader/core/team_sum.hpp"

namespace dqntrader::nn {

namespace {

using gemm::Op;

template <class V>
auto first_rows(const V& m, std::size_t rows) {
  return Kokkos::subview(m, std::make_pair(std::size_t{0}, rows), Kokkos::ALL);
}

// Blocks [set, set + sets) of x and their rows [row, row + rows).
template <class T>
gemm::StridedBatch<T> block_of(const gemm::StridedBatch<T>& x, std::size_t set, std::size_t sets,
                               std::size_t row, std::size_t rows) {
  return gemm::StridedBatch<T>(
      x.data() + set * x.stride(0) + row * x.stride(1),
      Kokkos::LayoutStride(sets, x.stride(0), rows, x.stride(1), x.extent(2), 1));
}

// The first sets blocks and their first rows rows.
template <class T>
gemm::StridedBatch<T> first_of(const gemm::StridedBatch<T>& x, std::size_t sets, std::size_t rows) {
  return block_of(x, 0, sets, 0, rows);
}

// Tensor t of count weight sets, set s at s * stride values into values: [set][row][col].
template <class T>
gemm::StridedBatch<T> tensor_sets(T* values, const Tensor& t, std::size_t count,
                                  std::size_t stride) {
  return gemm::StridedBatch<T>(values + t.offset,
                               Kokkos::LayoutStride(count, stride, t.rows, t.cols, t.cols, 1));
}

// Whether forward_pair evaluates one member's target network with its online network, on
// every row, in one batched product a layer (on CUDA, where at one member's size a product
// costs its launch, and three products more cost more than the target's rows outside s'),
// rather than on s' alone, beside (on the host, where a product costs its arithmetic).
#if defined(DQNTRADER_BACKEND_CUDA)
constexpr bool kJointPairs = true;
#else
constexpr bool kJointPairs = false;
#endif

// Rows of the head a team evaluates in head_forward at kHeadLanes threads a row (more, with
// fewer lanes a row: head_lanes).
#if defined(DQNTRADER_BACKEND_CUDA)
constexpr int kRowsPerTeam = 4;
#else
constexpr int kRowsPerTeam = 1;
#endif

// The head in one pass: for row r of copy c, o = hidden(c, r, :) w_c + bias_c, and q(c, r, :)
// its Q-values (head_q). Each row's lanes add their shares in a fixed tree.
template <int W, bool Whole, class T>
void head_forward(const ExecSpace& space, const HeadInputs<T>& head, std::size_t rows,
                  const gemm::StridedBatch<float>& q) {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = Policy::member_type;
  const std::size_t inputs = head.hidden.extent(2), actions = q.extent(2);
  const std::size_t all = q.extent(0) * rows;
  constexpr int team = kHeadLanes * kRowsPerTeam;
  const int lanes = head_lanes(inputs);
  const std::size_t per_team = static_cast<std::size_t>(team / lanes);
  Policy policy(space, static_cast<int>((all + per_team - 1) / per_team), team);
  Kokkos::parallel_for(
      "dqntrader::nn::head_forward", policy, KOKKOS_LAMBDA(const Member& member) {
        const int lane = member.team_rank() % lanes, slot = member.team_rank() / lanes;
        const std::size_t at = static_cast<std::size_t>(member.league_rank()) * per_team +
                               static_cast<std::size_t>(slot);
        const std::size_t c = at / rows, r = at % rows;
        float sum[1][W] = {};
        if (at < all) {
          const T* const row[1] = {head.row(c, r)};
          head_dot<W, 1, Whole>(lane, lanes, row, head.weight_of(c), inputs, sum);
        }
        lane_sums<W>(sum[0], lanes);
        if (lane != 0 || at >= all)
          return;
        float values[W];
        head_q<W>([&](int a) { return sum[0][a] + head.bias_of(c, a); }, W, head.dueling, values);
        for (std::size_t a = 0; a < actions; ++a)
          q(c, r, a) = values[a];
      });
}

}  // namespace

template <class T>
void head_forward(const ExecSpace& space, const HeadInputs<T>& head, std::size_t rows,
                  const gemm::StridedBatch<float>& q) {
  if (q.extent(0) > head.hidden.extent(0) || rows > head.hidden.extent(1) || q.extent(1) < rows ||
      q.extent(2) != head.actions()) {
    throw InputError("head_forward: " + std::to_string(rows) + " rows do not fit the buffers");
  }
  with_head_width(head.width, [&](auto width) {
    with_whole_packs(head_packs(head), [&](auto whole) {
      head_forward<decltype(width)::value, decltype(whole)::value, T>(space, head, rows, q);
    });
  });
}

template void head_forward(const ExecSpace&, const HeadInputs<float>&, std::size_t,
                           const gemm::StridedBatch<float>&);
template void head_forward(const ExecSpace&, const HeadInputs<bf16>&, std::size_t,
                           const gemm::StridedBatch<float>&);

namespace {

// --- The backward pass's column passes -------------------------------------------------------
// A hidden layer's gradient before its ReLU, dZ (rows x cols per learner), in one pass with the
// sums of its columns over the rows: the layer's bias gradient db = 1^T dZ, and in the head's
// pass also the head's weight gradient h^T g. A thread takes kPack adjacent columns (one load
// of a pack each, where the rows allow it) of a tile of columns, and every groups-th row of a
// chunk of rows, kRowBatch rows loaded before any is stored (their loads overlap). Its sums are
// added to those of the row groups of its warp (a butterfly of shuffles on CUDA), then the
// warps' in scratch in order, into partials(learner, chunk, s * cols + column); the last team
// of a learner's column tile adds the chunks in order (a chunk that is the tile's only one
// writes its sums where they go): the same order on every run. On CUDA a tile is up to
// kCudaTilePacks packs (32 columns) and a thread's rows the fewest batches (a power of two)
// that keep the pass within kColumnTeams teams: narrow tiles and short chunks, so that even
// one learner's pass has thousands of threads and the last team adds few chunks, and, for
// many learners, longer chunks rather than more teams, each with its fence and atomic: at most
// kColumnTeams, about the teams an H200 holds at once (two each on 132 multiprocessors), so
// that such a pass is one wave (at 16 members of the EPOCH network one chunk a tile, no
// partial sums, was faster than two chunks a tile in 512 teams: docs/BENCHMARKS.md). The
// order of a learner's sums then depends on the number of learners, by their chunks. On the
// host a team is one thread, which takes a tile of up to kHostTilePacks packs one pack after
// another over a chunk of kHostChunkRows rows (one group), for any number of learners.
constexpr int kRowBatch = 4;
#if defined(DQNTRADER_BACKEND_CUDA)
constexpr std::size_t kColumnTeam = 256, kCudaTilePacks = 4, kColumnTeams = 256;
#else
constexpr std::size_t kColumnTeam = 1, kHostTilePacks = 16, kHostChunkRows = 64;
#endif
// Threads whose sums a warp adds before they meet in scratch (on the host a layout constant: a
// team's one thread takes fewer packs than this).
constexpr std::size_t kWarpLanes = 32;

// How a column pass over learners' rows x cols divides them among teams of kColumnTeam threads.
struct ColumnTiles {
  std::size_t rows = 0, cols = 0, packs = 0, tile_packs = 0, groups = 0, tiles = 0;
  std::size_t chunk_rows = 0, chunks = 0;

  ColumnTiles(std::size_t rows_, std::size_t cols_, std::size_t learners)
      : rows(rows_), cols(cols_) {
    packs = (cols + kPack - 1) / kPack;
#if defined(DQNTRADER_BACKEND_CUDA)
    // A power of two, so that a warp's lanes of one pack lie a power of two apart and the team
    // is whole groups.
    tile_packs = 1;
    while (tile_packs * 2 <= packs && tile_packs * 2 <= kCudaTilePacks)
      tile_packs *= 2;
    groups = kColumnTeam / tile_packs;
    tiles = (packs + tile_packs - 1) / tile_packs;
    chunk_rows = groups * kRowBatch;
    while (chunk_rows < rows &&
           learners * tiles * ((rows + chunk_rows - 1) / chunk_rows) > kColumnTeams)
      chunk_rows *= 2;
#else
    (void)learners;
    tile_packs = packs < kHostTilePacks ? packs : kHostTilePacks;
    groups = 1;
    tiles = (packs + tile_packs - 1) / tile_packs;
    chunk_rows = kHostChunkRows;
#endif
    chunks = (rows + chunk_rows - 1) / chunk_rows;
  }
  KOKKOS_INLINE_FUNCTION std::size_t threads() const {
    return tile_packs * groups;
  }
  KOKKOS_INLINE_FUNCTION std::size_t warps() const {
    return (threads() + kWarpLanes - 1) / kWarpLanes;
  }
  KOKKOS_INLINE_FUNCTION std::size_t tile_cols() const {
    return tile_packs * kPack;
  }
};

// Adds each thread's sums to those of the other threads of its warp that take the same pack
// (lanes `from`, 2 from, ... apart: every row group of the warp), in a butterfly: every such
// lane gets the same sums. On the host a team's one thread is its only group: nothing to add.
template <int S>
KOKKOS_INLINE_FUNCTION void add_warp_groups(float (&sums)[S][kPack], std::size_t from) {
#if defined(__CUDA_ARCH__)
  for (unsigned apart = static_cast<unsigned>(from); apart < kWarpLanes; apart *= 2) {
    for (int s = 0; s < S; ++s) {
      for (int c = 0; c < kPack; ++c)
        sums[s][c] += __shfl_xor_sync(0xffffffffu, sums[s][c], apart);
    }
  }
#else
  (void)sums;
  (void)from;
#endif
}

// Adds row h's products with the head's output gradient g of the row, h g(a) for each output
// a, to sums[first + a].
template <int W, int S, class T>
KOKKOS_INLINE_FUNCTION void add_head_weight_sums(const Pack<T>& h, const float (&g)[W], int first,
                                                 float (&sums)[S][kPack]) {
  for (int c = 0; c < kPack; ++c) {
    const float hc = to_float(h.v[c]);
    for (int a = 0; a < W; ++a)
      sums[first + a][c] += hc * g[a];
  }
}

// Loads, for the count rows r of learner k, the pack of h at column j0 (n columns), as stored,
// and the row's W values of the head's output gradient g: every load issued before any is
// used.
template <int W, bool Whole, class T>
KOKKOS_INLINE_FUNCTION void load_head_rows(const gemm::StridedBatch<const T>& g,
                                           const gemm::StridedBatch<const T>& h, std::size_t k,
                                           const std::size_t (&r)[kRowBatch], int count,
                                           std::size_t j0, int n, Pack<T> (&held)[kRowBatch],
                                           float (&ga)[kRowBatch][W]) {
  for (int b = 0; b < kRowBatch; ++b) {
    if (b >= count)
      break;
    held[b] = load_stored<Whole>(&h(k, r[b], j0), n);
    for (int a = 0; a < W; ++a)
      ga[b][a] = to_float(g(k, r[b], static_cast<std::size_t>(a)));
  }
}

// The head's rows: from the head's output gradient g (rows x W) and weight w (hidden x W),
// the last hidden layer's dZ = g w^T zeroed where h <= 0 (the ReLU's derivative), in the
// compute type (g w^T has W columns: a product of its own would be wasteful); sums: dZ as
// stored (the layer's bias gradient) and, with Weights, h g(:, a) for each a (the head's
// weight gradient).
template <int W, class T, bool Whole, bool Weights>
struct HeadRows {
  static constexpr int kSums = Weights ? 1 + W : 1;
  gemm::StridedBatch<const T> g, h;  // [learner][row][W], [learner][row][hidden]
  gemm::StridedBatch<T> y;           // [learner][row][hidden]
  const T* w = nullptr;              // learner k's head weight (hidden x W) at w + k * w_stride
  std::size_t w_stride = 0;

  struct Thread {
    const HeadRows* p;
    std::size_t k, j0;
    int n;
    float wt[kPack][W];

    KOKKOS_INLINE_FUNCTION void rows(const std::size_t (&r)[kRowBatch], int count,
                                     float (&sums)[kSums][kPack]) const {
      Pack<T> held[kRowBatch];
      float ga[kRowBatch][W];
      load_head_rows<W, Whole>(p->g, p->h, k, r, count, j0, n, held, ga);
      for (int b = 0; b < kRowBatch; ++b) {
        if (b >= count)
          break;
        float x[kPack];
        for (int c = 0; c < kPack; ++c) {
          float dot = 0.0f;
          for (int a = 0; a < W; ++a)
            dot += ga[b][a] * wt[c][a];
          x[c] = to_float(held[b].v[c]) > 0.0f ? dot : 0.0f;
        }
        const Pack<T> dz = pack_of<T>(x);
        store_stored<Whole>(&p->y(k, r[b], j0), n, dz);
        for (int c = 0; c < kPack; ++c)
          sums[0][c] += to_float(dz.v[c]);
        if constexpr (Weights)
          add_head_weight_sums<W>(held[b], ga[b], 1, sums);
      }
    }
  };
  KOKKOS_INLINE_FUNCTION Thread thread(std::size_t k, std::size_t j0, int n) const {
    Thread t{this, k, j0, n, {}};
    const T* const wk = w + k * w_stride;
    for (int c = 0; c < n; ++c) {
      for (int a = 0; a < W; ++a)
        t.wt[c][a] = to_float(wk[(j0 + static_cast<std::size_t>(c)) * W + a]);
    }
    return t;
  }
};

// The head's weight gradient alone: sums h g(:, a) for each output a, from the last hidden
// layer's h and the head's output gradient g; stores nothing (it runs beside HeadRows without
// Weights, on the side).
template <int W, class T, bool Whole>
struct HeadWeightRows {
  static constexpr int kSums = W;
  gemm::StridedBatch<const T> g, h;  // [learner][row][W], [learner][row][hidden]

  struct Thread {
    const HeadWeightRows* p;
    std::size_t k, j0;
    int n;

    KOKKOS_INLINE_FUNCTION void rows(const std::size_t (&r)[kRowBatch], int count,
                                     float (&sums)[kSums][kPack]) const {
      Pack<T> held[kRowBatch] = {};
      float ga[kRowBatch][W] = {};
      load_head_rows<W, Whole>(p->g, p->h, k, r, count, j0, n, held, ga);
      for (int b = 0; b < kRowBatch; ++b) {
        if (b >= count)
          break;
        add_head_weight_sums<W>(held[b], ga[b], 0, sums);
      }
    }
  };
  KOKKOS_INLINE_FUNCTION Thread thread(std::size_t k, std::size_t j0, int n) const {
    return Thread{this, k, j0, n};
  }
};

// A hidden layer's rows below the last: y = dH, the gradient of its output, becomes dZ in
// place, zeroed where h <= 0 (the stored value kept or zero: no rounding); sums: dZ (the
// layer's bias gradient).
template <class T, bool Whole>
struct ReluRows {
  static constexpr int kSums = 1;
  gemm::StridedBatch<const T> h;
  gemm::StridedBatch<T> y;

  struct Thread {
    const ReluRows* p;
    std::size_t k, j0;
    int n;

    KOKKOS_INLINE_FUNCTION void rows(const std::size_t (&r)[kRowBatch], int count,
                                     float (&sums)[kSums][kPack]) const {
      Pack<T> held[kRowBatch], dz[kRowBatch];
      for (int b = 0; b < kRowBatch; ++b) {
        if (b >= count)
          break;
        held[b] = load_stored<Whole>(&p->h(k, r[b], j0), n);
        dz[b] = load_stored<Whole>(&p->y(k, r[b], j0), n);
      }
      for (int b = 0; b < kRowBatch; ++b) {
        if (b >= count)
          break;
        for (int c = 0; c < kPack; ++c) {
          if (!(to_float(held[b].v[c]) > 0.0f))
            dz[b].v[c] = T{};
        }
        store_stored<Whole>(&p->y(k, r[b], j0), n, dz[b]);
        for (int c = 0; c < kPack; ++c)
          sums[0][c] += to_float(dz[b].v[c]);
      }
    }
  };
  KOKKOS_INLINE_FUNCTION Thread thread(std::size_t k, std::size_t j0, int n) const {
    return Thread{this, k, j0, n};
  }
};

// Where a column pass's sums go, learner k's at k * stride values into the gradients: with a
// bias, sum 0 to bias[j] and sum 1 + a to weight[j * (sums - 1) + a]; without, sum a to
// weight[j * sums + a].
struct ColumnSums {
  float* bias = nullptr;
  float* weight = nullptr;
  std::size_t stride = 0;
  MatrixBatch<float> partials;                 // [learner][chunk][sum * cols + column]
  Kokkos::View<int**, DeviceMemory> arrivals;  // [learner][column tile]

  // Where learner k's sum s (of sums) of column j goes.
  KOKKOS_INLINE_FUNCTION float& at(std::size_t k, int s, int sums, std::size_t j) const {
    if (bias != nullptr && s == 0)
      return bias[k * stride + j];
    const int first = bias != nullptr ? 1 : 0;
    return weight[k * stride + j * static_cast<std::size_t>(sums - first) +
                  static_cast<std::size_t>(s - first)];
  }
};

template <class Rows>
struct ColumnPass {
  static constexpr int S = Rows::kSums;
  Rows rows_of;
  ColumnTiles t;
  ColumnSums out;

  KOKKOS_INLINE_FUNCTION void operator()(
      const Kokkos::TeamPolicy<ExecSpace>::member_type& member) const {
    const std::size_t warps = t.warps();
    const TeamScratch<float> shared(member.team_scratch(0), S * kPack * warps * t.tile_packs);
    const std::size_t league = static_cast<std::size_t>(member.league_rank());
    const std::size_t k = league / (t.tiles * t.chunks), tile = league / t.chunks % t.tiles;
    const std::size_t chunk = league % t.chunks, threads = t.threads();
    const std::size_t rank = static_cast<std::size_t>(member.team_rank());
    const std::size_t team = static_cast<std::size_t>(member.team_size());
    const std::size_t first = chunk * t.chunk_rows;
    const std::size_t end = first + t.chunk_rows < t.rows ? first + t.chunk_rows : t.rows;
    for (std::size_t v = rank; v < threads; v += team) {
      const std::size_t pack = tile * t.tile_packs + v % t.tile_packs, group = v / t.tile_packs;
      float sums[S][kPack] = {};
      if (pack < t.packs) {
        const std::size_t j0 = pack * kPack;
        const int n = static_cast<int>(t.cols - j0 < kPack ? t.cols - j0 : kPack);
        const auto thread = rows_of.thread(k, j0, n);
        for (std::size_t r0 = first + group; r0 < end; r0 += kRowBatch * t.groups) {
          std::size_t r[kRowBatch];
          int count = 0;
          for (int b = 0; b < kRowBatch; ++b) {
            r[b] = r0 + static_cast<std::size_t>(b) * t.groups;
            if (r[b] < end)
              count = b + 1;
          }
          thread.rows(r, count, sums);
        }
      }
      // The warp's groups added (every thread of a CUDA team is here: threads() is the team
      // size), then one lane per pack writes the warp's sums: [sum][column][warp][pack].
      add_warp_groups<S>(sums, t.tile_packs);
      const std::size_t lane = v % kWarpLanes, warp = v / kWarpLanes;
      if (lane < t.tile_packs) {
        for (int s = 0; s < S; ++s) {
          for (int c = 0; c < kPack; ++c)
            shared(((static_cast<std::size_t>(s) * kPack + c) * warps + warp) * t.tile_packs +
                   lane) = sums[s][c];
        }
      }
    }
    member.team_barrier();
    // The warps' sums in order, into the chunk's partials (or, for a tile's only chunk, where
    // they go).
    const std::size_t cols = t.tile_cols(), first_col = tile * cols;
    for (int s = 0; s < S; ++s) {
      for (std::size_t col = rank; col < cols; col += team) {
        const std::size_t j = first_col + col;
        if (j >= t.cols)
          break;
        const std::size_t at =
            (static_cast<std::size_t>(s) * kPack + col % kPack) * warps * t.tile_packs +
            col / kPack;
        float total = 0.0f;
        for (std::size_t w = 0; w < warps; ++w)
          total += shared(at + w * t.tile_packs);
        if (t.chunks == 1)
          out.at(k, s, S, j) = total;
        else
          out.partials(k, chunk, s * t.cols + j) = total;
      }
    }
    if (t.chunks == 1 ||
        !last_to_arrive(member, &out.arrivals(k, tile), static_cast<int>(t.chunks)))
      return;
    for (int s = 0; s < S; ++s) {
      for (std::size_t col = rank; col < cols; col += team) {
        const std::size_t j = first_col + col;
        if (j >= t.cols)
          break;
        const volatile float* const column = &out.partials(k, 0, s * t.cols + j);
        float total = 0.0f;
        for (std::size_t q = 0; q < t.chunks; ++q)
          total += column[q * out.partials.stride(1)];
        out.at(k, s, S, j) = total;
      }
    }
  }
};

template <class Rows>
void column_pass(const char* label, const ExecSpace& space, const Rows& rows_of,
                 const ColumnTiles& tiles, std::size_t learners, const ColumnSums& out) {
  // Two teams a multiprocessor at least (at most 128 registers a thread on CUDA): the head's
  // pass with its weight gradient would take 145 and leave one.
  using Policy = Kokkos::TeamPolicy<ExecSpace, Kokkos::LaunchBounds<kColumnTeam, 2>>;
  Policy policy(space, static_cast<int>(learners * tiles.tiles * tiles.chunks),
                static_cast<int>(kColumnTeam));
  policy.set_scratch_size(0, Kokkos::PerTeam(TeamScratch<float>::shmem_size(
                                 Rows::kSums * kPack * tiles.warps() * tiles.tile_packs)));
  Kokkos::parallel_for(label, recordable(policy), ColumnPass<Rows>{rows_of, tiles, out});
}

// Whether the rows of h and y (and their sets) take whole packs.
template <class T>
bool rows_take_packs(const gemm::StridedBatch<const T>& h, const gemm::StridedBatch<T>& y) {
  return h.extent(2) % kPack == 0 && packs_fit(h.data(), h.stride(0), h.stride(1)) &&
         packs_fit(y.data(), y.stride(0), y.stride(1));
}

}  // namespace

template <class T>
Mlp<T>::Mlp(const ExecSpace& space, const NetworkSpec& spec, Precision precision,
            std::size_t max_rows, std::size_t max_sets, std::size_t max_learners)
    : m_layout(spec),
      m_precision(precision),
      m_max_rows(max_rows),
      m_max_sets(max_sets),
      m_max_learners(max_learners > 0 ? max_learners : max_sets) {
  if (max_sets == 0 || m_max_learners > max_sets)
    throw InputError("Mlp: at least one network, and no more learners than networks");
  if ((precision == Precision::bf16) != std::is_same<T, bf16>::value) {
    throw InputError(std::string("the network's storage does not match precision ") +
                     to_string(precision));
  }
  m_head_width = spec.dueling ? spec.actions + 1 : spec.actions;
  if (m_head_width > static_cast<std::size_t>(kMaxHeadWidth)) {
    throw InputError("the training network's head has at most " + std::to_string(kMaxHeadWidth) +
                     " outputs, not " + std::to_string(m_head_width));
  }
  auto alloc = [&](const char* label) { return Kokkos::view_alloc(space, std::string(label)); };
  for (std::size_t w : spec.hidden) {
    m_hidden.push_back(MatrixBatch<T>(alloc("dqntrader::nn::hidden"), max_sets, max_rows, w));
    m_layer_grads.push_back(
        MatrixBatch<T>(alloc("dqntrader::nn::layer_grad"), m_max_learners, max_rows, w));
  }
  m_head_grad =
      MatrixBatch<T>(alloc("dqntrader::nn::head_grad"), m_max_learners, max_rows, m_head_width);
  // One set of column partials serves the passes of the backward chain (they run one after
  // another), one more the head's weight gradient when it runs beside them; one learner's
  // passes have the most chunks.
  std::size_t chunks = 0, sums = 0, tiles = 0;
  for (std::size_t l = 0; l < spec.hidden.size(); ++l) {
    const std::size_t w = spec.hidden[l];
    const std::size_t per_column = l + 1 == spec.hidden.size() ? 1 + m_head_width : 1;
    const ColumnTiles t(max_rows, w, 1);
    chunks = std::max(chunks, t.chunks);
    tiles = std::max(tiles, t.tiles);
    sums = std::max(sums, per_column * w);
  }
  m_column_partials =
      MatrixBatch<float>(alloc("dqntrader::nn::column_partials"), m_max_learners, chunks, sums);
  m_column_arrivals = Kokkos::View<int**, DeviceMemory>(alloc("dqntrader::nn::column_arrivals"),
                                                        m_max_learners, tiles);
  const ColumnTiles last(max_rows, spec.hidden.back(), 1);
  m_head_partials = MatrixBatch<float>(alloc("dqntrader::nn::head_partials"), 1, last.chunks,
                                       m_head_width * spec.hidden.back());
  m_head_arrivals =
      Kokkos::View<int**, DeviceMemory>(alloc("dqntrader::nn::head_arrivals"), 1, last.tiles);
}

template <class T>
gemm::StridedBatch<const T> Mlp<T>::learner_hidden(std::size_t layer, std::size_t rows) const {
  return first_of(gemm::StridedBatch<const T>(m_hidden[layer]), m_learners, rows);
}

template <class T>
gemm::StridedBatch<const T> Mlp<T>::learner_states(std::size_t rows) const {
  if (m_states.extent(0) == 1)
    return first_of(m_states, 1, rows);  // shared by every learner
  return first_of(m_states, m_learners, rows);
}

template <class T>
template <class TC>
void Mlp<T>::product(const ExecSpace& space, Op op_a, Op op_b, const gemm::StridedBatch<const T>& a,
                     const gemm::StridedBatch<const T>& b, const gemm::StridedBatch<TC>& c) const {
  if constexpr (std::is_same<T, bf16>::value) {
    gemm::gemm_batched(space, op_a, op_b, 1.0f, a, b, 0.0f, c);
  } else {
    gemm::gemm_batched(space, m_precision, op_a, op_b, 1.0f, a, b, 0.0f, c);
  }
}

template <class T>
gemm::StridedBatch<const T> Mlp<T>::hidden_layers(const ExecSpace& space, const T* weights,
                                                  std::size_t sets, std::size_t stride,
                                                  const gemm::StridedBatch<const T>& states,
                                                  std::size_t first_set, std::size_t first_row,
                                                  std::size_t rows) {
  const NetworkSpec& spec = m_layout.spec();
  gemm::StridedBatch<const T> in = block_of(states, 0, states.extent(0), first_row, rows);
  for (std::size_t l = 0; l < spec.hidden.size(); ++l) {
    const Tensor& weight = m_layout.weight(l);
    const Tensor& bias = m_layout.bias(l);
    gemm::Epilogue<T> epilogue;
    epilogue.bias = Kokkos::View<const T*, DeviceMemory>(weights + bias.offset,
                                                         (sets - 1) * stride + bias.size());
    epilogue.bias_stride = stride;
    epilogue.relu = true;
    const gemm::StridedBatch<T> out = block_of(m_hidden[l], first_set, sets, first_row, rows);
    gemm::product_batched<T, T>(space, m_precision, in, tensor_sets(weights, weight, sets, stride),
                                out, epilogue);
    in = out;
  }
  return in;
}

template <class T>
HeadInputs<T> Mlp<T>::head_inputs(const Weights<T>& w, const gemm::StridedBatch<const T>& hidden,
                                  std::size_t stride) const {
  const std::size_t head = m_layout.spec().hidden.size();
  return HeadInputs<T>{hidden,
                       w.working.data() + m_layout.weight(head).offset,
                       w.master.data() + m_layout.bias(head).offset,
                       stride,
                       m_head_width,
                       m_layout.spec().dueling};
}

namespace {
// InputError unless count weight sets of size values lie stride apart in buffers of the given
// lengths.
void check_sets(const char* what, std::size_t count, std::size_t stride, std::size_t size,
                std::size_t working, std::size_t master) {
  const std::size_t needed = (count - 1) * stride + size;
  if (count == 0 || (count > 1 && stride < size) || working < needed || master < needed) {
    throw InputError(std::string(what) + ": " + std::to_string(count) + " weight sets of " +
                     std::to_string(size) + " values " + std::to_string(stride) +
                     " apart do not fit the buffers");
  }
}
}  // namespace

template <class T>
void Mlp<T>::forward(const ExecSpace& space, const Weights<T>& w,
                     const gemm::StridedBatch<const T>& states, std::size_t rows,
                     const gemm::StridedBatch<float>& q) {
  const NetworkSpec& spec = m_layout.spec();
  const std::size_t sets = w.count;
  check_sets("Mlp::forward", sets, w.stride, m_layout.size(), w.working.extent(0),
             w.master.extent(0));
  if (sets > m_max_sets || sets > m_max_learners || rows > m_max_rows || rows > states.extent(1) ||
      states.extent(2) != spec.state_size() ||
      (states.extent(0) != 1 && states.extent(0) != sets) || q.extent(0) != sets ||
      q.extent(1) < rows || q.extent(2) != spec.actions) {
    throw InputError("Mlp::forward: " + std::to_string(sets) + " networks on " +
                     std::to_string(rows) + " rows do not fit the buffers");
  }
  m_states = states;
  const HeadInputs<T> head = head_inputs(
      w, hidden_layers(space, w.working.data(), sets, w.stride, states, 0, 0, rows), w.stride);
  m_learners = sets;
  nn::head_forward<T>(space, head, rows, q);
}

template <class T>
HeadInputs<T> Mlp<T>::forward_pair(const ExecSpace& space, const exec::SideStream& side,
                                   const Weights<T>& w, const gemm::StridedBatch<const T>& states,
                                   std::size_t rows, std::size_t target_first,
                                   std::size_t target_rows) {
  const std::size_t members = w.count, sets = 2 * members;
  const std::size_t stride = w.stride > 0 ? w.stride : m_layout.size();
  check_sets("Mlp::forward_pair", sets, stride, m_layout.size(), w.working.extent(0),
             w.master.extent(0));
  if (sets > m_max_sets || members > m_max_learners || rows > m_max_rows ||
      rows > states.extent(1) || target_first + target_rows > rows ||
      states.extent(2) != m_layout.spec().state_size() ||
      (states.extent(0) != 1 && states.extent(0) != members)) {
    throw InputError("Mlp::forward_pair: " + std::to_string(members) + " members on " +
                     std::to_string(rows) + " rows or their weight sets do not fit the buffers");
  }
  m_states = states;
  m_learners = members;
  if (kJointPairs && members == 1) {
    // One member's target with its online network over every row (states, of one block, are
    // shared by the two): one batched product a layer.
    hidden_layers(space, w.working.data(), sets, stride, states, 0, 0, rows);
  } else {
    // The targets on the side, beside the online networks: each of the two products of a
    // layer is its own chain, and neither waits for the other's.
    side.fork(space);
    if (target_rows > 0) {
      hidden_layers(side.space(), w.working.data() + members * stride, members, stride, states,
                    members, target_first, target_rows);
    }
    hidden_layers(space, w.working.data(), members, stride, states, 0, 0, rows);
    side.join(space);
  }
  return head_inputs(w, first_of(gemm::StridedBatch<const T>(m_hidden.back()), sets, rows), stride);
}

template <class T>
OutputGradient<T> Mlp<T>::output_gradient(std::size_t rows, const Gradients& grads) const {
  const std::size_t k = grads.count;
  if (rows > m_max_rows || k != m_learners || (k > 1 && grads.stride < m_layout.size()) ||
      grads.values.extent(0) < (k - 1) * grads.stride + m_layout.size()) {
    throw InputError("Mlp::output_gradient: rows or gradient buffer do not match the network");
  }
  const Tensor& bias = m_layout.bias(m_layout.spec().hidden.size());
  return OutputGradient<T>{first_of(m_head_grad, k, rows), grads.values.data() + bias.offset,
                           grads.stride, m_layout.spec().dueling};
}

template <class T>
void Mlp<T>::backward(const ExecSpace& space, const exec::SideStream& side, const Weights<T>& w,
                      std::size_t rows, const Gradients& grads) {
  const NetworkSpec& spec = m_layout.spec();
  const std::size_t k = m_learners;
  if (rows > m_max_rows || grads.count != k || w.count != k ||
      (k > 1 && grads.stride < m_layout.size()) ||
      grads.values.extent(0) < (k - 1) * grads.stride + m_layout.size()) {
    throw InputError("Mlp::backward: rows, weights or gradient buffer do not match the network");
  }
  check_sets("Mlp::backward", k, w.stride, m_layout.size(), w.working.extent(0),
             w.master.extent(0));
  // The head, from the loss's output gradient g (the head's bias gradient is the loss's): in
  // one pass, dZ of the last hidden layer, (g W^T) * relu'(Z), its bias gradient 1^T dZ and
  // the head's weight gradient H^T g. One learner whose rows take several chunks has the head's
  // weight gradient in a pass of its own on the side, beside the chain below: there the joint
  // pass, its sums added over the chunks by a last team, is the longest link of the chain (on
  // CUDA at the EPOCH shape, a quarter longer than without the weight gradient); for a
  // population, whose passes fill the GPU, or a pass of one chunk, the second pass costs more
  // than it saves. Either way a column's sums are taken in the same order.
  const std::size_t head = spec.hidden.size();
  ColumnSums sums{nullptr, nullptr, grads.stride, m_column_partials, m_column_arrivals};
  {
    const gemm::StridedBatch<const T> h = learner_hidden(head - 1, rows);
    const gemm::StridedBatch<T> y = first_of(m_layer_grads[head - 1], k, rows);
    const gemm::StridedBatch<const T> g =
        first_of(gemm::StridedBatch<const T>(m_head_grad), k, rows);
    const ColumnTiles tiles(rows, h.extent(2), k);
    const bool apart = k == 1 && tiles.chunks > 1;
    float* const head_weight = grads.values.data() + m_layout.weight(head).offset;
    sums.bias = grads.values.data() + m_layout.bias(head - 1).offset;
    sums.weight = apart ? nullptr : head_weight;
    if (apart)
      side.fork(space);
    const T* const weights = w.working.data() + m_layout.weight(head).offset;
    with_head_width(m_head_width, [&](auto width) {
      with_whole_packs(rows_take_packs(h, y), [&](auto whole) {
        constexpr int W = decltype(width)::value;
        constexpr bool Whole = decltype(whole)::value;
        if (apart) {
          column_pass(
              "dqntrader::nn::head_weight_gradient", side.space(),
              HeadWeightRows<W, T, Whole>{g, h}, tiles, k,
              ColumnSums{nullptr, head_weight, grads.stride, m_head_partials, m_head_arrivals});
          column_pass("dqntrader::nn::head_backward", space,
                      HeadRows<W, T, Whole, false>{g, h, y, weights, w.stride}, tiles, k, sums);
        } else {
          column_pass("dqntrader::nn::head_backward", space,
                      HeadRows<W, T, Whole, true>{g, h, y, weights, w.stride}, tiles, k, sums);
        }
      });
    });
  }
  // Hidden layers, last to first: on the side, dW = H_in^T dZ into the layer's weight; on
  // space, dH_in = dZ W^T, then in one pass the layer below's dZ = dH_in * relu'(Z_in), in
  // place, and its bias gradient 1^T dZ.
  sums.weight = nullptr;
  for (std::size_t l = head; l-- > 0;) {
    const gemm::StridedBatch<const T> input =
        l == 0 ? learner_states(rows) : learner_hidden(l - 1, rows);
    const gemm::StridedBatch<const T> dz =
        first_of(gemm::StridedBatch<const T>(m_layer_grads[l]), k, rows);
    const Tensor& weight = m_layout.weight(l);
    side.fork(space);
    product(side.space(), Op::transpose, Op::none, input, dz,
            gemm::StridedBatch<float>(
                grads.values.data() + weight.offset,
                Kokkos::LayoutStride(k, grads.stride, weight.rows, weight.cols, weight.cols, 1)));
    if (l == 0)
      break;
    const gemm::StridedBatch<T> next = first_of(m_layer_grads[l - 1], k, rows);
    product(space, Op::none, Op::transpose, dz, tensor_sets(w.working.data(), weight, k, w.stride),
            next);
    sums.bias = grads.values.data() + m_layout.bias(l - 1).offset;
    with_whole_packs(rows_take_packs(input, next), [&](auto whole) {
      column_pass("dqntrader::nn::relu_backward", space,
                  ReluRows<T, decltype(whole)::value>{input, next},
                  ColumnTiles(rows, next.extent(2), k), k, sums);
    });
  }
  side.join(space);
}

template class Mlp<float>;
template class Mlp<bf16>;

}  // namespace dqntrader::nn

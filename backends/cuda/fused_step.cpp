// The fused learning step (fused_step.hpp). A chunk of R samples of one member is one block:
//   1. both networks' weights into shared memory (where one set is all that fits: the target's
//      first, the online's in its place after step 2's target pass), and the chunk's states:
//      its s' rows, its s rows and its share of the environments' states
//   2. down the layers, the target network on s' beside the online network on every row, so
//      that a layer of both is one phase (with one set, the online network's pass follows the
//      target's alone); the online activations of s stay for step 4
//   3. per sample (a thread each), the double-DQN target, the Huber loss and d loss / d Q, the
//      head's output gradient in bf16 (as the products path stores it), and the chunk's sums
//      (each warp's, then the warps' in order)
//   4. down the layers: the weight gradient act^T dOut of the chunk's rows into its parts, the
//      bias gradient (dOut's column sums; the head's from the chunk's sums of d loss / d Q),
//      and the next dOut = (dOut W^T) masked by the ReLU
// Every product is a warp's 16-row strip of the output times a block of 16 or 32 columns, in
// m16n8k16 tensor-core products whose operands ldmatrix loads from shared memory (transposed
// where the operand is stored the other way); shared rows are padded by 8 values so that the
// eight rows of an 8 x 8 load fall in different banks. Rows are padded to multiples of 16 with
// zeros; the state to 32, 64 or 128 values and every hidden layer to one of these widths, the
// head to 16 outputs (zero weights and biases keep the padded activations at zero), and the
// first kernel is compiled for each pair of widths, so that a product's extents, tiles and
// strides are constants. A load is a list of pieces (matrices, biases, runs of states) whose
// 16-byte chunks are dealt to the threads in turn across the pieces.
#include "fused_step.hpp"

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda_check.hpp"
#include "dqntrader/core/error.hpp"

namespace dqntrader::fused {

static_assert(sizeof(bf16) == sizeof(__nv_bfloat16), "bf16 has __nv_bfloat16's layout");

namespace {

using bf = __nv_bfloat16;

constexpr int kSums = 3 + kMaxHead;  // loss, Q, non-finite; then d loss / d Q per output
constexpr int kPad = 8;              // values after each shared row

__host__ __device__ constexpr int pad16(int n) {
  return (n + 15) / 16 * 16;
}

// The shift of a padded row's 16-byte chunks: a row of `values` (16 to 128) bf16 values is
// 1 << chunk_shift(values) chunks.
__host__ __device__ constexpr int chunk_shift(int values) {
  return values <= 16 ? 1 : values <= 32 ? 2 : values <= 64 ? 3 : 4;
}

// The kernel's compiled widths: the state padded to kIn = 32, 64 or 128 values, every hidden
// layer to one width kWidth of the same three, the head to kHeadPad outputs. A kernel is built
// for each pair, so that a product's extents, its tiles and its strides are constants.
constexpr int kWidths[3] = {32, 64, 128};
constexpr int kHeadPad = pad16(kMaxHead);

int padded(int n) {
  for (int w : kWidths) {
    if (n <= w)
      return w;
  }
  return 0;
}

constexpr int kThreads = 512;         // a block's threads: a warp for each unit of a layer
constexpr int kMaxRows = 128;         // the most samples a chunk takes
constexpr int kEnvironmentRows = 64;  // the most environments' rows a pass takes
constexpr int kMaxStateRuns = 3;      // the runs of states a load takes

// Where the parts of a block's shared memory lie (bytes from its start) for R rows, and the
// strides of their rows (values). The online network's first layer's inputs act[0] hold R rows
// of s', R of s and the environments' rows, and so do its further layers' act[l] where both
// weight sets are held; where one is, the online network's hidden outputs on s' pass through the
// scratch parts as the target's do (the target's pass has ended), and act[l] (l > 0) skips the
// s' rows. The target's hidden outputs alternate between the two scratch parts, which the
// backward pass then takes for the output gradients. The head's outputs are rows of ldq values.
struct Smem {
  int in_pad[kMaxHidden + 1], out_pad[kMaxHidden + 1];
  int ldw[kMaxHidden + 1];  // layer l's weight rows: out_pad[l] + kPad
  int lda[kMaxHidden + 1];  // layer l's input rows (act[l]): in_pad[l] + kPad
  int ldd;                  // scratch rows: the widest layer's + kPad
  int ldq;                  // a row of the head's outputs: 4 or 8 values
  int rows;                 // R: the s' rows and the s rows
  int environment_rows;     // the environments' rows of a pass
  int sets;                 // weight sets held: 2, the online's then the target's; or 1
  int skip;                 // act[0]'s first rows that act[l] (l > 0) does not hold: 0 or R
  std::size_t w[2][kMaxHidden + 1], b[2][kMaxHidden + 1], act[kMaxHidden + 1], scratch[2];
  std::size_t q_online, q_target;
  std::size_t bytes;
};

// The compiled widths of shape's networks: {state, hidden}.
struct Geometry {
  int in = 0, width = 0;
};

Geometry geometry(const Shape& s) {
  Geometry g;
  g.in = padded(s.inputs[0]);
  for (int l = 0; l < s.hidden; ++l)
    g.width = std::max(g.width, padded(s.outputs[l]));
  return g;
}

Smem smem_layout(const Shape& s, int rows, int environment_rows, int sets) {
  const Geometry g = geometry(s);
  Smem m{};
  m.rows = rows;
  m.environment_rows = environment_rows;
  m.sets = sets;
  std::size_t at = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t here = at;
    at += (bytes + 127) / 128 * 128;
    return here;
  };
  m.skip = sets == 1 ? rows : 0;
  const std::size_t online_rows = 2 * static_cast<std::size_t>(rows) + environment_rows;
  int widest = 0;
  for (int l = 0; l <= s.hidden; ++l) {
    m.in_pad[l] = l == 0 ? g.in : g.width;
    m.out_pad[l] = l == s.hidden ? kHeadPad : g.width;
    m.ldw[l] = m.out_pad[l] + kPad;
    m.lda[l] = m.in_pad[l] + kPad;
    widest = std::max(widest, m.out_pad[l]);
  }
  for (int set = 0; set < 2; ++set) {
    for (int l = 0; l <= s.hidden; ++l) {
      if (set < sets) {
        m.w[set][l] = take(static_cast<std::size_t>(m.in_pad[l]) * m.ldw[l] * sizeof(bf));
        // A hidden layer's bias in bf16, the head's in float (load_head_biases).
        m.b[set][l] = take(static_cast<std::size_t>(m.out_pad[l]) *
                           (l == s.hidden ? sizeof(float) : sizeof(bf)));
      } else {
        m.w[set][l] = m.w[0][l];
        m.b[set][l] = m.b[0][l];
      }
    }
  }
  for (int l = 0; l <= s.hidden; ++l)
    m.act[l] = take((online_rows - (l == 0 ? 0 : m.skip)) * m.lda[l] * sizeof(bf));
  m.ldd = widest + kPad;
  for (std::size_t& d : m.scratch)
    d = take(static_cast<std::size_t>(rows) * m.ldd * sizeof(bf));
  m.ldq = s.outputs[s.hidden] <= 4 ? 4 : kMaxHead;
  m.q_online = take(online_rows * m.ldq * sizeof(float));
  m.q_target = take(static_cast<std::size_t>(rows) * m.ldq * sizeof(float));
  m.bytes = at;
  return m;
}

// A weight set's layer weights or hidden bias as a load takes it (load_inputs): rows x cols bf16
// values `from` values after the set's first (row-major) into shared memory `to` bytes from its
// start (rows ld_to values apart), zeros up to rows_pad rows of 8 << shift values; runs: every
// row is whole aligned 16-byte chunks. Described once on the host.
struct WeightPiece {
  std::size_t from;
  unsigned to;
  int rows, cols, rows_pad, shift, ld_to, runs;
};

// A set's pieces: its layers' weights, then its hidden layers' biases.
__host__ __device__ constexpr int pieces_per_set(int hidden) {
  return 2 * hidden + 1;
}
constexpr int kMaxPieces = pieces_per_set(kMaxHidden);

struct Params {
  Shape shape;
  Smem smem;
  WeightPiece pieces[2][kMaxPieces];  // [slot][piece]
  int members, batch, environments, chunks, environment_share;
  Inputs in;
  float* q;
  std::size_t q_member, q_row;
  float* partials;
  std::size_t part_stride;  // a chunk's parts: the parameters, rounded up to 16 bytes
  double* partial_sums;
};
static_assert(sizeof(Params) <= 4096, "the first kernel's parameters fit a launch's 4 KB");

// x summed over the warp in a fixed order (by halves), at lane 0.
__device__ __forceinline__ double warp_sum(double x) {
  for (int offset = 16; offset > 0; offset /= 2)
    x += __shfl_down_sync(0xffffffffu, x, offset);
  return x;
}

__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// Four 8 x 8 matrices of 16-bit values, lane i giving the address of row i % 8 of matrix i / 8;
// transposed with Trans.
template <bool Trans>
__device__ __forceinline__ void load_matrices(unsigned (&r)[4], const bf* p) {
  if (Trans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(p)));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(p)));
  }
}

// c += a b for a 16 x 16 bf16 tile a and a 16 x 8 tile b, in float.
__device__ __forceinline__ void mma(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                    unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// A 16-byte copy from global to shared memory that does not wait (copies_done() does).
__device__ __forceinline__ void copy16(bf* to, const bf* from) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared_address(to)), "l"(from));
}

// Waits for this thread's copy16s; the block's are complete after a __syncthreads().
__device__ __forceinline__ void copies_done() {
  asm volatile("cp.async.commit_group;\n" ::);
  asm volatile("cp.async.wait_group 0;\n" ::);
}

// A warp's Tiles (2 or 4) tiles of 16 x 8 at rows m0 and columns n0 + 8 t of A B over k in
// [0, K) (K = 0: over [0, k)): A(m, k) at a[m * Lda + k], or a[k * Lda + m] with AT (stored
// transposed); B(k, n) at b[k * Ldb + n], or b[n * Ldb + k] with BN. acc[t][h * 2 + e] is row
// m0 + lane / 4 + 8 h, column n0 + 8 t + 2 (lane % 4) + e.
template <bool AT, bool BN, int Tiles, int K, int Lda, int Ldb>
__device__ __forceinline__ void warp_product(float (&acc)[4][4], const bf* a, const bf* b, int m0,
                                             int n0, int k, int lane) {
  const int j = lane >> 3, r = lane & 7;
  const int end = K > 0 ? K : k;
#pragma unroll 2
  for (int k0 = 0; k0 < end; k0 += 16) {
    unsigned fa[4];
    if (AT)
      load_matrices<true>(fa, a + (k0 + (j >> 1) * 8 + r) * Lda + m0 + (j & 1) * 8);
    else
      load_matrices<false>(fa, a + (m0 + (j & 1) * 8 + r) * Lda + k0 + (j >> 1) * 8);
#pragma unroll
    for (int p = 0; p < Tiles / 2; ++p) {
      const int n = n0 + 16 * p;
      unsigned fb[4];
      if (BN)
        load_matrices<false>(fb, b + (n + (j >> 1) * 8 + r) * Ldb + k0 + (j & 1) * 8);
      else
        load_matrices<true>(fb, b + (k0 + (j & 1) * 8 + r) * Ldb + n + (j >> 1) * 8);
      mma(acc[2 * p], fa, fb[0], fb[1]);
      mma(acc[2 * p + 1], fa, fb[2], fb[3]);
    }
  }
}

// A unit's 16 x (8 Tiles) outputs of a warp's product to out(row, column, v0, v1), a pair of
// adjacent values at a time.
template <int Tiles, class Out>
__device__ __forceinline__ void unit_out(const float (&acc)[4][4], int m0, int n0, int lane,
                                         const Out& out) {
#pragma unroll
  for (int t = 0; t < Tiles; ++t) {
#pragma unroll
    for (int h = 0; h < 2; ++h)
      out(m0 + (lane >> 2) + 8 * h, n0 + 8 * t + 2 * (lane & 3), acc[t][2 * h], acc[t][2 * h + 1]);
  }
}

// The tiles of a unit of N columns: blocks of 32 columns, 16 for the head's 16.
template <int N>
constexpr int kTiles = N >= 32 ? 4 : 2;

// The block's product of M x N (M a multiple of 16, N of 8 kTiles<N>) over k (K, or k where
// K = 0): warp first_warp takes the first of the 16-row strips times blocks of columns, the
// next warps the next units in turn, and each hands its unit's accumulators to out(acc, m0, n0)
// (unit_out's layout).
template <bool AT, bool BN, int N, int K, int Lda, int Ldb, class Out>
__device__ __forceinline__ void block_product(int m, int k, const bf* a, const bf* b,
                                              int first_warp, const Out& out) {
  constexpr int tiles = kTiles<N>, blocks = N / (8 * tiles);
  constexpr int warps = kThreads / 32;
  const int lane = threadIdx.x & 31;
  const int warp = ((threadIdx.x >> 5) - first_warp % warps + warps) % warps;
  const int strips = m / 16;
  for (int u = warp; u < strips * blocks; u += warps) {
    const int m0 = (u / blocks) * 16, n0 = (u % blocks) * 8 * tiles;
    float acc[4][4] = {};
    warp_product<AT, BN, tiles, K, Lda, Ldb>(acc, a, b, m0, n0, k, lane);
    out(acc, m0, n0);
  }
}

// A unit of a weight gradient (rows i, columns o; unit_out's layout) into dw's in x out values,
// each lane's adjacent pair of columns as one 8-byte store where it is aligned (a quad's four
// pairs fill a 32-byte sector of a row).
template <int Tiles>
__device__ __forceinline__ void store_weight_unit(const float (&acc)[4][4], int m0, int n0,
                                                  float* dw, int in, int out) {
  unit_out<Tiles>(acc, m0, n0, threadIdx.x & 31, [&](int i, int o, float v0, float v1) {
    if (i >= in)
      return;
    float* const at = dw + static_cast<std::size_t>(i) * out + o;
    if (o + 1 < out && reinterpret_cast<std::uintptr_t>(at) % 8 == 0) {
      *reinterpret_cast<float2*>(at) = make_float2(v0, v1);
    } else {
      if (o < out)
        at[0] = v0;
      if (o + 1 < out)
        at[1] = v1;
    }
  });
}

template <class T>
__device__ __forceinline__ T* part(char* smem, std::size_t offset) {
  return reinterpret_cast<T*>(smem + offset);
}

// A member's rows of states: n from row `first` into act[0]'s rows from `at`, padded with
// zeros to rows_pad rows.
struct StateRows {
  int first, n, at, rows_pad;
};

// A rows x cols matrix of bf16 values in global memory (rows ld_from values apart) into shared
// memory (rows ld_to values apart), zeros up to rows_pad rows of 8 << shift values, by 16-byte
// chunks of a row: thread t takes the chunks from (t - turn) mod kThreads on, a whole chunk by
// cp.async where every row is whole aligned chunks (runs), one beyond the matrix as zeros, any
// other value by value (read-only loads). Returns the turn of the next matrix: the chunks are
// dealt to the threads in turn across a load's matrices, so that the few value-by-value ones
// (a head's rows, unaligned states) fall on different threads.
__device__ __forceinline__ int load_matrix(bf* to, const bf* from, int rows, int cols,
                                           std::size_t ld_from, int rows_pad, int shift, int ld_to,
                                           bool runs, int turn) {
  const int chunks = rows_pad << shift, mask = (1 << shift) - 1;
#pragma unroll 1
  for (int i = (static_cast<int>(threadIdx.x) - turn) & (kThreads - 1); i < chunks; i += kThreads) {
    const int r = i >> shift, col = 8 * (i & mask);
    bf* const at = to + r * ld_to + col;
    const bf* const src = from + static_cast<std::size_t>(r) * ld_from + col;
    if (runs && r < rows && col + 8 <= cols) {
      copy16(at, src);
    } else {
      unsigned bits[4] = {};
      if (r < rows) {
        const unsigned short* const values = reinterpret_cast<const unsigned short*>(src);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          if (col + e < cols)
            bits[e / 2] |= static_cast<unsigned>(__ldg(values + e)) << (16 * (e % 2));
        }
      }
      *reinterpret_cast<uint4*>(at) = make_uint4(bits[0], bits[1], bits[2], bits[3]);
    }
  }
  return (turn + chunks) & (kThreads - 1);
}

// The heads' biases of weight sets sets[0] and sets[1] (as load_inputs) from the float master
// copy, zeros after them, on the last threads.
__device__ __forceinline__ void load_head_biases(const Params& p, char* smem,
                                                 const long long (&sets)[2]) {
  const Shape& s = p.shape;
  const int t = static_cast<int>(threadIdx.x) - (kThreads - 2 * kHeadPad);
  const int slot = t / kHeadPad, i = t % kHeadPad;
  const long long set = slot == 0 ? sets[0] : sets[1];
  if (t >= 0 && set >= 0) {
    const int head = s.hidden;
    float value = 0.0f;
    if (i < s.outputs[head])
      value = __ldg(p.in.master + set * p.in.stride + s.bias[head] + i);
    part<float>(smem, p.smem.b[slot][head])[i] = value;
  }
}

// Weight set sets[0] (member m's online network is set m, its target M + m) into slot 0 and
// sets[1] (-1: none) into slot 1, as p.pieces describes them, with their heads' biases; then
// `count` runs of member m's states (In values a row) into act[0]. The caller waits:
// copies_done(), then __syncthreads().
template <int In>
__device__ void load_inputs(const Params& p, char* smem, int m, const long long (&sets)[2],
                            const StateRows (&runs)[kMaxStateRuns], int count) {
  int turn = 0;
#pragma unroll 1
  for (int slot = 0; slot < 2; ++slot) {
    const long long set = slot == 0 ? sets[0] : sets[1];
    if (set < 0)
      break;
    const bf* const first = reinterpret_cast<const bf*>(p.in.working) + set * p.in.stride;
#pragma unroll 1
    for (int k = 0; k < pieces_per_set(p.shape.hidden); ++k) {
      const WeightPiece& w = p.pieces[slot][k];
      turn = load_matrix(part<bf>(smem, w.to), first + w.from, w.rows, w.cols, w.cols, w.rows_pad,
                         w.shift, w.ld_to, w.runs != 0, turn);
    }
  }
  load_head_biases(p, smem, sets);
  const std::size_t ld = p.in.state_row;
  const bf* const states =
      reinterpret_cast<const bf*>(p.in.states) + static_cast<std::size_t>(m) * p.in.state_member;
  const int cols = p.shape.inputs[0];
  const bool aligned =
      cols % 8 == 0 && ld % 8 == 0 && reinterpret_cast<std::uintptr_t>(states) % 16 == 0;
  constexpr int shift = chunk_shift(In);
#pragma unroll 1
  for (int j = 0; j < count; ++j) {
    StateRows r = runs[0];
#pragma unroll
    for (int k = 1; k < kMaxStateRuns; ++k)
      r = j == k ? runs[k] : r;
    turn = load_matrix(part<bf>(smem, p.smem.act[0]) + static_cast<std::size_t>(r.at) * (In + kPad),
                       states + static_cast<std::size_t>(r.first) * ld, r.n, cols, ld, r.rows_pad,
                       shift, In + kPad, aligned, turn);
  }
}

// A pass down the layers: `direct` strips of 16 rows of the online network from act[0]'s row
// `first` (act[l]'s row first - skip for l > 0; their hidden outputs into act[l + 1], their
// head's into q_online's rows from first), beside `through` strips of the first rows (s')
// through the scratch parts by weight slot `slot` (their head's outputs into q_online's first
// rows where `online`, else into q_target's).
struct Pass {
  int first, direct, through, slot;
  bool online;
};

// Layer l of a pass, one phase (K inputs, N outputs, W the hidden width); the head's outputs
// before a dueling combination.
template <int K, int N, int W, bool Head>
__device__ __forceinline__ void forward_layer(const Params& p, char* smem, int l,
                                              const Pass& pass) {
  const Smem& sm = p.smem;
  constexpr int tiles = kTiles<N>, blocks = N / (8 * tiles);
  constexpr int lda = K + kPad, ldw = N + kPad, ldh = W + kPad;
  constexpr int warps = kThreads / 32;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int strips = pass.direct + pass.through;
  for (int u = warp; u < strips * blocks; u += warps) {
    const int strip = u / blocks, n0 = (u % blocks) * 8 * tiles;
    const bool through = strip >= pass.direct;
    const int slot = through ? pass.slot : 0;
    const int m0 = 16 * (through ? strip - pass.direct : strip);
    // Through the scratch parts, whose rows are the hidden layers' (lda), after act[0]'s first.
    const bf* const a =
        through ? (l > 0 ? part<bf>(smem, sm.scratch[(l - 1) & 1]) : part<bf>(smem, sm.act[0]))
                : part<bf>(smem, sm.act[l]) + (l == 0 ? pass.first : pass.first - sm.skip) * lda;
    float acc[4][4] = {};
    warp_product<false, false, tiles, K, lda, ldw>(acc, a, part<bf>(smem, sm.w[slot][l]), m0, n0, 0,
                                                   lane);
    if (Head) {
      const float* const bias = part<float>(smem, sm.b[slot][l]);
      const int ldq = sm.ldq;
      float* const q = through ? part<float>(smem, pass.online ? sm.q_online : sm.q_target)
                               : part<float>(smem, sm.q_online) + pass.first * ldq;
      unit_out<tiles>(acc, m0, n0, lane, [&](int r, int c, float v0, float v1) {
        if (c < ldq) {
          q[r * ldq + c] = v0 + bias[c];
          q[r * ldq + c + 1] = v1 + bias[c + 1];
        }
      });
    } else {
      bf* const h = through ? part<bf>(smem, sm.scratch[l & 1])
                            : part<bf>(smem, sm.act[l + 1]) + (pass.first - sm.skip) * ldh;
      const bf* const bias = part<bf>(smem, sm.b[slot][l]);
      unit_out<tiles>(acc, m0, n0, lane, [&](int r, int c, float v0, float v1) {
        const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(bias + c));
        *reinterpret_cast<__nv_bfloat162*>(h + r * ldh + c) =
            __floats2bfloat162_rn(fmaxf(v0 + b.x, 0.0f), fmaxf(v1 + b.y, 0.0f));
      });
    }
  }
  __syncthreads();
}

// A pass down the layers (state In values wide, hidden layers W), one phase a layer.
template <int In, int W>
__device__ void forward(const Params& p, char* smem, const Pass& pass) {
  const int head = p.shape.hidden;
  forward_layer<In, W, W, false>(p, smem, 0, pass);
  for (int l = 1; l < head; ++l)
    forward_layer<W, W, W, false>(p, smem, l, pass);
  forward_layer<W, kHeadPad, W, true>(p, smem, head, pass);
}

// Q from a row's head outputs o (train's head_q): o itself, or with a dueling head
// Q_a = o_0 + o_{a+1} - mean_b o_{b+1}.
__device__ __forceinline__ void head_q(const float* o, int width, bool dueling,
                                       float (&q)[kMaxHead]) {
  if (!dueling) {
#pragma unroll
    for (int a = 0; a < kMaxHead; ++a)
      q[a] = a < width ? o[a] : 0.0f;
    return;
  }
  float mean = 0.0f;
#pragma unroll
  for (int a = 1; a < kMaxHead; ++a) {
    if (a < width)
      mean += o[a];
  }
  mean /= static_cast<float>(width - 1);
#pragma unroll
  for (int a = 0; a + 1 < kMaxHead; ++a)
    q[a] = a + 1 < width ? o[0] + o[a + 1] - mean : 0.0f;
  q[kMaxHead - 1] = 0.0f;
}

// q[i] for a run-time i < kMaxHead, from registers.
__device__ __forceinline__ float pick(const float (&q)[kMaxHead], int i) {
  float v = q[0];
#pragma unroll
  for (int a = 1; a < kMaxHead; ++a)
    v = a == i ? q[a] : v;
  return v;
}

// Q of member m's rows (runs[j].n from row runs[j].first) into q, from q_online's rows from
// runs[j].at: a thread a row.
template <int Runs>
__device__ void write_q(const Params& p, char* smem, int m, const StateRows (&runs)[Runs]) {
  const int width = p.shape.outputs[p.shape.hidden];
  const int actions = p.shape.dueling ? width - 1 : width;
  const float* outputs = part<float>(smem, p.smem.q_online);
  int rows = 0;
#pragma unroll
  for (int j = 0; j < Runs; ++j)
    rows += runs[j].n;
  for (int i = threadIdx.x; i < rows; i += kThreads) {
    int r = i, first = runs[0].first, at = runs[0].at;
    bool found = r < runs[0].n;
#pragma unroll
    for (int j = 1; j < Runs; ++j) {
      if (!found) {
        r -= runs[j - 1].n;
        first = runs[j].first;
        at = runs[j].at;
        found = r < runs[j].n;
      }
    }
    float q[kMaxHead];
    head_q(outputs + (at + r) * p.smem.ldq, width, p.shape.dueling, q);
    float* to = p.q + static_cast<std::size_t>(m) * p.q_member +
                static_cast<std::size_t>(first + r) * p.q_row;
#pragma unroll
    for (int a = 0; a < kMaxHead; ++a) {
      if (a < actions)
        to[a] = q[a];
    }
  }
}

__device__ __forceinline__ double huber(double d, double delta) {
  const double a = fabs(d);
  return a <= delta ? 0.5 * d * d : delta * (a - 0.5 * delta);
}

// Layer l's backward phase over the chunk's `rows` s rows (K inputs, N outputs, W the hidden
// width): its weight gradient act[l]^T dOut into parts, where dOut is scratch[now]; a hidden
// layer's bias gradient (dOut's column sums; the head's come from the loss's sums); and but for
// the first layer, the next dOut = (dOut W^T) where act[l] > 0 into the other scratch part.
template <int K, int N, int W, bool Head, bool First>
__device__ __forceinline__ void backward_layer(const Params& p, char* smem, int l, int rows,
                                               int now, float* parts) {
  const Shape& s = p.shape;
  const Smem& sm = p.smem;
  constexpr int lda = K + kPad, ldd = W + kPad, ldw = N + kPad;
  const bf* const d = part<bf>(smem, sm.scratch[now]);
  // The s rows: act[0]'s from R, act[l]'s (l > 0) from R - skip.
  const bf* const act = part<bf>(smem, sm.act[l]) + (l == 0 ? sm.rows : sm.rows - sm.skip) * lda;
  const int in = s.inputs[l], out = s.outputs[l];
  float* const dw = parts + s.weight[l];
  constexpr int weight_units = (K / 16) * (N / (8 * kTiles<N>));
  block_product<true, false, N, 0, lda, ldd>(
      K, rows, act, d, 0, [&](const float(&acc)[4][4], int m0, int n0) {
        store_weight_unit<kTiles<N>>(acc, m0, n0, dw, in, out);
      });
  if (!Head) {
    // Four running sums a column (rows is a multiple of 16), added in a fixed order, on the
    // last warps (the input gradient's product below starts on the first ones).
    static_assert(W <= kThreads, "a thread a column");
    if (const int o = static_cast<int>(threadIdx.x) - (kThreads - W); o >= 0 && o < out) {
      float sum[4] = {};
      for (int r = 0; r < rows; r += 4) {
#pragma unroll
        for (int u = 0; u < 4; ++u)
          sum[u] += __bfloat162float(d[(r + u) * ldd + o]);
      }
      parts[s.bias[l] + o] = (sum[0] + sum[1]) + (sum[2] + sum[3]);
    }
  }
  if (!First) {
    bf* const next = part<bf>(smem, sm.scratch[1 - now]);
    block_product<false, true, K, N, ldd, ldw>(
        rows, 0, d, part<bf>(smem, sm.w[0][l]), weight_units,
        [&](const float(&acc)[4][4], int m0, int n0) {
          unit_out<kTiles<K>>(acc, m0, n0, threadIdx.x & 31, [&](int r, int i, float v0, float v1) {
            const float2 h =
                __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(act + r * lda + i));
            *reinterpret_cast<__nv_bfloat162*>(next + r * ldd + i) =
                __floats2bfloat162_rn(h.x > 0.0f ? v0 : 0.0f, h.y > 0.0f ? v1 : 0.0f);
          });
        });
  }
  __syncthreads();
}

// The gradient at the head's bias o from the sums dq of d loss / d Q over a chunk's samples (one
// an action), through a dueling head's combination (width outputs: the value, then the
// actions' advantages).
__device__ __forceinline__ float head_bias_gradient(const double* dq, int o, int width,
                                                    bool dueling) {
  if (!dueling)
    return static_cast<float>(dq[o]);
  const int actions = width - 1;
  double all = 0.0;
  for (int a = 0; a < actions; ++a)
    all += dq[a];
  return static_cast<float>(o == 0 ? all : dq[o - 1] - all / static_cast<double>(actions));
}

template <int In, int W>
__global__ void __launch_bounds__(kThreads, 1) loss_kernel(const __grid_constant__ Params p) {
  extern __shared__ __align__(128) char smem[];
  const Shape& s = p.shape;
  const Smem& sm = p.smem;
  const int m = blockIdx.x / p.chunks, c = blockIdx.x % p.chunks;
  const int b = p.batch, R = sm.rows, first = c * R, n = min(R, b - first);
  const int head = s.hidden, width = s.outputs[head];
  const int actions = s.dueling ? width - 1 : width;
  const std::size_t online = m, target = static_cast<std::size_t>(p.members) + m;
  const int env_first = min(p.environments, c * p.environment_share);
  const int env_end = min(p.environments, env_first + p.environment_share);
  const int env = min(sm.environment_rows, env_end - env_first);

  // The loss's inputs of this thread's sample (a thread a sample: R <= kThreads), read now so
  // that their round trip overlaps the loads and the forward pass.
  static_assert(kThreads >= 128, "a chunk's samples take a thread each");
  int taken = -1;
  float return_n = 0.0f, discount = 0.0f;
  if (static_cast<int>(threadIdx.x) < n) {
    const std::size_t entry = static_cast<std::size_t>(m) * b + first + threadIdx.x;
    taken = p.in.action[entry];
    return_n = p.in.return_n[entry];
    discount = p.in.discount[entry];
  }
  const double delta = p.in.settings[m].huber_delta;

  // 1-2. The weights and states; both networks down their layers (the target's pass first and
  // alone where one weight set is all that fits); then the further environments' rows.
  const long long both[2] = {static_cast<long long>(sm.sets == 2 ? online : target),
                             sm.sets == 2 ? static_cast<long long>(target) : -1};
  const StateRows rows_in[3] = {StateRows{b + first, n, 0, R}, StateRows{first, n, R, R},
                                StateRows{2 * b + env_first, env, 2 * R, pad16(env)}};
  load_inputs<In>(p, smem, m, both, rows_in, 3);
  copies_done();
  __syncthreads();
  if (sm.sets == 1) {
    forward<In, W>(p, smem, Pass{0, 0, R / 16, 0, false});
    const long long online_only[2] = {static_cast<long long>(online), -1};
    const StateRows no_rows[kMaxStateRuns] = {};
    load_inputs<In>(p, smem, m, online_only, no_rows, 0);
    copies_done();
    __syncthreads();
  }
  // Both sets: the online network on every row beside the target on s'. One set: the online
  // network on s and the environments' rows beside it on s' through the scratch parts.
  forward<In, W>(p, smem,
                 sm.sets == 2 ? Pass{0, (2 * R + pad16(env)) / 16, R / 16, 1, false}
                              : Pass{R, (R + pad16(env)) / 16, R / 16, 0, true});
  write_q(p, smem, m, rows_in);
  for (int e = env_first + env; e < env_end; e += sm.environment_rows) {
    const int k = min(sm.environment_rows, env_end - e);
    const long long none[2] = {-1, -1};
    const StateRows more[kMaxStateRuns] = {StateRows{2 * b + e, k, 2 * R, pad16(k)}};
    load_inputs<In>(p, smem, m, none, more, 1);
    copies_done();
    __syncthreads();
    forward<In, W>(p, smem, Pass{2 * R, pad16(k) / 16, 0, 0, false});
    write_q(p, smem, m, more);
  }

  // 3. The loss, a thread a sample; the head's output gradient in scratch[0], zero on padded
  // rows.
  const int ldq = sm.ldq;
  const float* const q_next = part<float>(smem, sm.q_online);
  const float* const q_now = q_next + R * ldq;
  const float* const q_target = part<float>(smem, sm.q_target);
  const int rows = pad16(n);
  bf* const d_head = part<bf>(smem, sm.scratch[0]);
  // Each warp's sums of its samples' values (by halves), then the warps' in order.
  __shared__ double warp_sums[kMaxRows / 32][kSums];
  if (const int r = threadIdx.x; r < (rows + 31) / 32 * 32) {
    double v[kSums] = {};
    float dq = 0.0f;
    if (r < n) {
      float next[kMaxHead], target_q[kMaxHead], now[kMaxHead];
      head_q(q_next + r * ldq, width, s.dueling, next);
      head_q(q_target + r * ldq, width, s.dueling, target_q);
      head_q(q_now + r * ldq, width, s.dueling, now);
      int best = 0;
      float best_q = next[0];
#pragma unroll
      for (int a = 1; a < kMaxHead; ++a) {
        if (a < actions && next[a] > best_q) {
          best = a;
          best_q = next[a];
        }
      }
      const double y = static_cast<double>(return_n) +
                       static_cast<double>(discount) * static_cast<double>(pick(target_q, best));
      const double q_taken = taken >= 0 && taken < actions ? pick(now, taken) : 0.0f;
      const double d = q_taken - y;
      const double clipped = d > delta ? delta : (d < -delta ? -delta : d);
      dq = static_cast<float>(clipped / static_cast<double>(b));
      v[0] = huber(d, delta);
      v[1] = q_taken;
      v[2] = fabs(d) <= 1.7976931348623157e308 ? 0.0 : 1.0;
#pragma unroll
      for (int a = 0; a < kMaxHead; ++a) {
        if (a == taken)
          v[3 + a] = static_cast<double>(dq);
      }
    }
    // d loss / d head outputs: the one-hot dq, through a dueling head's combination.
    if (r < rows) {
      bf* const row = d_head + r * sm.ldd;
      const double share = static_cast<double>(dq) / static_cast<double>(actions);
#pragma unroll
      for (int o = 0; o < kHeadPad; ++o) {
        float value = 0.0f;
        if (!s.dueling) {
          value = o == taken ? dq : 0.0f;
        } else if (o == 0) {
          value = dq;
        } else if (o < width) {
          value = static_cast<float>(static_cast<double>(o - 1 == taken ? dq : 0.0f) - share);
        }
        row[o] = __float2bfloat16(value);
      }
    }
#pragma unroll
    for (int k = 0; k < kSums; ++k) {
      const double x = warp_sum(v[k]);
      if ((r & 31) == 0)
        warp_sums[r / 32][k] = x;
    }
  }
  __syncthreads();
  __shared__ double chunk_sums[kSums];
  if (threadIdx.x < kSums) {
    double total = 0.0;
    for (int w = 0; w < (rows + 31) / 32; ++w)
      total += warp_sums[w][threadIdx.x];
    chunk_sums[threadIdx.x] = total;
    p.partial_sums[(static_cast<std::size_t>(m) * p.chunks + c) * kSums + threadIdx.x] =
        chunk_sums[threadIdx.x];
  }

  // 4. Down the layers: dW_l = act[l]^T dOut_l, db_l = dOut_l's column sums (the head's from
  // the chunk's sums of d loss / d Q, once the head's phase has passed its barrier),
  // dOut_{l-1} = (dOut_l W_l^T) where act[l] > 0; over the s rows.
  float* const parts = p.partials + (static_cast<std::size_t>(m) * p.chunks + c) * p.part_stride;
  backward_layer<W, kHeadPad, W, true, false>(p, smem, head, rows, 0, parts);
  if (const int o = threadIdx.x; o < width)
    parts[s.bias[head] + o] = head_bias_gradient(chunk_sums + 3, o, width, s.dueling);
  int now = 1;
  for (int l = head - 1; l >= 1; --l, now = 1 - now)
    backward_layer<W, W, W, false, false>(p, smem, l, rows, now, parts);
  backward_layer<In, W, W, false, true>(p, smem, 0, rows, now, parts);
}

// The second kernel's: kLearnThreads threads a block, each taking kLearnValues of a member's
// parameters at once: block j of a member's `blocks` takes its parameters j kLearnThreads + t
// + v blocks kLearnThreads (v < kLearnValues). Its grid is at most kLearnBlocks blocks a
// multiprocessor, and its registers are those of twice as many, so that the kernels on the side
// stream find room beside it.
constexpr int kLearnThreads = 256;
constexpr int kLearnValues = 4;
constexpr int kLearnBlocks = 2;
constexpr int kLearnGroup = kLearnThreads / 32;  // units a block sums and steps between barriers

struct LearnParams {
  Shape shape;
  int members, chunks, blocks;
  const float* partials;
  std::size_t part_stride;
  const double* partial_sums;
  float* grads;
  std::size_t grad_stride;
  double *sums, *totals;
  double* norms;             // [member][block]: the squares of the block's values
  nn::AdamCounters* before;  // [member]: the counters before the step
  Update update;
};

// A 128-byte line into L2 (a hint: nothing waits for it).
__device__ __forceinline__ void prefetch_line(const void* p) {
  asm volatile("prefetch.global.L2 [%0];\n" ::"l"(p));
}

// A unit's values: thread t's v-th is parameter first + v step of its member (first = j
// kLearnThreads + t for the unit's block j, step = blocks kLearnThreads).
struct UnitValues {
  float g[kLearnValues], m[kLearnValues], v[kLearnValues], w[kLearnValues];
};

// Member m's Adam state at this thread's values from first (not beyond n), into x (not g).
__device__ __forceinline__ void load_state(const Update& u, int m, int first, int step, int n,
                                           UnitValues& x) {
  const std::size_t at0 = static_cast<std::size_t>(m) * u.stride;
#pragma unroll
  for (int v = 0; v < kLearnValues; ++v) {
    const int at = first + v * step;
    if (at < n) {
      x.m[v] = u.m[at0 + at];
      x.v[v] = u.v[at0 + at];
      x.w[v] = u.parameters[at0 + at];
    }
  }
}

// Units (member, block) gridDim.x apart, a block's taken kLearnGroup at a time. First every
// unit's gradient values (the chunks' parts added in order), each warp's sum of their squares
// in a fixed order and, once the group's units are done, each unit's sum of its warps' in
// order; a member's first unit also adds its loss sums and keeps its counters before the step.
// The block's first unit keeps its gradient and loads its Adam state before the grid-wide
// barrier; the others' state is asked into L2. After the barrier, a warp for each unit of a
// group works out its member's factors from the member's blocks' sums (each lane's in order,
// then the lanes' by halves: every unit of a member adds the same sums alike, and its first
// writes the counters); then each unit's Adam step of its values.
__global__ void __launch_bounds__(kLearnThreads, 2 * kLearnBlocks)
    learn_kernel(const LearnParams p) {
  constexpr int warps = kLearnThreads / 32;
  __shared__ double squares[kLearnGroup][warps];
  __shared__ nn::AdamStepFactors factors[kLearnGroup];
  const Update& u = p.update;
  const int n = static_cast<int>(p.shape.size), t = static_cast<int>(threadIdx.x);
  const int lane = t & 31, warp = t >> 5;
  const int units = p.members * p.blocks, grid = static_cast<int>(gridDim.x);
  const int step = p.blocks * kLearnThreads;
  UnitValues kept;  // the block's first unit's
  for (int group = blockIdx.x; group < units; group += kLearnGroup * grid) {
#pragma unroll 1
    for (int i = 0; i < kLearnGroup; ++i) {
      const int unit = group + i * grid;
      if (unit >= units)
        break;
      const int m = unit / p.blocks, j = unit % p.blocks, first = j * kLearnThreads + t;
      const float* const parts =
          p.partials + static_cast<std::size_t>(m) * p.chunks * p.part_stride;
      float g[kLearnValues] = {};
#pragma unroll 4
      for (int c = 0; c < p.chunks; ++c) {
        const float* const part = parts + static_cast<std::size_t>(c) * p.part_stride;
#pragma unroll
        for (int v = 0; v < kLearnValues; ++v) {
          const int at = first + v * step;
          if (at < n)
            g[v] += part[at];
        }
      }
      float* const grads = p.grads + static_cast<std::size_t>(m) * p.grad_stride;
      double x = 0.0;
#pragma unroll
      for (int v = 0; v < kLearnValues; ++v) {
        const int at = first + v * step;
        if (at < n) {
          grads[at] = g[v];
          x += static_cast<double>(g[v]) * g[v];
        }
      }
      x = warp_sum(x);
      if (lane == 0)
        squares[i][warp] = x;
      if (unit == static_cast<int>(blockIdx.x)) {
#pragma unroll
        for (int v = 0; v < kLearnValues; ++v)
          kept.g[v] = g[v];
        load_state(u, m, first, step, n, kept);
      } else if (lane < 3 * kLearnValues) {
        // Lane 4 a + v asks for line v of array a (the warp's 32 values of each are a line).
        const int v = lane % kLearnValues, at = first - lane + v * step;
        const float* const array = lane < kLearnValues       ? u.m
                                   : lane < 2 * kLearnValues ? u.v
                                                             : u.parameters;
        if (at < n)
          prefetch_line(array + static_cast<std::size_t>(m) * u.stride + at);
      }
      if (j == 0 && warp == warps - 1 && lane <= 3) {
        if (lane == 3) {
          p.before[m] = u.counters[m];
        } else {
          // The member's loss, Q and non-finite count, its chunks' in order.
          const double* const sums =
              p.partial_sums + static_cast<std::size_t>(m) * p.chunks * kSums + lane;
          double total = 0.0;
#pragma unroll 8
          for (int c = 0; c < p.chunks; ++c)
            total += sums[c * kSums];
          p.sums[3 * m + lane] = lane == 2 ? (total == 0.0 ? 1.0 : 0.0) : total;
          p.totals[3 * m + lane] += lane == 2 ? 1.0 : total;
        }
      }
    }
    __syncthreads();
    if (t < kLearnGroup && group + t * grid < units) {
      double sum = 0.0;
      for (int w = 0; w < warps; ++w)
        sum += squares[t][w];
      p.norms[group + t * grid] = sum;
    }
    __syncthreads();
  }
  cooperative_groups::this_grid().sync();
  for (int group = blockIdx.x; group < units; group += kLearnGroup * grid) {
    if (const int unit = group + warp * grid; warp < kLearnGroup && unit < units) {
      const int m = unit / p.blocks;
      double x = 0.0;
      for (int b = lane; b < p.blocks; b += 32)
        x += p.norms[static_cast<std::size_t>(m) * p.blocks + b];
      x = warp_sum(x);
      if (lane == 0) {
        nn::AdamStepFactors f{};  // apply 0: a stopped member stays as it is
        if (u.active == nullptr || u.active[m] != 0) {
          nn::AdamCounters counters = p.before[m];
          f = nn::step_factors(u.settings[m], counters, x);
          if (unit % p.blocks == 0)
            u.counters[m] = counters;
        }
        factors[warp] = f;
      }
    }
    __syncthreads();
#pragma unroll 1
    for (int i = 0; i < kLearnGroup; ++i) {
      const int unit = group + i * grid;
      if (unit >= units)
        break;
      const nn::AdamStepFactors f = factors[i];
      if (f.apply == 0)
        continue;  // a stopped member, or a gradient not finite: the step is skipped
      const int m = unit / p.blocks, first = (unit % p.blocks) * kLearnThreads + t;
      const nn::AdamSettings settings = u.settings[m];
      UnitValues x;
      if (unit == static_cast<int>(blockIdx.x)) {
        x = kept;
      } else {
        const float* const grads = p.grads + static_cast<std::size_t>(m) * p.grad_stride;
#pragma unroll
        for (int v = 0; v < kLearnValues; ++v) {
          const int at = first + v * step;
          if (at < n)
            x.g[v] = grads[at];
        }
        load_state(u, m, first, step, n, x);
      }
      const std::size_t at0 = static_cast<std::size_t>(m) * u.stride;
#pragma unroll
      for (int v = 0; v < kLearnValues; ++v) {
        const int at = first + v * step;
        if (at < n) {
          const float value = nn::updated(settings, f, x.g[v], x.m[v], x.v[v], x.w[v]);
          u.m[at0 + at] = x.m[v];
          u.v[at0 + at] = x.v[v];
          u.parameters[at0 + at] = value;
          store(u.working[at0 + at], value);
        }
      }
    }
    __syncthreads();  // the group's factors are read before the next group's
  }
}

// p.pieces for p.shape and p.smem: each slot's layers' weights, then its hidden layers' biases.
void describe_pieces(Params& p, const Inputs& in) {
  const Shape& s = p.shape;
  const Smem& sm = p.smem;
  const int head = s.hidden;
  // Whole aligned 16-byte runs in every set: the sets' firsts and the rows 16-byte aligned.
  const bool aligned = in.stride % 8 == 0 && reinterpret_cast<std::uintptr_t>(in.working) % 16 == 0;
  for (int slot = 0; slot < 2; ++slot) {
    for (int k = 0; k < pieces_per_set(head); ++k) {
      const bool bias = k > head;
      const int l = bias ? k - head - 1 : k;
      WeightPiece& w = p.pieces[slot][k];
      w.from = bias ? s.bias[l] : s.weight[l];
      w.to = static_cast<unsigned>(bias ? sm.b[slot][l] : sm.w[slot][l]);
      w.rows = bias ? 1 : s.inputs[l];
      w.cols = s.outputs[l];
      w.rows_pad = bias ? 1 : sm.in_pad[l];
      w.shift = chunk_shift(sm.out_pad[l]);
      w.ld_to = bias ? 0 : sm.ldw[l];
      w.runs = aligned && w.cols % 8 == 0 && w.from % 8 == 0 ? 1 : 0;
    }
  }
}

std::size_t part_stride(const Shape& s) {
  return (s.size + 3) / 4 * 4;
}

}  // namespace

std::size_t member_bytes(const Shape& shape, std::size_t batch) {
  constexpr std::size_t kFewestRows = 16;  // the smallest chunk the constructor chooses
  const std::size_t chunks = (batch + kFewestRows - 1) / kFewestRows;
  return chunks * (part_stride(shape) * sizeof(float) + kSums * sizeof(double));
}

namespace {

int shared_limit() {
  int device = 0, bytes = 0;
  DQNTRADER_CUDA(cudaGetDevice(&device));
  DQNTRADER_CUDA(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return bytes;
}

int multiprocessors() {
  int device = 0, count = 0;
  DQNTRADER_CUDA(cudaGetDevice(&device));
  DQNTRADER_CUDA(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  return count;
}

using Kernel = void (*)(Params);

// The first kernel as compiled for shape's widths.
Kernel loss_kernel_for(const Shape& shape) {
  static constexpr Kernel kernels[3][3] = {
      {loss_kernel<32, 32>, loss_kernel<32, 64>, loss_kernel<32, 128>},
      {loss_kernel<64, 32>, loss_kernel<64, 64>, loss_kernel<64, 128>},
      {loss_kernel<128, 32>, loss_kernel<128, 64>, loss_kernel<128, 128>}};
  auto index = [](int width) { return width == 32 ? 0 : width == 64 ? 1 : 2; };
  const Geometry g = geometry(shape);
  return kernels[index(g.in)][index(g.width)];
}

// The dynamic shared memory a block of the first kernel for shape's widths may take: the device's
// most for a block less the kernel's static shared memory.
std::size_t dynamic_shared_limit(const Shape& shape) {
  cudaFuncAttributes attributes{};
  DQNTRADER_CUDA(cudaFuncGetAttributes(&attributes, loss_kernel_for(shape)));
  return static_cast<std::size_t>(shared_limit()) - attributes.sharedSizeBytes;
}

// The first kernel as compiled for shape's widths, allowed the most dynamic shared memory the
// device gives a block (not a Step's own need: a smaller bound would refuse the larger chunks of
// another Step of the same widths).
Kernel first_kernel(const Shape& shape) {
  const Kernel kernel = loss_kernel_for(shape);
  DQNTRADER_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(dynamic_shared_limit(shape))));
  return kernel;
}

// How the first kernel splits members' batches: R samples a chunk (a block), the weight sets a
// block holds at once and the environments' rows of a pass.
struct Chunking {
  int rows = 0, sets = 0, environment_rows = 0, chunks = 0;
};

// The blocks of the first kernel for shape's widths with `shared` bytes of dynamic shared memory
// that the device runs at once.
std::size_t resident_blocks(const Shape& shape, std::size_t shared) {
  int resident = 0;
  DQNTRADER_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, first_kernel(shape),
                                                               kThreads, shared));
  return static_cast<std::size_t>(std::max(resident, 1)) *
         static_cast<std::size_t>(multiprocessors());
}

// The chunk sizes whose blocks fit (both weight sets where they fit beside the chunk, a pass's
// environments' rows as many as fit, up to the chunk's share), largest first; of them the
// largest (fewer chunks: fewer parts to add) whose blocks fill three quarters of the
// multiprocessors in one wave; else the smallest whose blocks run in one wave; else the
// largest (the fewest waves).
Chunking chunking(const Shape& shape, std::size_t members, std::size_t batch,
                  std::size_t environments) {
  const std::size_t fill = static_cast<std::size_t>(multiprocessors()) * 3 / 4;
  const std::size_t limit = dynamic_shared_limit(shape);
  auto environment_rows = [&](int rows, int sets) {
    const std::size_t chunks = (batch + rows - 1) / rows;
    const int share = static_cast<int>((environments + chunks - 1) / chunks);
    for (int e = std::min(kEnvironmentRows, pad16(share)); e >= 16; e -= 16) {
      if (smem_layout(shape, rows, e, sets).bytes <= limit)
        return e;
    }
    return smem_layout(shape, rows, 16, sets).bytes <= limit ? 16 : 0;
  };
  Chunking fits[4];
  int count = 0;
  for (int rows : {kMaxRows, 64, 32, 16}) {
    for (int sets : {2, 1}) {
      if (const int e = environment_rows(rows, sets); e > 0) {
        fits[count++] = Chunking{rows, sets, e, static_cast<int>((batch + rows - 1) / rows)};
        break;
      }
    }
  }
  auto blocks = [&](const Chunking& c) { return members * static_cast<std::size_t>(c.chunks); };
  auto one_wave = [&](const Chunking& c) {
    return blocks(c) <=
           resident_blocks(shape, smem_layout(shape, c.rows, c.environment_rows, c.sets).bytes);
  };
  for (int i = 0; i < count; ++i) {
    if (blocks(fits[i]) >= fill && one_wave(fits[i]))
      return fits[i];
  }
  for (int i = count - 1; i >= 0; --i) {
    if (one_wave(fits[i]))
      return fits[i];
  }
  return fits[0];
}

}  // namespace

bool takes(const Shape& shape) {
  if (shape.hidden < 1 || shape.hidden > kMaxHidden || shape.inputs[0] > kMaxWidth)
    return false;
  for (int l = 0; l < shape.hidden; ++l) {
    if (shape.outputs[l] > kMaxWidth)
      return false;
  }
  return shape.outputs[shape.hidden] <= kMaxHead &&
         smem_layout(shape, 16, 16, 1).bytes <= dynamic_shared_limit(shape);
}

std::size_t waves(const Shape& shape, std::size_t members, std::size_t batch,
                  std::size_t environments) {
  if (!takes(shape))
    throw InputError("fused step: a network of this shape is not one it takes");
  const Chunking c = chunking(shape, members, batch, environments);
  const std::size_t at_once =
      resident_blocks(shape, smem_layout(shape, c.rows, c.environment_rows, c.sets).bytes);
  return (members * static_cast<std::size_t>(c.chunks) + at_once - 1) / at_once;
}

Step::Step(const ExecSpace& space, const Shape& shape, std::size_t members, std::size_t batch,
           std::size_t environments)
    : m_shape(shape), m_members(members), m_batch(batch), m_environments(environments) {
  if (!takes(shape))
    throw InputError("fused step: a network of this shape is not one it takes");
  const Chunking chunks = chunking(shape, members, batch, environments);
  m_rows = chunks.rows;
  m_sets = chunks.sets;
  m_environment_rows = chunks.environment_rows;
  m_chunks = chunks.chunks;
  m_shared = smem_layout(shape, m_rows, m_environment_rows, m_sets).bytes;
  first_kernel(shape);
  const std::size_t parts = members * static_cast<std::size_t>(m_chunks);
  m_partials = Kokkos::View<float*, DeviceMemory>(
      Kokkos::view_alloc(space, std::string("dqntrader::fused::partials")),
      parts * part_stride(shape));
  m_partial_sums = Kokkos::View<double*, DeviceMemory>(
      Kokkos::view_alloc(space, std::string("dqntrader::fused::partial_sums")), parts * kSums);
  // learn(): a member's blocks follow from its size alone; the grid is as many of the units
  // (member, block) as the device holds at once beside other work, for the grid-wide barrier.
  const std::size_t per_block = std::size_t{kLearnThreads} * kLearnValues;
  m_norm_blocks = static_cast<int>((shape.size + per_block - 1) / per_block);
  int resident = 0;
  DQNTRADER_CUDA(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, learn_kernel, kLearnThreads, 0));
  const std::size_t units = members * static_cast<std::size_t>(m_norm_blocks);
  m_grid =
      static_cast<int>(std::min(units, static_cast<std::size_t>(std::min(resident, kLearnBlocks)) *
                                           static_cast<std::size_t>(multiprocessors())));
  m_norms = Kokkos::View<double*, DeviceMemory>(
      Kokkos::view_alloc(space, std::string("dqntrader::fused::norms")), units);
  m_counters = Kokkos::View<nn::AdamCounters*, DeviceMemory>(
      Kokkos::view_alloc(space, std::string("dqntrader::fused::counters_before")), members);
}

void Step::loss(const ExecSpace& space, const Inputs& in, float* q, std::size_t q_member,
                std::size_t q_row) const {
  Params p{};
  p.shape = m_shape;
  p.smem = smem_layout(m_shape, m_rows, m_environment_rows, m_sets);
  describe_pieces(p, in);
  p.members = static_cast<int>(m_members);
  p.batch = static_cast<int>(m_batch);
  p.environments = static_cast<int>(m_environments);
  p.chunks = m_chunks;
  p.environment_share = static_cast<int>((m_environments + m_chunks - 1) / m_chunks);
  p.in = in;
  p.q = q;
  p.q_member = q_member;
  p.q_row = q_row;
  p.partials = m_partials.data();
  p.part_stride = part_stride(m_shape);
  p.partial_sums = m_partial_sums.data();
  loss_kernel_for(m_shape)<<<static_cast<unsigned>(m_members * m_chunks), kThreads, m_shared,
                             space.cuda_stream()>>>(p);
  DQNTRADER_CUDA(cudaGetLastError());
}

std::size_t Step::part_member() const {
  return static_cast<std::size_t>(m_chunks) * part_stride(m_shape);
}

void Step::learn(const ExecSpace& space, float* grads, std::size_t grad_stride, double* sums,
                 double* totals, const Update& update) const {
  LearnParams p{};
  p.shape = m_shape;
  p.members = static_cast<int>(m_members);
  p.chunks = m_chunks;
  p.blocks = m_norm_blocks;
  p.partials = m_partials.data();
  p.part_stride = part_stride(m_shape);
  p.partial_sums = m_partial_sums.data();
  p.grads = grads;
  p.grad_stride = grad_stride;
  p.sums = sums;
  p.totals = totals;
  p.norms = m_norms.data();
  p.before = m_counters.data();
  p.update = update;
  void* args[] = {&p};
  DQNTRADER_CUDA(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(&learn_kernel),
                                             static_cast<unsigned>(m_grid), kLearnThreads, args, 0,
                                             space.cuda_stream()));
}

}  // namespace dqntrader::fused

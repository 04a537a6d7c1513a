// The fused learning step (fused_step.hpp). A chunk of R samples of one member is one block:
//   1. both networks' weights into shared memory (where one set is all that fits: the target's
//      first, the online's in its place after step 2's target pass), and the chunk's states:
//      its s' rows, its s rows and its share of the environments' states
//   2. down the layers, the target network on s' beside the online network on every row, so
//      that a layer of both is one phase; the online activations of s stay for step 4
//   3. per sample (a thread each), the double-DQN target, the Huber loss and d loss / d Q, the
//      head's output gradient in bf16 (as the products path stores it), and the chunk's sums
//   4. down the layers: the weight gradient act^T dOut of the chunk's rows into its parts, the
//      bias gradient (dOut's column sums), and the next dOut = (dOut W^T) masked by the ReLU
// Every product is a warp's 16-row strip of the output times a block of 16 or 32 columns, in
// m16n8k16 tensor-core products whose operands ldmatrix loads from shared memory (transposed
// where the operand is stored the other way); shared rows are padded by 8 values so that the
// eight rows of an 8 x 8 load fall in different banks. Rows and widths are padded to multiples
// of 16 with zeros (zero weights and biases keep the padded activations at zero).
#include "fused_step.hpp"

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

constexpr int kThreads = 512;         // a block's threads: a warp for each unit of a layer
constexpr int kEnvironmentRows = 64;  // the most environments' rows a pass takes

// Where the parts of a block's shared memory lie (bytes from its start) for R rows, and the
// strides of their rows (values). The online network's layer inputs act[l] hold R rows of s',
// R of s and the environments' rows; the target's hidden outputs alternate between the two
// scratch parts, which the backward pass then takes for the output gradients.
struct Smem {
  int in_pad[kMaxHidden + 1], out_pad[kMaxHidden + 1];
  int ldw[kMaxHidden + 1];  // layer l's weight rows: out_pad[l] + kPad
  int lda[kMaxHidden + 1];  // layer l's input rows (act[l]): in_pad[l] + kPad
  int ldd;                  // scratch rows: the widest layer's + kPad
  int rows;                 // R: the s' rows and the s rows
  int environment_rows;     // the environments' rows of a pass
  int sets;                 // weight sets held: 2, the online's then the target's; or 1
  std::size_t w[2][kMaxHidden + 1], b[2][kMaxHidden + 1], act[kMaxHidden + 1], scratch[2];
  std::size_t q_online, q_target, sums;
  std::size_t bytes;
};

Smem smem_layout(const Shape& s, int rows, int environment_rows, int sets) {
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
  const std::size_t online_rows = 2 * static_cast<std::size_t>(rows) + environment_rows;
  int widest = 0;
  for (int l = 0; l <= s.hidden; ++l) {
    m.in_pad[l] = pad16(s.inputs[l]);
    m.out_pad[l] = pad16(s.outputs[l]);
    m.ldw[l] = m.out_pad[l] + kPad;
    m.lda[l] = m.in_pad[l] + kPad;
    widest = std::max(widest, m.out_pad[l]);
  }
  for (int set = 0; set < 2; ++set) {
    for (int l = 0; l <= s.hidden; ++l) {
      if (set < sets) {
        m.w[set][l] = take(static_cast<std::size_t>(m.in_pad[l]) * m.ldw[l] * sizeof(bf));
        m.b[set][l] = take(static_cast<std::size_t>(m.out_pad[l]) * sizeof(float));
      } else {
        m.w[set][l] = m.w[0][l];
        m.b[set][l] = m.b[0][l];
      }
    }
  }
  for (int l = 0; l <= s.hidden; ++l)
    m.act[l] = take(online_rows * m.lda[l] * sizeof(bf));
  m.ldd = widest + kPad;
  for (std::size_t& d : m.scratch)
    d = take(static_cast<std::size_t>(rows) * m.ldd * sizeof(bf));
  m.q_online = take(online_rows * kMaxHead * sizeof(float));
  m.q_target = take(static_cast<std::size_t>(rows) * kMaxHead * sizeof(float));
  m.sums = take(static_cast<std::size_t>(rows) * kSums * sizeof(double));
  m.bytes = at;
  return m;
}

struct Params {
  Shape shape;
  Smem smem;
  int members, batch, environments, chunks, environment_share;
  Inputs in;
  float* q;
  std::size_t q_member, q_row;
  float* partials;
  std::size_t part_stride;  // a chunk's parts: the parameters, rounded up to 16 bytes
  double* partial_sums;
  float* grads;
  std::size_t grad_stride;
  double *sums, *totals;
};

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

// A rows x cols matrix (row stride ld_from) into shared memory (row stride ld_to), padded with
// zeros to rows_pad x cols_pad.
struct Copy {
  bf* to;
  int ld_to;
  const bf* from;
  std::size_t ld_from;
  int rows, cols, rows_pad, cols_pad;

  // Whether its rows are whole 16-byte runs that cp.async copies.
  __device__ bool runs() const {
    return cols % 8 == 0 && ld_from % 8 == 0 && reinterpret_cast<std::uintptr_t>(from) % 16 == 0;
  }
};

// The values of an unaligned copy a thread takes at once (a round).
constexpr int kGather = 4;

// Starts a copy: its zero padding, and its 16-byte copies that do not wait where its rows are
// whole runs (the caller waits: copies_done(), then __syncthreads()); an unaligned copy's values
// are gather()ed and scatter()ed in rounds.
__device__ void start_copy(const Copy& c) {
  const bf zero = __float2bfloat16(0.0f);
  const int threads = blockDim.x;
  if (c.runs()) {
    const int per_row = c.cols / 8;
    for (int i = threadIdx.x; i < c.rows * per_row; i += threads) {
      const int r = i / per_row, v = i % per_row;
      copy16(c.to + r * c.ld_to + 8 * v, c.from + r * c.ld_from + 8 * v);
    }
  }
  const int right = c.cols_pad - c.cols;
  for (int i = threadIdx.x; i < c.rows * right; i += threads)
    c.to[(i / right) * c.ld_to + c.cols + i % right] = zero;
  for (int i = threadIdx.x; i < (c.rows_pad - c.rows) * c.cols_pad; i += threads)
    c.to[(c.rows + i / c.cols_pad) * c.ld_to + i % c.cols_pad] = zero;
}

// Whether an unaligned copy has values left for the round from `base`.
__device__ __forceinline__ bool gathers(const Copy& c, int base) {
  return !c.runs() && base < c.rows * c.cols;
}

// An unaligned copy's values of the round from `base` into a thread's registers.
__device__ __forceinline__ void gather(const Copy& c, int base, bf (&v)[kGather]) {
  if (!gathers(c, base))
    return;
#pragma unroll
  for (int u = 0; u < kGather; ++u) {
    const int i = base + threadIdx.x + u * static_cast<int>(blockDim.x);
    if (i < c.rows * c.cols)
      v[u] = c.from[(i / c.cols) * c.ld_from + i % c.cols];
  }
}

// ... and from them into shared memory.
__device__ __forceinline__ void scatter(const Copy& c, int base, const bf (&v)[kGather]) {
  if (!gathers(c, base))
    return;
#pragma unroll
  for (int u = 0; u < kGather; ++u) {
    const int i = base + threadIdx.x + u * static_cast<int>(blockDim.x);
    if (i < c.rows * c.cols)
      c.to[(i / c.cols) * c.ld_to + i % c.cols] = v[u];
  }
}

// An unaligned copy's values from `base` on, round by round.
__device__ void copy_rounds(const Copy& c, int base) {
  for (; gathers(c, base); base += kGather * static_cast<int>(blockDim.x)) {
    bf v[kGather];
    gather(c, base, v);
    scatter(c, base, v);
  }
}

// A whole copy: started, then its unaligned values round by round.
__device__ void copy_matrix(const Copy& c) {
  start_copy(c);
  copy_rounds(c, 0);
}

// A warp's tiles t < tiles (even, at most 4) of 16 x 8 at rows m0 and columns n0 + 8 t of
// A B over k in [0, K): A(m, k) at a[m * lda + k], or a[k * lda + m] with AT (stored
// transposed); B(k, n) at b[k * ldb + n], or b[n * ldb + k] with BN. acc[t][h * 2 + e] is
// row m0 + lane / 4 + 8 h, column n0 + 8 t + 2 (lane % 4) + e.
template <bool AT, bool BN>
__device__ __forceinline__ void warp_product(float (&acc)[4][4], int tiles, const bf* a, int lda,
                                             const bf* b, int ldb, int m0, int n0, int k,
                                             int lane) {
  const int j = lane >> 3, r = lane & 7;
#pragma unroll 4
  for (int k0 = 0; k0 < k; k0 += 16) {
    unsigned fa[4];
    if (AT)
      load_matrices<true>(fa, a + (k0 + (j >> 1) * 8 + r) * lda + m0 + (j & 1) * 8);
    else
      load_matrices<false>(fa, a + (m0 + (j & 1) * 8 + r) * lda + k0 + (j >> 1) * 8);
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      if (2 * p < tiles) {
        const int n = n0 + 16 * p;
        unsigned fb[4];
        if (BN)
          load_matrices<false>(fb, b + (n + (j >> 1) * 8 + r) * ldb + k0 + (j & 1) * 8);
        else
          load_matrices<true>(fb, b + (k0 + (j & 1) * 8 + r) * ldb + n + (j >> 1) * 8);
        mma(acc[2 * p], fa, fb[0], fb[1]);
        mma(acc[2 * p + 1], fa, fb[2], fb[3]);
      }
    }
  }
}

// A unit's 16 x (8 tiles) outputs of a warp's product to out(row, column, v0, v1), a pair of
// adjacent values at a time.
template <class Out>
__device__ __forceinline__ void unit_out(const float (&acc)[4][4], int tiles, int m0, int n0,
                                         int lane, const Out& out) {
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    if (t < tiles) {
#pragma unroll
      for (int h = 0; h < 2; ++h)
        out(m0 + (lane >> 2) + 8 * h, n0 + 8 * t + 2 * (lane & 3), acc[t][2 * h],
            acc[t][2 * h + 1]);
    }
  }
}

// Tiles a unit takes (blocks of 32 columns, 16 where that leaves warps idle) for `strips`
// strips of n columns.
__device__ __forceinline__ int unit_tiles(int strips, int n) {
  return strips * ((n + 31) / 32) >= static_cast<int>(blockDim.x >> 5) ? 4 : 2;
}

// The block's product of M x N (both multiples of 16) over k: warp first_warp takes the first
// of the 16-row strips times blocks of columns, the next warps the next units in turn, and each
// hands its unit's accumulators to out(acc, tiles, m0, n0) (unit_out's layout).
template <bool AT, bool BN, class Out>
__device__ __forceinline__ void block_product(int m, int n, int k, const bf* a, int lda,
                                              const bf* b, int ldb, int first_warp,
                                              const Out& out) {
  const int warps = blockDim.x >> 5, lane = threadIdx.x & 31;
  const int warp = ((threadIdx.x >> 5) - first_warp % warps + warps) % warps;
  const int strips = m / 16, per = unit_tiles(strips, n);
  const int blocks = (n + 8 * per - 1) / (8 * per);
  for (int u = warp; u < strips * blocks; u += warps) {
    const int m0 = (u / blocks) * 16, n0 = (u % blocks) * 8 * per;
    const int tiles = min(per, (n - n0) / 8);
    float acc[4][4] = {};
    warp_product<AT, BN>(acc, tiles, a, lda, b, ldb, m0, n0, k, lane);
    out(acc, tiles, m0, n0);
  }
}

// A unit of a weight gradient (rows i, columns o; unit_out's layout) into dw's in x out values:
// where the unit's 32 columns lie whole in 16-byte-aligned rows, the four lanes of a quad trade
// values so that each holds 8 adjacent columns of its row and stores them as two float4s (a
// quad then writes 128 bytes of a row at once, not 4-byte values 8 bytes apart).
__device__ __forceinline__ void store_weight_unit(const float (&acc)[4][4], int tiles, int m0,
                                                  int n0, float* dw, int in, int out) {
  const int lane = threadIdx.x & 31, q = lane & 3;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = m0 + (lane >> 2) + 8 * h;
    // Round k: send pair (q + k) % 4 to lane (q + k) % 4, receive pair q of lane (q - k) % 4.
    float2 got[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int send = (q + k) & 3, from = (q - k) & 3;
      float2 v = make_float2(acc[0][2 * h], acc[0][2 * h + 1]);
#pragma unroll
      for (int t = 1; t < 4; ++t) {
        if (send == t)
          v = make_float2(acc[t][2 * h], acc[t][2 * h + 1]);
      }
      const int source = (lane & ~3) | from;
      const float2 r =
          make_float2(__shfl_sync(0xffffffffu, v.x, source), __shfl_sync(0xffffffffu, v.y, source));
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        if (from == t)
          got[t] = r;
      }
    }
    float* const row = dw + static_cast<std::size_t>(i) * out;
    if (tiles == 4 && i < in && n0 + 32 <= out &&
        reinterpret_cast<std::uintptr_t>(row + n0) % 16 == 0) {
      // got[t] holds columns n0 + 8 q + 2 t and the next.
      float4* const to = reinterpret_cast<float4*>(row + n0 + 8 * q);
      to[0] = make_float4(got[0].x, got[0].y, got[1].x, got[1].y);
      to[1] = make_float4(got[2].x, got[2].y, got[3].x, got[3].y);
    } else if (i < in) {
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        const int o = n0 + 8 * t + 2 * q;
        if (t < tiles && o < out)
          row[o] = acc[t][2 * h];
        if (t < tiles && o + 1 < out)
          row[o + 1] = acc[t][2 * h + 1];
      }
    }
  }
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

// Weight sets into the weight slots (sets[slot]: member m's online network is set m, its target
// M + m; -1 none) and runs of member m's states into act[0], in one memory round trip where the
// shapes allow it: the matrices whose rows are whole 16-byte runs by copies that do not wait, and
// every thread's other values (biases, the heads, unaligned states) loaded into registers before
// any is stored. Hidden biases come from the working copy, the head's from the master. The
// caller waits: copies_done(), then __syncthreads().
template <int Runs>
__device__ void load_inputs(const Params& p, char* smem, int m, const long long (&sets)[2],
                            const StateRows (&runs)[Runs]) {
  const Shape& s = p.shape;
  const Smem& sm = p.smem;
  const int head = s.hidden;
  auto weights = [&](int slot, int l) {
    const bf* w = reinterpret_cast<const bf*>(p.in.working) + sets[slot] * p.in.stride;
    return Copy{part<bf>(smem, sm.w[slot][l]),
                sm.ldw[l],
                w + s.weight[l],
                static_cast<std::size_t>(s.outputs[l]),
                s.inputs[l],
                s.outputs[l],
                sm.in_pad[l],
                sm.out_pad[l]};
  };
  auto states = [&](const StateRows& r) {
    return Copy{part<bf>(smem, sm.act[0]) + r.at * sm.lda[0],
                sm.lda[0],
                reinterpret_cast<const bf*>(p.in.states) +
                    static_cast<std::size_t>(m) * p.in.state_member +
                    static_cast<std::size_t>(r.first) * p.in.state_row,
                p.in.state_row,
                r.n,
                s.inputs[0],
                r.rows_pad,
                sm.in_pad[0]};
  };
  // The hidden layers' weights (an unaligned one, in a shape a sweep may ask for, whole here).
  for (int slot = 0; slot < 2; ++slot) {
    if (sets[slot] >= 0) {
      for (int l = 0; l < head; ++l)
        copy_matrix(weights(slot, l));
    }
  }
  // One round: every thread loads its biases (a layer's are at most blockDim.x), its first
  // round of the heads and of unaligned states, then stores; then any further rounds.
  const int c = threadIdx.x;
  float bias[2][kMaxHidden + 1] = {};
  bf head_values[2][kGather], state_values[Runs > 0 ? Runs : 1][kGather];
#pragma unroll
  for (int slot = 0; slot < 2; ++slot) {
    if (sets[slot] >= 0) {
      const bf* w = reinterpret_cast<const bf*>(p.in.working) + sets[slot] * p.in.stride;
      const float* master = p.in.master + sets[slot] * p.in.stride;
#pragma unroll
      for (int l = 0; l <= kMaxHidden; ++l) {
        if (l <= head && c < s.outputs[l])
          bias[slot][l] = l < head ? __bfloat162float(w[s.bias[l] + c]) : master[s.bias[l] + c];
      }
      start_copy(weights(slot, head));
      gather(weights(slot, head), 0, head_values[slot]);
    }
  }
#pragma unroll
  for (int j = 0; j < Runs; ++j) {
    start_copy(states(runs[j]));
    gather(states(runs[j]), 0, state_values[j]);
  }
#pragma unroll
  for (int slot = 0; slot < 2; ++slot) {
    if (sets[slot] >= 0) {
#pragma unroll
      for (int l = 0; l <= kMaxHidden; ++l) {
        if (l <= head && c < sm.out_pad[l])
          part<float>(smem, sm.b[slot][l])[c] = bias[slot][l];
      }
      scatter(weights(slot, head), 0, head_values[slot]);
    }
  }
#pragma unroll
  for (int j = 0; j < Runs; ++j)
    scatter(states(runs[j]), 0, state_values[j]);
  const int round = kGather * static_cast<int>(blockDim.x);
  for (int slot = 0; slot < 2; ++slot) {
    if (sets[slot] >= 0)
      copy_rounds(weights(slot, head), round);
  }
  for (int j = 0; j < Runs; ++j)
    copy_rounds(states(runs[j]), round);
}

// Down the layers, one phase a layer: the online network (weight slot 0) on act's `rows` rows
// from `first`, beside the target network (the last slot) on the first `target_rows` rows
// (s'). The online hidden layers go to act[l + 1], the target's to the scratch parts in turn;
// the heads' outputs (before a dueling combination) to q_online's and q_target's rows.
__device__ void forward(const Params& p, char* smem, int first, int rows, int target_rows) {
  const Shape& s = p.shape;
  const Smem& sm = p.smem;
  const int warps = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int online_strips = rows / 16, strips = online_strips + target_rows / 16;
  const int target_slot = sm.sets - 1;
  float* const q_online = part<float>(smem, sm.q_online);
  float* const q_target = part<float>(smem, sm.q_target);
  for (int l = 0; l <= s.hidden; ++l) {
    const bool head = l == s.hidden;
    const int n = sm.out_pad[l], k = sm.in_pad[l];
    const int per = unit_tiles(strips, n), blocks = (n + 8 * per - 1) / (8 * per);
    for (int u = warp; u < strips * blocks; u += warps) {
      const int strip = u / blocks, n0 = (u % blocks) * 8 * per;
      const int tiles = min(per, (n - n0) / 8);
      const bool target = strip >= online_strips;
      const int slot = target ? target_slot : 0;
      const int m0 = 16 * (target ? strip - online_strips : strip);
      const bf* a = part<bf>(smem, sm.act[l]) + (target ? 0 : first) * sm.lda[l];
      int lda = sm.lda[l];
      if (target && l > 0) {
        a = part<bf>(smem, sm.scratch[(l - 1) & 1]);
        lda = sm.ldd;
      }
      float acc[4][4] = {};
      warp_product<false, false>(acc, tiles, a, lda, part<bf>(smem, sm.w[slot][l]), sm.ldw[l], m0,
                                 n0, k, lane);
      const float* bias = part<float>(smem, sm.b[slot][l]);
      if (head) {
        float* const q = target ? q_target : q_online + first * kMaxHead;
        unit_out(acc, tiles, m0, n0, lane, [&](int r, int c, float v0, float v1) {
          if (c < kMaxHead) {
            q[r * kMaxHead + c] = v0 + bias[c];
            q[r * kMaxHead + c + 1] = v1 + bias[c + 1];
          }
        });
      } else {
        bf* h = target ? part<bf>(smem, sm.scratch[l & 1])
                       : part<bf>(smem, sm.act[l + 1]) + first * sm.lda[l + 1];
        const int ld = target ? sm.ldd : sm.lda[l + 1];
        unit_out(acc, tiles, m0, n0, lane, [&](int r, int c, float v0, float v1) {
          *reinterpret_cast<__nv_bfloat162*>(h + r * ld + c) =
              __floats2bfloat162_rn(fmaxf(v0 + bias[c], 0.0f), fmaxf(v1 + bias[c + 1], 0.0f));
        });
      }
    }
    __syncthreads();
  }
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
  for (int i = threadIdx.x; i < rows; i += blockDim.x) {
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
    head_q(outputs + (at + r) * kMaxHead, width, p.shape.dueling, q);
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

__global__ void __launch_bounds__(kThreads) loss_kernel(const Params p) {
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

  // 1-2. The weights and states; both networks down their layers (the target's pass first and
  // alone where one weight set is all that fits); then the further environments' rows.
  const long long both[2] = {static_cast<long long>(sm.sets == 2 ? online : target),
                             sm.sets == 2 ? static_cast<long long>(target) : -1};
  const StateRows rows_in[3] = {StateRows{b + first, n, 0, R}, StateRows{first, n, R, R},
                                StateRows{2 * b + env_first, env, 2 * R, pad16(env)}};
  load_inputs(p, smem, m, both, rows_in);
  copies_done();
  __syncthreads();
  if (sm.sets == 1) {
    forward(p, smem, 0, 0, R);
    const long long online_only[2] = {static_cast<long long>(online), -1};
    const StateRows no_rows[1] = {StateRows{0, 0, 0, 0}};
    load_inputs(p, smem, m, online_only, no_rows);
    copies_done();
    __syncthreads();
  }
  forward(p, smem, 0, 2 * R + pad16(env), sm.sets == 2 ? R : 0);
  write_q(p, smem, m, rows_in);
  for (int e = env_first + env; e < env_end; e += sm.environment_rows) {
    const int k = min(sm.environment_rows, env_end - e);
    const long long none[2] = {-1, -1};
    const StateRows more[1] = {StateRows{2 * b + e, k, 2 * R, pad16(k)}};
    load_inputs(p, smem, m, none, more);
    copies_done();
    __syncthreads();
    forward(p, smem, 2 * R, pad16(k), 0);
    write_q(p, smem, m, more);
  }

  // 3. The loss, a thread a sample; the head's output gradient in scratch[0], zero on padded
  // rows.
  const float* const q_next = part<float>(smem, sm.q_online);
  const float* const q_now = q_next + R * kMaxHead;
  const float* const q_target = part<float>(smem, sm.q_target);
  const int rows = pad16(n);
  bf* const d_head = part<bf>(smem, sm.scratch[0]);
  double* const sums = part<double>(smem, sm.sums);
  const double delta = p.in.settings[m].huber_delta;
  for (int r = threadIdx.x; r < rows; r += blockDim.x) {
    double v[kSums] = {};
    float dq = 0.0f;
    int taken = -1;
    if (r < n) {
      const std::size_t entry = static_cast<std::size_t>(m) * b + first + r;
      float next[kMaxHead], target_q[kMaxHead], now[kMaxHead];
      head_q(q_next + r * kMaxHead, width, s.dueling, next);
      head_q(q_target + r * kMaxHead, width, s.dueling, target_q);
      head_q(q_now + r * kMaxHead, width, s.dueling, now);
      int best = 0;
      float best_q = next[0];
#pragma unroll
      for (int a = 1; a < kMaxHead; ++a) {
        if (a < actions && next[a] > best_q) {
          best = a;
          best_q = next[a];
        }
      }
      taken = p.in.action[entry];
      const double y =
          static_cast<double>(p.in.return_n[entry]) +
          static_cast<double>(p.in.discount[entry]) * static_cast<double>(pick(target_q, best));
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
    bf* const row = d_head + r * sm.ldd;
    const double share = static_cast<double>(dq) / static_cast<double>(actions);
    for (int o = 0; o < sm.out_pad[head]; ++o) {
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
#pragma unroll
    for (int k = 0; k < kSums; ++k)
      sums[r * kSums + k] = v[k];
  }
  __syncthreads();
  if (threadIdx.x < kSums) {
    // Four running sums (padded rows hold zeros), added in a fixed order.
    double total[4] = {};
    for (int r = 0; r < rows; r += 4) {
#pragma unroll
      for (int u = 0; u < 4; ++u)
        total[u] += sums[(r + u) * kSums + threadIdx.x];
    }
    p.partial_sums[(static_cast<std::size_t>(m) * p.chunks + c) * kSums + threadIdx.x] =
        (total[0] + total[1]) + (total[2] + total[3]);
  }

  // 4. Down the layers: dW_l = act[l]^T dOut_l, db_l = dOut_l's column sums (the head's come
  // from the sums above), dOut_{l-1} = (dOut_l W_l^T) where act[l] > 0; over the s rows.
  float* const parts = p.partials + (static_cast<std::size_t>(m) * p.chunks + c) * p.part_stride;
  int now_buffer = 0;
  for (int l = head; l >= 0; --l) {
    const bf* const d = part<bf>(smem, sm.scratch[now_buffer]);
    const bf* const act = part<bf>(smem, sm.act[l]) + R * sm.lda[l];
    const int in = s.inputs[l], out = s.outputs[l];
    float* const dw = parts + s.weight[l];
    const int weight_units = (sm.in_pad[l] / 16) * ((sm.out_pad[l] + 31) / 32);
    block_product<true, false>(sm.in_pad[l], sm.out_pad[l], rows, act, sm.lda[l], d, sm.ldd, 0,
                               [&](const float(&acc)[4][4], int tiles, int m0, int n0) {
                                 store_weight_unit(acc, tiles, m0, n0, dw, in, out);
                               });
    if (l < head) {
      // Four running sums a column (rows is a multiple of 16), added in a fixed order.
      for (int o = threadIdx.x; o < out; o += blockDim.x) {
        float sum[4] = {};
        for (int r = 0; r < rows; r += 4) {
#pragma unroll
          for (int u = 0; u < 4; ++u)
            sum[u] += __bfloat162float(d[(r + u) * sm.ldd + o]);
        }
        parts[s.bias[l] + o] = (sum[0] + sum[1]) + (sum[2] + sum[3]);
      }
    }
    if (l > 0) {
      bf* const next = part<bf>(smem, sm.scratch[1 - now_buffer]);
      const int lda = sm.lda[l], ldd = sm.ldd;
      block_product<false, true>(
          rows, sm.in_pad[l], sm.out_pad[l], d, ldd, part<bf>(smem, sm.w[0][l]), sm.ldw[l],
          weight_units, [&](const float(&acc)[4][4], int tiles, int m0, int n0) {
            unit_out(acc, tiles, m0, n0, threadIdx.x & 31, [&](int r, int i, float v0, float v1) {
              const float2 h =
                  __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(act + r * lda + i));
              *reinterpret_cast<__nv_bfloat162*>(next + r * ldd + i) =
                  __floats2bfloat162_rn(h.x > 0.0f ? v0 : 0.0f, h.y > 0.0f ? v1 : 0.0f);
            });
          });
    }
    __syncthreads();
    now_buffer = 1 - now_buffer;
  }
}

// Member m's parameter p: the chunks' parts added in order; the head's bias from the chunks'
// sums of d loss / d Q, through a dueling head's combination. Parameter 0's thread also adds
// the loss's sums.
__global__ void gradient_kernel(const Params p) {
  const Shape& s = p.shape;
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<std::size_t>(p.members) * s.size)
    return;
  const std::size_t m = i / s.size, at = i % s.size;
  const double* const sums = p.partial_sums + m * p.chunks * kSums;
  const int head = s.hidden, width = s.outputs[head];
  const int actions = s.dueling ? width - 1 : width;
  float g = 0.0f;
  if (at >= s.bias[head] && at < s.bias[head] + static_cast<std::size_t>(width)) {
    const int o = static_cast<int>(at - s.bias[head]);
    double dq[kMaxHead] = {};
    for (int a = 0; a < actions; ++a) {
      for (int c = 0; c < p.chunks; ++c)
        dq[a] += sums[c * kSums + 3 + a];
    }
    if (!s.dueling) {
      g = static_cast<float>(dq[o]);
    } else {
      double all = 0.0;
      for (int a = 0; a < actions; ++a)
        all += dq[a];
      g = static_cast<float>(o == 0 ? all : dq[o - 1] - all / static_cast<double>(actions));
    }
  } else {
    const float* const parts = p.partials + m * p.chunks * p.part_stride + at;
    for (int c = 0; c < p.chunks; ++c)
      g += parts[static_cast<std::size_t>(c) * p.part_stride];
  }
  p.grads[m * p.grad_stride + at] = g;
  if (at == 0) {
    double total[3] = {};
    for (int c = 0; c < p.chunks; ++c) {
      for (int k = 0; k < 3; ++k)
        total[k] += sums[c * kSums + k];
    }
    p.sums[3 * m] = total[0];
    p.sums[3 * m + 1] = total[1];
    p.sums[3 * m + 2] = total[2] == 0.0 ? 1.0 : 0.0;
    p.totals[3 * m] += total[0];
    p.totals[3 * m + 1] += total[1];
    p.totals[3 * m + 2] += 1.0;
  }
}

std::size_t part_stride(const Shape& s) {
  return (s.size + 3) / 4 * 4;
}

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

}  // namespace

bool takes(const Shape& shape) {
  if (shape.hidden < 1 || shape.hidden > kMaxHidden || shape.inputs[0] > kMaxWidth)
    return false;
  for (int l = 0; l < shape.hidden; ++l) {
    if (shape.outputs[l] > kMaxWidth)
      return false;
  }
  return shape.outputs[shape.hidden] <= kMaxHead &&
         smem_layout(shape, 16, 16, 1).bytes <= static_cast<std::size_t>(shared_limit());
}

Step::Step(const ExecSpace& space, const Shape& shape, std::size_t members, std::size_t batch,
           std::size_t environments)
    : m_shape(shape), m_members(members), m_batch(batch), m_environments(environments) {
  if (!takes(shape))
    throw InputError("fused step: a network of this shape is not one it takes");
  // The most samples a chunk takes (fewer chunks: fewer parts to add) while the chunks of
  // every member still fill three quarters of the multiprocessors, both weight sets where
  // they fit beside the chunk, and a pass's environments' rows as many as fit (up to the
  // chunk's share).
  const std::size_t fill = static_cast<std::size_t>(multiprocessors()) * 3 / 4;
  const std::size_t limit = static_cast<std::size_t>(shared_limit());
  auto environment_rows = [&](int rows, int sets) {
    const std::size_t chunks = (batch + rows - 1) / rows;
    const int share = static_cast<int>((environments + chunks - 1) / chunks);
    for (int e = std::min(kEnvironmentRows, pad16(share)); e >= 16; e -= 16) {
      if (smem_layout(shape, rows, e, sets).bytes <= limit)
        return e;
    }
    return smem_layout(shape, rows, 16, sets).bytes <= limit ? 16 : 0;
  };
  m_rows = 0;
  for (int rows : {128, 64, 32, 16}) {
    for (int sets : {2, 1}) {
      const std::size_t chunks = (batch + rows - 1) / rows;
      const int e = environment_rows(rows, sets);
      if (m_rows == 0 && e > 0 && (members * chunks >= fill || rows == 16)) {
        m_rows = rows;
        m_sets = sets;
        m_environment_rows = e;
      }
    }
  }
  m_chunks = static_cast<int>((batch + m_rows - 1) / m_rows);
  m_shared = smem_layout(shape, m_rows, m_environment_rows, m_sets).bytes;
  DQNTRADER_CUDA(cudaFuncSetAttribute(loss_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(m_shared)));
  const std::size_t parts = members * static_cast<std::size_t>(m_chunks);
  m_partials = Kokkos::View<float*, DeviceMemory>(
      Kokkos::view_alloc(space, std::string("dqntrader::fused::partials")),
      parts * part_stride(shape));
  m_partial_sums = Kokkos::View<double*, DeviceMemory>(
      Kokkos::view_alloc(space, std::string("dqntrader::fused::partial_sums")), parts * kSums);
}

void Step::loss(const ExecSpace& space, const Inputs& in, float* q, std::size_t q_member,
                std::size_t q_row) const {
  Params p{};
  p.shape = m_shape;
  p.smem = smem_layout(m_shape, m_rows, m_environment_rows, m_sets);
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
  loss_kernel<<<static_cast<unsigned>(m_members * m_chunks), kThreads, m_shared,
                space.cuda_stream()>>>(p);
  DQNTRADER_CUDA(cudaGetLastError());
}

void Step::gradients(const ExecSpace& space, float* grads, std::size_t grad_stride, double* sums,
                     double* totals) const {
  Params p{};
  p.shape = m_shape;
  p.members = static_cast<int>(m_members);
  p.chunks = m_chunks;
  p.partials = m_partials.data();
  p.part_stride = part_stride(m_shape);
  p.partial_sums = m_partial_sums.data();
  p.grads = grads;
  p.grad_stride = grad_stride;
  p.sums = sums;
  p.totals = totals;
  const std::size_t all = m_members * m_shape.size;
  constexpr unsigned kSumThreads = 256;
  gradient_kernel<<<static_cast<unsigned>((all + kSumThreads - 1) / kSumThreads), kSumThreads, 0,
                    space.cuda_stream()>>>(p);
  DQNTRADER_CUDA(cudaGetLastError());
}

}  // namespace dqntrader::fused

#include "dqntrader/train/fused/loss_kernel.hpp"

#include <cuda_bf16.h>

#include <cstdint>

#include "dqntrader/nn/q_head.hpp"
#include "dqntrader/train/dqn_rule.hpp"
#include "dqntrader/train/fused/tiles.hpp"

namespace dqntrader::train::fused {

namespace {

// A member's rows of states: n from row `first` into act[0]'s rows from `at`, padded with
// zeros to rows_pad rows.
struct StateRows {
  int first, n, at, rows_pad;
};

// The heads' biases of weight sets sets[0] and sets[1] (as load_inputs) from the float master
// copy, zeros after them, on the last threads.
__device__ __forceinline__ void load_head_biases(const LossParams& p, char* smem,
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
__device__ void load_inputs(const LossParams& p, char* smem, int m, const long long (&sets)[2],
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
__device__ __forceinline__ void forward_layer(const LossParams& p, char* smem, int l,
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
__device__ void forward(const LossParams& p, char* smem, const Pass& pass) {
  const int head = p.shape.hidden;
  forward_layer<In, W, W, false>(p, smem, 0, pass);
  for (int l = 1; l < head; ++l)
    forward_layer<W, W, W, false>(p, smem, l, pass);
  forward_layer<W, kHeadPad, W, true>(p, smem, head, pass);
}

// Q of member m's rows (runs[j].n from row runs[j].first) into q, from q_online's rows from
// runs[j].at: a thread a row.
template <int Runs>
__device__ void write_q(const LossParams& p, char* smem, int m, const StateRows (&runs)[Runs]) {
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
    const float* const o = outputs + (at + r) * p.smem.ldq;
    float q[kMaxHead];
    nn::head_q([&](int a) { return o[a]; }, width, p.shape.dueling, q);
    float* to = p.q + static_cast<std::size_t>(m) * p.q_member +
                static_cast<std::size_t>(first + r) * p.q_row;
#pragma unroll
    for (int a = 0; a < kMaxHead; ++a) {
      if (a < actions)
        to[a] = q[a];
    }
  }
}

// Layer l's backward phase over the chunk's `rows` s rows (K inputs, N outputs, W the hidden
// width): its weight gradient act[l]^T dOut into parts, where dOut is scratch[now]; a hidden
// layer's bias gradient (dOut's column sums; the head's come from the loss's sums); and but for
// the first layer, the next dOut = (dOut W^T) where act[l] > 0 into the other scratch part.
template <int K, int N, int W, bool Head, bool First>
__device__ __forceinline__ void backward_layer(const LossParams& p, char* smem, int l, int rows,
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

// Where a block lies: member m's chunk c, samples [first, first + n) of its batch of b at R rows
// a chunk; the chunk's share of the environments' rows [env_first, env_end), env of them in the
// first pass.
struct Chunk {
  int m, c, b, R, first, n;
  int env_first, env_end, env;
};

__device__ __forceinline__ Chunk chunk_of(const LossParams& p) {
  Chunk ch;
  ch.m = blockIdx.x / p.chunks;
  ch.c = blockIdx.x % p.chunks;
  ch.b = p.batch;
  ch.R = p.smem.rows;
  ch.first = ch.c * ch.R;
  ch.n = min(ch.R, ch.b - ch.first);
  ch.env_first = min(p.environments, ch.c * p.environment_share);
  ch.env_end = min(p.environments, ch.env_first + p.environment_share);
  ch.env = min(p.smem.environment_rows, ch.env_end - ch.env_first);
  return ch;
}

// A sample's batch entry (the action taken, its return and discount) and its member's Huber
// threshold.
struct Sample {
  int taken;
  float return_n, discount;
  double delta;
};

// This thread's sample of the chunk (a thread a sample: R <= kThreads), read at the kernel's
// start, so that the round trip overlaps the loads and the forward passes.
static_assert(kThreads >= kMaxRows, "a chunk's samples take a thread each");
__device__ __forceinline__ Sample sample_of(const LossParams& p, const Chunk& ch) {
  Sample x{-1, 0.0f, 0.0f, p.in.settings[ch.m].huber_delta};
  if (static_cast<int>(threadIdx.x) < ch.n) {
    const std::size_t entry = static_cast<std::size_t>(ch.m) * ch.b + ch.first + threadIdx.x;
    x.taken = p.in.action[entry];
    x.return_n = p.in.return_n[entry];
    x.discount = p.in.discount[entry];
  }
  return x;
}

// 1. The weights and states; both networks down their layers (the target's pass first and alone
// where one weight set is all that fits), the online Q-values of the chunk's rows out; then the
// further passes over the rest of the chunk's environments' rows.
template <int In, int W>
__device__ __forceinline__ void forward_passes(const LossParams& p, char* smem, const Chunk& ch) {
  const Smem& sm = p.smem;
  const int R = ch.R, b = ch.b;
  const std::size_t online = ch.m, target = static_cast<std::size_t>(p.members) + ch.m;
  const long long both[2] = {static_cast<long long>(sm.sets == 2 ? online : target),
                             sm.sets == 2 ? static_cast<long long>(target) : -1};
  const StateRows rows_in[3] = {StateRows{b + ch.first, ch.n, 0, R},
                                StateRows{ch.first, ch.n, R, R},
                                StateRows{2 * b + ch.env_first, ch.env, 2 * R, pad16(ch.env)}};
  load_inputs<In>(p, smem, ch.m, both, rows_in, 3);
  copies_done();
  __syncthreads();
  if (sm.sets == 1) {
    forward<In, W>(p, smem, Pass{0, 0, R / 16, 0, false});
    const long long online_only[2] = {static_cast<long long>(online), -1};
    const StateRows no_rows[kMaxStateRuns] = {};
    load_inputs<In>(p, smem, ch.m, online_only, no_rows, 0);
    copies_done();
    __syncthreads();
  }
  // Both sets: the online network on every row beside the target on s'. One set: the online
  // network on s and the environments' rows beside it on s' through the scratch parts.
  forward<In, W>(p, smem,
                 sm.sets == 2 ? Pass{0, (2 * R + pad16(ch.env)) / 16, R / 16, 1, false}
                              : Pass{R, (R + pad16(ch.env)) / 16, R / 16, 0, true});
  write_q(p, smem, ch.m, rows_in);
  for (int e = ch.env_first + ch.env; e < ch.env_end; e += sm.environment_rows) {
    const int k = min(sm.environment_rows, ch.env_end - e);
    const long long none[2] = {-1, -1};
    const StateRows more[kMaxStateRuns] = {StateRows{2 * b + e, k, 2 * R, pad16(k)}};
    load_inputs<In>(p, smem, ch.m, none, more, 1);
    copies_done();
    __syncthreads();
    forward<In, W>(p, smem, Pass{2 * R, pad16(k) / 16, 0, 0, false});
    write_q(p, smem, ch.m, more);
  }
}

// 2. The DQN rule of this thread's sample (row r < n, a thread a row) from the heads' outputs in
// shared memory; the head's output gradient of row r in scratch[0] (zero on the padded rows up
// to a multiple of 16); each warp's sums of its samples' values (by halves) into warp_sums.
__device__ __forceinline__ void td_rows(const LossParams& p, char* smem, const Chunk& ch,
                                        const Sample& x, double (*warp_sums)[kSums]) {
  const Shape& s = p.shape;
  const Smem& sm = p.smem;
  const int width = s.outputs[s.hidden], actions = s.dueling ? width - 1 : width;
  const int ldq = sm.ldq, rows = pad16(ch.n), r = threadIdx.x;
  if (r >= (rows + 31) / 32 * 32)
    return;
  double v[kSums] = {};  // loss, Q, non-finite, then d loss / d Q per action
  float dq = 0.0f;
  if (r < ch.n) {
    const float* const o_next = part<float>(smem, sm.q_online) + r * ldq;
    const float* const o_now = o_next + ch.R * ldq;
    const float* const o_target = part<float>(smem, sm.q_target) + r * ldq;
    float now[kMaxHead], next[kMaxHead], target[kMaxHead];
    nn::head_q([&](int a) { return o_now[a]; }, width, s.dueling, now);
    nn::head_q([&](int a) { return o_next[a]; }, width, s.dueling, next);
    nn::head_q([&](int a) { return o_target[a]; }, width, s.dueling, target);
    const TdSample t =
        td_sample(now, next, target, actions, x.taken, x.return_n, x.discount, x.delta, ch.b);
    dq = t.dq;
    v[0] = t.loss;
    v[1] = t.q_taken;
    v[2] = t.nonfinite;
#pragma unroll
    for (int a = 0; a < kMaxHead; ++a) {
      if (a == x.taken)
        v[3 + a] = static_cast<double>(dq);
    }
  }
  if (r < rows) {
    float g[kMaxHead];
    nn::head_gradient([&](int a) { return a == x.taken ? dq : 0.0f; }, actions, s.dueling, g);
    bf* const row = part<bf>(smem, sm.scratch[0]) + r * sm.ldd;
#pragma unroll
    for (int o = 0; o < kHeadPad; ++o)
      row[o] = __float2bfloat16(o < kMaxHead ? g[o] : 0.0f);
  }
#pragma unroll
  for (int k = 0; k < kSums; ++k) {
    const double sum = warp_sum(v[k]);
    if ((r & 31) == 0)
      warp_sums[r / 32][k] = sum;
  }
}

// The chunk's sums, the warps' of td_rows in order (after a barrier), into sums and its part of
// partial_sums.
__device__ __forceinline__ void chunk_sums(const LossParams& p, const Chunk& ch,
                                           const double (*warp_sums)[kSums], double* sums) {
  if (threadIdx.x >= kSums)
    return;
  double total = 0.0;
  for (int w = 0; w < (pad16(ch.n) + 31) / 32; ++w)
    total += warp_sums[w][threadIdx.x];
  sums[threadIdx.x] = total;
  p.partial_sums[(static_cast<std::size_t>(ch.m) * p.chunks + ch.c) * kSums + threadIdx.x] = total;
}

// 3. Down the layers over the chunk's s rows: dW_l = act[l]^T dOut_l, db_l = dOut_l's column
// sums (the head's from the chunk's sums of d loss / d Q through nn::head_gradient, once the
// head's phase has passed its barrier), dOut_{l-1} = (dOut_l W_l^T) where act[l] > 0.
template <int In, int W>
__device__ __forceinline__ void backward_chain(const LossParams& p, char* smem, const Chunk& ch,
                                               const double* sums) {
  const Shape& s = p.shape;
  const int head = s.hidden, width = s.outputs[head], rows = pad16(ch.n);
  float* const parts =
      p.partials + (static_cast<std::size_t>(ch.m) * p.chunks + ch.c) * p.part_stride;
  backward_layer<W, kHeadPad, W, true, false>(p, smem, head, rows, 0, parts);
  if (const int o = threadIdx.x; o < width) {
    float g[kMaxHead];
    nn::head_gradient([&](int a) { return sums[3 + a]; }, s.dueling ? width - 1 : width, s.dueling,
                      g);
    parts[s.bias[head] + o] = pick(g, o);
  }
  int now = 1;
  for (int l = head - 1; l >= 1; --l, now = 1 - now)
    backward_layer<W, W, W, false, false>(p, smem, l, rows, now, parts);
  backward_layer<In, W, W, false, true>(p, smem, 0, rows, now, parts);
}

template <int In, int W>
__global__ void __launch_bounds__(kThreads, 1) loss_kernel(const __grid_constant__ LossParams p) {
  extern __shared__ __align__(128) char smem[];
  __shared__ double warp_sums[kMaxRows / 32][kSums];
  __shared__ double sums[kSums];
  const Chunk ch = chunk_of(p);
  const Sample x = sample_of(p, ch);
  forward_passes<In, W>(p, smem, ch);
  td_rows(p, smem, ch, x, warp_sums);
  __syncthreads();
  chunk_sums(p, ch, warp_sums, sums);
  backward_chain<In, W>(p, smem, ch, sums);
}

}  // namespace

LossKernel loss_kernel_for(const Geometry& g) {
  static constexpr LossKernel kernels[3][3] = {
      {loss_kernel<32, 32>, loss_kernel<32, 64>, loss_kernel<32, 128>},
      {loss_kernel<64, 32>, loss_kernel<64, 64>, loss_kernel<64, 128>},
      {loss_kernel<128, 32>, loss_kernel<128, 64>, loss_kernel<128, 128>}};
  static_assert(kWidths[0] == 32 && kWidths[1] == 64 && kWidths[2] == 128, "a kernel a width");
  return kernels[width_index(g.in)][width_index(g.width)];
}

}  // namespace dqntrader::train::fused

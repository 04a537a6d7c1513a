// The fused learning step (fused_step.hpp). A chunk of R samples of one member is one block:
//   1. the target network's weights into shared memory; its forward pass on the chunk's s'
//   2. the online network's weights in their place; its forward passes on the chunk's s', on
//      its share of the environments' states and on its s, whose activations stay for step 4
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

// Where the parts of a block's shared memory lie (bytes from its start) for R rows, and the
// strides of their rows (values).
struct Smem {
  int in_pad[kMaxHidden + 1], out_pad[kMaxHidden + 1];
  int ldw[kMaxHidden + 1];  // layer l's weight rows: out_pad[l] + kPad
  int lda[kMaxHidden + 1];  // layer l's input rows (act[l]): in_pad[l] + kPad
  int ldd;                  // output gradients' rows: the widest layer's + kPad
  std::size_t w[kMaxHidden + 1], b[kMaxHidden + 1], act[kMaxHidden + 1], dout[2], q[3], sums;
  std::size_t bytes;
};

Smem smem_layout(const Shape& s, int rows) {
  Smem m{};
  std::size_t at = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t here = at;
    at += (bytes + 127) / 128 * 128;
    return here;
  };
  int widest = 0;
  for (int l = 0; l <= s.hidden; ++l) {
    m.in_pad[l] = pad16(s.inputs[l]);
    m.out_pad[l] = pad16(s.outputs[l]);
    m.ldw[l] = m.out_pad[l] + kPad;
    m.lda[l] = m.in_pad[l] + kPad;
    widest = std::max(widest, m.out_pad[l]);
    m.w[l] = take(static_cast<std::size_t>(m.in_pad[l]) * m.ldw[l] * sizeof(bf));
    m.b[l] = take(static_cast<std::size_t>(m.out_pad[l]) * sizeof(float));
    m.act[l] = take(static_cast<std::size_t>(rows) * m.lda[l] * sizeof(bf));
  }
  m.ldd = widest + kPad;
  for (std::size_t& d : m.dout)
    d = take(static_cast<std::size_t>(rows) * m.ldd * sizeof(bf));
  for (std::size_t& q : m.q)
    q = take(static_cast<std::size_t>(rows) * kMaxHead * sizeof(float));
  m.sums = take(static_cast<std::size_t>(rows) * kSums * sizeof(double));
  m.bytes = at;
  return m;
}

struct Params {
  Shape shape;
  Smem smem;
  int members, batch, environments, rows, chunks, env_share;
  Inputs in;
  float* q;
  std::size_t q_member, q_row;
  float* partials;
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
// zeros to rows_pad x cols_pad: by 16-byte copies that do not wait where the rows allow it
// (the caller waits: copies_done(), then __syncthreads()), else 8 loads a thread at a time, so
// that the copy costs a few memory latencies, not one a value.
__device__ void copy_matrix(bf* to, int ld_to, const bf* from, std::size_t ld_from, int rows,
                            int cols, int rows_pad, int cols_pad) {
  const bf zero = __float2bfloat16(0.0f);
  const int threads = blockDim.x;
  if (cols % 8 == 0 && ld_from % 8 == 0 && reinterpret_cast<std::uintptr_t>(from) % 16 == 0) {
    const int per_row = cols / 8;
    for (int i = threadIdx.x; i < rows * per_row; i += threads) {
      const int r = i / per_row, v = i % per_row;
      copy16(to + r * ld_to + 8 * v, from + r * ld_from + 8 * v);
    }
  } else {
    constexpr int kLoads = 8;
    const int all = rows * cols;
    for (int base = threadIdx.x; base < all; base += kLoads * threads) {
      bf v[kLoads];
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        const int i = base + u * threads;
        v[u] = i < all ? from[(i / cols) * ld_from + i % cols] : zero;
      }
#pragma unroll
      for (int u = 0; u < kLoads; ++u) {
        const int i = base + u * threads;
        if (i < all)
          to[(i / cols) * ld_to + i % cols] = v[u];
      }
    }
  }
  const int right = cols_pad - cols;
  for (int i = threadIdx.x; i < rows * right; i += threads)
    to[(i / right) * ld_to + cols + i % right] = zero;
  for (int i = threadIdx.x; i < (rows_pad - rows) * cols_pad; i += threads)
    to[(rows + i / cols_pad) * ld_to + i % cols_pad] = zero;
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

// The block's product of M x N (both multiples of 16) over k: each warp takes 16-row strips
// times blocks of 32 columns (16 where that leaves warps idle) in turn, and hands each pair of
// adjacent values to out(row, column, v0, v1).
template <bool AT, bool BN, class Out>
__device__ __forceinline__ void block_product(int m, int n, int k, const bf* a, int lda,
                                              const bf* b, int ldb, const Out& out) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  const int strips = m / 16;
  const int per = strips * ((n + 31) / 32) >= warps ? 4 : 2;  // tiles a unit
  const int blocks = (n + 8 * per - 1) / (8 * per);
  for (int u = warp; u < strips * blocks; u += warps) {
    const int m0 = (u / blocks) * 16, n0 = (u % blocks) * 8 * per;
    const int tiles = min(per, (n - n0) / 8);
    float acc[4][4] = {};
    warp_product<AT, BN>(acc, tiles, a, lda, b, ldb, m0, n0, k, lane);
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
}

template <class T>
__device__ __forceinline__ T* part(char* smem, std::size_t offset) {
  return reinterpret_cast<T*>(smem + offset);
}

// Network `set`'s weights (member m's online network: set m; its target: M + m) into shared
// memory, padded with zeros; hidden biases from the working copy, the head's from the master.
__device__ void load_weights(const Params& p, char* smem, std::size_t set) {
  const Shape& s = p.shape;
  const Smem& sm = p.smem;
  const bf* w = reinterpret_cast<const bf*>(p.in.working) + set * p.in.stride;
  const float* master = p.in.master + set * p.in.stride;
  for (int l = 0; l <= s.hidden; ++l) {
    copy_matrix(part<bf>(smem, sm.w[l]), sm.ldw[l], w + s.weight[l],
                static_cast<std::size_t>(s.outputs[l]), s.inputs[l], s.outputs[l], sm.in_pad[l],
                sm.out_pad[l]);
    float* bias = part<float>(smem, sm.b[l]);
    for (int c = threadIdx.x; c < sm.out_pad[l]; c += blockDim.x) {
      bias[c] = c >= s.outputs[l] ? 0.0f
                : l < s.hidden    ? __bfloat162float(w[s.bias[l] + c])
                                  : master[s.bias[l] + c];
    }
  }
  copies_done();
  __syncthreads();
}

// The network in shared memory on n rows of member m's states from `first` (n <= R): the
// hidden layers into act[1..], the head's outputs (before a dueling combination) into
// out[r * kMaxHead + o].
__device__ void forward(const Params& p, char* smem, int m, int first, int n, float* out) {
  const Shape& s = p.shape;
  const Smem& sm = p.smem;
  const int rows = pad16(n);
  const bf* states = reinterpret_cast<const bf*>(p.in.states) +
                     static_cast<std::size_t>(m) * p.in.state_member +
                     static_cast<std::size_t>(first) * p.in.state_row;
  copy_matrix(part<bf>(smem, sm.act[0]), sm.lda[0], states, p.in.state_row, n, s.inputs[0], rows,
              sm.in_pad[0]);
  copies_done();
  __syncthreads();
  for (int l = 0; l < s.hidden; ++l) {
    bf* h = part<bf>(smem, sm.act[l + 1]);
    const float* bias = part<float>(smem, sm.b[l]);
    const int ld = sm.lda[l + 1];
    block_product<false, false>(
        rows, sm.out_pad[l], sm.in_pad[l], part<bf>(smem, sm.act[l]), sm.lda[l],
        part<bf>(smem, sm.w[l]), sm.ldw[l], [&](int r, int c, float v0, float v1) {
          h[r * ld + c] = __float2bfloat16(fmaxf(v0 + bias[c], 0.0f));
          h[r * ld + c + 1] = __float2bfloat16(fmaxf(v1 + bias[c + 1], 0.0f));
        });
    __syncthreads();
  }
  const int head = s.hidden;
  const float* bias = part<float>(smem, sm.b[head]);
  block_product<false, false>(rows, sm.out_pad[head], sm.in_pad[head], part<bf>(smem, sm.act[head]),
                              sm.lda[head], part<bf>(smem, sm.w[head]), sm.ldw[head],
                              [&](int r, int c, float v0, float v1) {
                                if (c < kMaxHead) {
                                  out[r * kMaxHead + c] = v0 + bias[c];
                                  out[r * kMaxHead + c + 1] = v1 + bias[c + 1];
                                }
                              });
  __syncthreads();
}

// Q from a row's head outputs o (train's head_q): o itself, or with a dueling head
// Q_a = o_0 + o_{a+1} - mean_b o_{b+1}.
__device__ __forceinline__ void head_q(const float* o, int width, bool dueling, float* q) {
  if (!dueling) {
    for (int a = 0; a < width; ++a)
      q[a] = o[a];
    return;
  }
  float mean = 0.0f;
  for (int a = 1; a < width; ++a)
    mean += o[a];
  mean /= static_cast<float>(width - 1);
  for (int a = 0; a + 1 < width; ++a)
    q[a] = o[0] + o[a + 1] - mean;
}

// Q of n rows from `first` into q.
__device__ void write_q(const Params& p, int m, int first, int n, const float* outputs) {
  const int width = p.shape.outputs[p.shape.hidden];
  const int actions = p.shape.dueling ? width - 1 : width;
  for (int r = threadIdx.x; r < n; r += blockDim.x) {
    float q[kMaxHead];
    head_q(outputs + r * kMaxHead, width, p.shape.dueling, q);
    float* to = p.q + static_cast<std::size_t>(m) * p.q_member +
                static_cast<std::size_t>(first + r) * p.q_row;
    for (int a = 0; a < actions; ++a)
      to[a] = q[a];
  }
}

__device__ __forceinline__ double huber(double d, double delta) {
  const double a = fabs(d);
  return a <= delta ? 0.5 * d * d : delta * (a - 0.5 * delta);
}

__global__ void __launch_bounds__(256) loss_kernel(const Params p) {
  extern __shared__ __align__(128) char smem[];
  const Shape& s = p.shape;
  const Smem& sm = p.smem;
  const int m = blockIdx.x / p.chunks, c = blockIdx.x % p.chunks;
  const int b = p.batch, first = c * p.rows, n = min(p.rows, b - first);
  const int head = s.hidden, width = s.outputs[head];
  const int actions = s.dueling ? width - 1 : width;
  float* const q_target = part<float>(smem, sm.q[0]);
  float* const q_next = part<float>(smem, sm.q[1]);
  float* const q_now = part<float>(smem, sm.q[2]);

  // 1-2. The target network on s'; the online network on s', the environments' share and s.
  load_weights(p, smem, static_cast<std::size_t>(p.members + m));
  forward(p, smem, m, b + first, n, q_target);
  load_weights(p, smem, static_cast<std::size_t>(m));
  forward(p, smem, m, b + first, n, q_next);
  write_q(p, m, b + first, n, q_next);
  const int env_end = min(p.environments, (c + 1) * p.env_share);
  for (int e = c * p.env_share; e < env_end; e += p.rows) {
    const int k = min(p.rows, env_end - e);
    forward(p, smem, m, 2 * b + e, k, q_now);
    write_q(p, m, 2 * b + e, k, q_now);
    __syncthreads();
  }
  forward(p, smem, m, first, n, q_now);
  write_q(p, m, first, n, q_now);

  // 3. The loss, a thread a sample; the head's output gradient in dout[0], zero on padded rows.
  const int rows = pad16(n);
  bf* const d_head = part<bf>(smem, sm.dout[0]);
  double* const sums = part<double>(smem, sm.sums);
  const double delta = p.in.settings[m].huber_delta;
  for (int r = threadIdx.x; r < rows; r += blockDim.x) {
    double v[kSums] = {};
    float dq = 0.0f;
    int taken = -1;
    if (r < n) {
      const std::size_t entry = static_cast<std::size_t>(m) * b + first + r;
      float next[kMaxHead], target[kMaxHead], now[kMaxHead];
      head_q(q_next + r * kMaxHead, width, s.dueling, next);
      head_q(q_target + r * kMaxHead, width, s.dueling, target);
      head_q(q_now + r * kMaxHead, width, s.dueling, now);
      int best = 0;
      for (int a = 1; a < actions; ++a) {
        if (next[a] > next[best])
          best = a;
      }
      taken = p.in.action[entry];
      const double y =
          static_cast<double>(p.in.return_n[entry]) +
          static_cast<double>(p.in.discount[entry]) * static_cast<double>(target[best]);
      const double q_taken = taken >= 0 && taken < actions ? now[taken] : 0.0f;
      const double d = q_taken - y;
      const double clipped = d > delta ? delta : (d < -delta ? -delta : d);
      dq = static_cast<float>(clipped / static_cast<double>(b));
      v[0] = huber(d, delta);
      v[1] = q_taken;
      v[2] = fabs(d) <= 1.7976931348623157e308 ? 0.0 : 1.0;
      if (taken >= 0 && taken < kMaxHead)
        v[3 + taken] = static_cast<double>(dq);
    }
    // d loss / d head outputs: the one-hot dq, through a dueling head's combination.
    bf* const row = d_head + r * sm.ldd;
    for (int o = 0; o < sm.out_pad[head]; ++o) {
      float value = 0.0f;
      if (!s.dueling) {
        value = o == taken ? dq : 0.0f;
      } else if (o == 0) {
        value = dq;
      } else if (o < width) {
        value = static_cast<float>(static_cast<double>(o - 1 == taken ? dq : 0.0f) -
                                   static_cast<double>(dq) / static_cast<double>(actions));
      }
      row[o] = __float2bfloat16(value);
    }
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
  // from the sums above), dOut_{l-1} = (dOut_l W_l^T) where act[l] > 0.
  float* const parts = p.partials + (static_cast<std::size_t>(m) * p.chunks + c) * s.size;
  int now_buffer = 0;
  for (int l = head; l >= 0; --l) {
    const bf* const d = part<bf>(smem, sm.dout[now_buffer]);
    const bf* const act = part<bf>(smem, sm.act[l]);
    const int in = s.inputs[l], out = s.outputs[l];
    float* const dw = parts + s.weight[l];
    block_product<true, false>(sm.in_pad[l], sm.out_pad[l], rows, act, sm.lda[l], d, sm.ldd,
                               [&](int i, int o, float v0, float v1) {
                                 if (i < in) {
                                   if (o < out)
                                     dw[i * out + o] = v0;
                                   if (o + 1 < out)
                                     dw[i * out + o + 1] = v1;
                                 }
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
      bf* const next = part<bf>(smem, sm.dout[1 - now_buffer]);
      const int lda = sm.lda[l], ldd = sm.ldd;
      block_product<false, true>(rows, sm.in_pad[l], sm.out_pad[l], d, ldd, part<bf>(smem, sm.w[l]),
                                 sm.ldw[l], [&](int r, int i, float v0, float v1) {
                                   const float h0 = __bfloat162float(act[r * lda + i]);
                                   const float h1 = __bfloat162float(act[r * lda + i + 1]);
                                   next[r * ldd + i] = __float2bfloat16(h0 > 0.0f ? v0 : 0.0f);
                                   next[r * ldd + i + 1] = __float2bfloat16(h1 > 0.0f ? v1 : 0.0f);
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
    const float* const parts = p.partials + m * p.chunks * s.size + at;
    for (int c = 0; c < p.chunks; ++c)
      g += parts[static_cast<std::size_t>(c) * s.size];
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
         smem_layout(shape, 16).bytes <= static_cast<std::size_t>(shared_limit());
}

Step::Step(const ExecSpace& space, const Shape& shape, std::size_t members, std::size_t batch,
           std::size_t environments)
    : m_shape(shape), m_members(members), m_batch(batch), m_environments(environments) {
  if (!takes(shape))
    throw InputError("fused step: a network of this shape is not one it takes");
  // The most samples a chunk takes (fewer chunks: fewer parts to add) while the chunks of
  // every member still fill three quarters of the multiprocessors, and the shared memory
  // holds it.
  const std::size_t fill = static_cast<std::size_t>(multiprocessors()) * 3 / 4;
  const std::size_t limit = static_cast<std::size_t>(shared_limit());
  m_rows = 16;
  for (int rows : {128, 64, 32}) {
    const std::size_t chunks = (batch + rows - 1) / rows;
    if (members * chunks >= fill && smem_layout(shape, rows).bytes <= limit) {
      m_rows = rows;
      break;
    }
  }
  m_chunks = static_cast<int>((batch + m_rows - 1) / m_rows);
  m_threads = m_rows >= 64 ? 256 : 128;
  m_shared = smem_layout(shape, m_rows).bytes;
  DQNTRADER_CUDA(cudaFuncSetAttribute(loss_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(m_shared)));
  const std::size_t parts = members * static_cast<std::size_t>(m_chunks);
  m_partials = Kokkos::View<float*, DeviceMemory>(
      Kokkos::view_alloc(space, std::string("dqntrader::fused::partials")), parts * shape.size);
  m_partial_sums = Kokkos::View<double*, DeviceMemory>(
      Kokkos::view_alloc(space, std::string("dqntrader::fused::partial_sums")), parts * kSums);
}

void Step::loss(const ExecSpace& space, const Inputs& in, float* q, std::size_t q_member,
                std::size_t q_row) const {
  Params p{};
  p.shape = m_shape;
  p.smem = smem_layout(m_shape, m_rows);
  p.members = static_cast<int>(m_members);
  p.batch = static_cast<int>(m_batch);
  p.environments = static_cast<int>(m_environments);
  p.rows = m_rows;
  p.chunks = m_chunks;
  p.env_share = static_cast<int>((m_environments + m_chunks - 1) / m_chunks);
  p.in = in;
  p.q = q;
  p.q_member = q_member;
  p.q_row = q_row;
  p.partials = m_partials.data();
  p.partial_sums = m_partial_sums.data();
  loss_kernel<<<static_cast<unsigned>(m_members * m_chunks), m_threads, m_shared,
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
  p.partial_sums = m_partial_sums.data();
  p.grads = grads;
  p.grad_stride = grad_stride;
  p.sums = sums;
  p.totals = totals;
  const std::size_t all = m_members * m_shape.size;
  constexpr unsigned kThreads = 256;
  gradient_kernel<<<static_cast<unsigned>((all + kThreads - 1) / kThreads), kThreads, 0,
                    space.cuda_stream()>>>(p);
  DQNTRADER_CUDA(cudaGetLastError());
}

}  // namespace dqntrader::fused

// The fused learning step's device pieces (CUDA only; loss_kernel.cpp and learn_kernel.cpp):
// a warp's sums, tensor-core tile products whose operands ldmatrix loads from shared memory
// (transposed where the operand is stored the other way), and loads from global into shared
// memory. A product is a warp's 16-row strip of the output times a block of 16 or 32 columns, in
// m16n8k16 products (bf16 operands, float accumulation). Shared rows are padded by kPad values
// so that the eight rows of an 8 x 8 load fall in different banks.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "dqntrader/train/fused/plan.hpp"

namespace dqntrader::train::fused {

using bf = __nv_bfloat16;

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

// Part `offset` bytes into a block's shared memory, as T.
template <class T>
__device__ __forceinline__ T* part(char* smem, std::size_t offset) {
  return reinterpret_cast<T*>(smem + offset);
}

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

}  // namespace dqntrader::train::fused

// The one matrix-product interface the library calls. Each build compiles exactly one
// implementation: backends/cuda (cuBLAS) or backends/openmp (Kokkos Kernels over OpenBLAS).
//
// All matrices are row-major (Kokkos::LayoutRight); the column-major vendor convention is
// handled once, inside the backend. Every call takes the execution space first and
// enqueues its work there: on CUDA the product runs on that instance's stream, ordered
// with the Kokkos kernels around it, and the host does not wait for it.
//
//   C = alpha * op(A) * op(B) + beta * C,   op(X) = X or X^T
//
// A is m x k after op, B is k x n after op, C is m x n; a shape mismatch throws
// InputError naming the extents.
#pragma once

#include "dqntrader/core/bf16.hpp"
#include "dqntrader/core/precision.hpp"
#include "dqntrader/core/types.hpp"

namespace dqntrader::gemm {

enum class Op { none, transpose };

/// Float operands and result. precision is fp32 or tf32 (tf32 runs as fp32 on OpenMP);
/// bf16 needs bf16 operands (use the overloads below) and is rejected with InputError.
void gemm(const ExecSpace& space, Precision precision, Op op_a, Op op_b, float alpha,
          const Matrix<const float>& a, const Matrix<const float>& b, float beta,
          const Matrix<float>& c);

/// bf16 operands, float accumulation, float result.
void gemm(const ExecSpace& space, Op op_a, Op op_b, float alpha, const Matrix<const bf16>& a,
          const Matrix<const bf16>& b, float beta, const Matrix<float>& c);

/// bf16 operands, float accumulation, result rounded to bf16.
void gemm(const ExecSpace& space, Op op_a, Op op_b, float alpha, const Matrix<const bf16>& a,
          const Matrix<const bf16>& b, float beta, const Matrix<bf16>& c);

/// Strided batches: C[i] = alpha * op(A[i]) * op(B[i]) + beta * C[i] for i < batch, where
/// batch = C.extent(0). An operand whose batch extent is 1 is shared by every product
/// (one weight set applied to many inputs, or one input to many weight sets); otherwise
/// its batch extent must equal C's.
void gemm_batched(const ExecSpace& space, Precision precision, Op op_a, Op op_b, float alpha,
                  const MatrixBatch<const float>& a, const MatrixBatch<const float>& b, float beta,
                  const MatrixBatch<float>& c);

void gemm_batched(const ExecSpace& space, Op op_a, Op op_b, float alpha,
                  const MatrixBatch<const bf16>& a, const MatrixBatch<const bf16>& b, float beta,
                  const MatrixBatch<float>& c);

void gemm_batched(const ExecSpace& space, Op op_a, Op op_b, float alpha,
                  const MatrixBatch<const bf16>& a, const MatrixBatch<const bf16>& b, float beta,
                  const MatrixBatch<bf16>& c);

/// The name of the compiled backend: "cuda" or "openmp".
const char* backend_name();

}  // namespace dqntrader::gemm

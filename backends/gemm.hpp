// The one matrix-product interface the library calls. Each build compiles exactly one
// implementation: backends/cuda (cuBLASLt) or backends/openmp (Kokkos Kernels over OpenBLAS).
//
// Matrices are row-major: each row is contiguous; the column-major vendor convention is
// handled once, inside the backend. Every call takes the execution space first and
// enqueues its work there: on CUDA the product runs on that instance's stream, ordered
// with the Kokkos kernels around it, and the host does not wait for it.
//
//   C = epilogue(alpha * op(A) * op(B) + beta * C),   op(X) = X or X^T
//
// A is m x k after op, B is k x n after op, C is m x n; a shape mismatch throws
// InputError naming the extents. The epilogue optionally adds a bias (one value per
// column of C) and applies ReLU; on CUDA it runs inside the product (cuBLASLt epilogue),
// on OpenMP as one pass after it.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>

#include "dqntrader/core/bf16.hpp"
#include "dqntrader/core/precision.hpp"
#include "dqntrader/core/types.hpp"

namespace dqntrader::gemm {

enum class Op { none, transpose };

/// What happens to each result before it is stored. The bias has C's element type.
template <class T>
struct Epilogue {
  Kokkos::View<const T*, DeviceMemory> bias;  // empty: no bias; else n values per product
  std::size_t bias_stride = 0;  // batched products: values between consecutive products' biases
  bool relu = false;
};

/// A batch of row-major matrices [batch][row][column]: rows contiguous (stride(2) == 1),
/// rows of a matrix stride(1) apart, matrices stride(0) apart. LayoutRight views convert to
/// it implicitly; subviews give other strides (e.g. a block of rows of every matrix).
template <class T>
using StridedBatch = Kokkos::View<T***, Kokkos::LayoutStride, DeviceMemory>;

/// Float operands and result. precision is fp32 or tf32 (tf32 runs as fp32 on OpenMP);
/// bf16 needs bf16 operands (use the overloads below) and is rejected with InputError.
void gemm(const ExecSpace& space, Precision precision, Op op_a, Op op_b, float alpha,
          const Matrix<const float>& a, const Matrix<const float>& b, float beta,
          const Matrix<float>& c, const Epilogue<float>& epilogue = {});

/// bf16 operands, float accumulation, float result.
void gemm(const ExecSpace& space, Op op_a, Op op_b, float alpha, const Matrix<const bf16>& a,
          const Matrix<const bf16>& b, float beta, const Matrix<float>& c,
          const Epilogue<float>& epilogue = {});

/// bf16 operands, float accumulation, result rounded to bf16.
void gemm(const ExecSpace& space, Op op_a, Op op_b, float alpha, const Matrix<const bf16>& a,
          const Matrix<const bf16>& b, float beta, const Matrix<bf16>& c,
          const Epilogue<bf16>& epilogue = {});

/// Strided batches: C[i] = alpha * op(A[i]) * op(B[i]) + beta * C[i] for i < batch, where
/// batch = C.extent(0). An operand whose batch extent is 1 is shared by every product
/// (one weight set applied to many inputs, or one input to many weight sets); otherwise
/// its batch extent must equal C's.
void gemm_batched(const ExecSpace& space, Precision precision, Op op_a, Op op_b, float alpha,
                  const StridedBatch<const float>& a, const StridedBatch<const float>& b,
                  float beta, const StridedBatch<float>& c, const Epilogue<float>& epilogue = {});

void gemm_batched(const ExecSpace& space, Op op_a, Op op_b, float alpha,
                  const StridedBatch<const bf16>& a, const StridedBatch<const bf16>& b, float beta,
                  const StridedBatch<float>& c, const Epilogue<float>& epilogue = {});

void gemm_batched(const ExecSpace& space, Op op_a, Op op_b, float alpha,
                  const StridedBatch<const bf16>& a, const StridedBatch<const bf16>& b, float beta,
                  const StridedBatch<bf16>& c, const Epilogue<bf16>& epilogue = {});

/// Strided batches with no transposes, alpha 1 and beta 0, in the arithmetic of the operands'
/// type: bf16 operands in bf16, float operands at precision (fp32 or tf32). The one call of
/// code templated on its compute type (the networks' passes).
template <class T, class TC>
void product_batched(const ExecSpace& space, Precision precision, const StridedBatch<const T>& a,
                     const StridedBatch<const T>& b, const StridedBatch<TC>& c,
                     const Epilogue<TC>& epilogue) {
  if constexpr (std::is_same<T, bf16>::value) {
    gemm_batched(space, Op::none, Op::none, 1.0f, a, b, 0.0f, c, epilogue);
  } else {
    gemm_batched(space, precision, Op::none, Op::none, 1.0f, a, b, 0.0f, c, epilogue);
  }
}

/// The name of the compiled backend: "cuda" or "openmp".
const char* backend_name();

/// The library the products run on, for `dqntrader info`: on CUDA cuBLASLt and its version;
/// on OpenMP the host BLAS's file and, for OpenBLAS, its release and the core (kernel set) it
/// runs, and whether route_host_library() chose that core.
std::string library_description();

/// Called first in main, before anything else (it may execute the program again): on OpenMP,
/// when the BLAS is OpenBLAS, OPENBLAS_CORETYPE is unset and OpenBLAS picked kernels below
/// what the CPU runs (AVX-512 or AVX2 unused), sets OPENBLAS_CORETYPE to the better core and
/// executes the program again with the same arguments; OpenBLAS reads it only at load time.
/// Nothing on CUDA.
void route_host_library(char** argv);

}  // namespace dqntrader::gemm

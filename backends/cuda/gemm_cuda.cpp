// CUDA backend: cublasGemmEx / cublasGemmStridedBatchedEx on the stream of the Kokkos
// execution-space instance.
//   fp32: float operands, CUBLAS_COMPUTE_32F (no tensor-core down-conversion)
//   tf32: float operands, CUBLAS_COMPUTE_32F_FAST_TF32
//   bf16: CUDA_R_16BF operands, CUBLAS_COMPUTE_32F (float accumulation on bf16 tensor
//         cores; cuBLAS accepts the FAST_* compute types only with float operands),
//         float or bf16 result.
// Row-major C = op(A) op(B) is computed as column-major C^T = op(B)^T op(A)^T: the stored
// row-major matrices are their own transposes in column-major, so the operands swap and
// the operations stay as they are.
#include <cuda_bf16.h>

#include <climits>
#include <sstream>

#include "../gemm.hpp"
#include "../gemm_common.hpp"
#include "cublas_handle.hpp"
#include "dqntrader/core/error.hpp"

namespace dqntrader::gemm {

static_assert(sizeof(bf16) == sizeof(__nv_bfloat16) && alignof(bf16) == alignof(__nv_bfloat16),
              "dqntrader::bf16 must have the layout of __nv_bfloat16");

namespace {

template <class T>
constexpr cudaDataType data_type() {
  return std::is_same<T, bf16>::value ? CUDA_R_16BF : CUDA_R_32F;
}

cublasOperation_t vendor_op(Op op) {
  return op == Op::none ? CUBLAS_OP_N : CUBLAS_OP_T;
}

int to_int(std::size_t value, const char* what) {
  if (value > static_cast<std::size_t>(INT_MAX)) {
    std::ostringstream message;
    message << "gemm: " << what << " = " << value << " exceeds the cuBLAS limit of " << INT_MAX;
    throw InputError(message.str());
  }
  return static_cast<int>(value);
}

// Leading dimension of a row-major matrix with the given row stride: cuBLAS wants at least 1.
int leading(std::size_t row_stride, std::size_t cols) {
  return to_int(row_stride > 0 ? row_stride : (cols > 0 ? cols : 1), "leading dimension");
}

template <class TAB, class TC>
void product(const ExecSpace& space, cublasComputeType_t compute, Op op_a, Op op_b, float alpha,
             const Matrix<const TAB>& a, const Matrix<const TAB>& b, float beta,
             const Matrix<TC>& c) {
  const detail::Shape shape = detail::check_shape(op_a, op_b, a, b, c);
  if (shape.m == 0 || shape.n == 0)
    return;
  if (shape.k == 0) {
    detail::scale(space, beta, c);
    return;
  }
  cublasHandle_t handle = cuda::CublasHandle::bound_to(space);
  DQNTRADER_CUBLAS(cublasGemmEx(
      handle, vendor_op(op_b), vendor_op(op_a), to_int(shape.n, "n"), to_int(shape.m, "m"),
      to_int(shape.k, "k"), &alpha, b.data(), data_type<TAB>(), leading(b.stride(0), b.extent(1)),
      a.data(), data_type<TAB>(), leading(a.stride(0), a.extent(1)), &beta, c.data(),
      data_type<TC>(), leading(c.stride(0), c.extent(1)), compute, CUBLAS_GEMM_DEFAULT));
}

template <class TAB, class TC>
void batched_product(const ExecSpace& space, cublasComputeType_t compute, Op op_a, Op op_b,
                     float alpha, const MatrixBatch<const TAB>& a, const MatrixBatch<const TAB>& b,
                     float beta, const MatrixBatch<TC>& c) {
  const detail::Shape shape = detail::check_batched_shape(op_a, op_b, a, b, c);
  if (shape.batch == 0 || shape.m == 0 || shape.n == 0)
    return;
  if (shape.k == 0) {
    for (std::size_t i = 0; i < shape.batch; ++i) {
      detail::scale(space, beta, Matrix<TC>(Kokkos::subview(c, i, Kokkos::ALL, Kokkos::ALL)));
    }
    return;
  }
  const long long stride_a = shape.share_a ? 0 : static_cast<long long>(a.stride(0));
  const long long stride_b = shape.share_b ? 0 : static_cast<long long>(b.stride(0));
  cublasHandle_t handle = cuda::CublasHandle::bound_to(space);
  DQNTRADER_CUBLAS(cublasGemmStridedBatchedEx(
      handle, vendor_op(op_b), vendor_op(op_a), to_int(shape.n, "n"), to_int(shape.m, "m"),
      to_int(shape.k, "k"), &alpha, b.data(), data_type<TAB>(), leading(b.stride(1), b.extent(2)),
      stride_b, a.data(), data_type<TAB>(), leading(a.stride(1), a.extent(2)), stride_a, &beta,
      c.data(), data_type<TC>(), leading(c.stride(1), c.extent(2)),
      static_cast<long long>(c.stride(0)), to_int(shape.batch, "batch"), compute,
      CUBLAS_GEMM_DEFAULT));
}

cublasComputeType_t float_compute(Precision precision) {
  detail::check_float_precision(precision);
  return precision == Precision::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

}  // namespace

void gemm(const ExecSpace& space, Precision precision, Op op_a, Op op_b, float alpha,
          const Matrix<const float>& a, const Matrix<const float>& b, float beta,
          const Matrix<float>& c) {
  product(space, float_compute(precision), op_a, op_b, alpha, a, b, beta, c);
}

void gemm(const ExecSpace& space, Op op_a, Op op_b, float alpha, const Matrix<const bf16>& a,
          const Matrix<const bf16>& b, float beta, const Matrix<float>& c) {
  product(space, CUBLAS_COMPUTE_32F, op_a, op_b, alpha, a, b, beta, c);
}

void gemm(const ExecSpace& space, Op op_a, Op op_b, float alpha, const Matrix<const bf16>& a,
          const Matrix<const bf16>& b, float beta, const Matrix<bf16>& c) {
  product(space, CUBLAS_COMPUTE_32F, op_a, op_b, alpha, a, b, beta, c);
}

void gemm_batched(const ExecSpace& space, Precision precision, Op op_a, Op op_b, float alpha,
                  const MatrixBatch<const float>& a, const MatrixBatch<const float>& b, float beta,
                  const MatrixBatch<float>& c) {
  batched_product(space, float_compute(precision), op_a, op_b, alpha, a, b, beta, c);
}

void gemm_batched(const ExecSpace& space, Op op_a, Op op_b, float alpha,
                  const MatrixBatch<const bf16>& a, const MatrixBatch<const bf16>& b, float beta,
                  const MatrixBatch<float>& c) {
  batched_product(space, CUBLAS_COMPUTE_32F, op_a, op_b, alpha, a, b, beta, c);
}

void gemm_batched(const ExecSpace& space, Op op_a, Op op_b, float alpha,
                  const MatrixBatch<const bf16>& a, const MatrixBatch<const bf16>& b, float beta,
                  const MatrixBatch<bf16>& c) {
  batched_product(space, CUBLAS_COMPUTE_32F, op_a, op_b, alpha, a, b, beta, c);
}

const char* backend_name() {
  return "cuda";
}

}  // namespace dqntrader::gemm

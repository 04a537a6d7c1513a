// CUDA backend: every product is one cublasLtMatmul on the stream of the Kokkos execution-
// space instance, with the bias and ReLU fused into its epilogue.
//   fp32: float operands, CUBLAS_COMPUTE_32F (no tensor-core down-conversion)
//   tf32: float operands, CUBLAS_COMPUTE_32F_FAST_TF32
//   bf16: CUDA_R_16BF operands, CUBLAS_COMPUTE_32F (float accumulation on bf16 tensor
//         cores; cuBLAS accepts the FAST_* compute types only with float operands),
//         float or bf16 result.
// Row-major C = op(A) op(B) is computed as column-major C^T = op(B)^T op(A)^T: the stored
// row-major matrices are their own transposes in column-major, so the operands swap and
// the operations stay as they are; the bias, one value per column of C, is then one value
// per row of the column-major result, which is what cuBLASLt's epilogue adds.
#include <cuda_bf16.h>

#include <climits>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>

#include "../gemm.hpp"
#include "../gemm_common.hpp"
#include "cuda_check.hpp"
#include "dqntrader/core/error.hpp"
#include "lt_context.hpp"

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

std::int64_t checked(std::size_t value, const char* what) {
  if (value > static_cast<std::size_t>(INT_MAX)) {
    std::ostringstream message;
    message << "gemm: " << what << " = " << value << " exceeds the cuBLAS limit of " << INT_MAX;
    throw InputError(message.str());
  }
  return static_cast<std::int64_t>(value);
}

// The largest power of two (up to 256) dividing the address: what the heuristic's choice
// may depend on.
std::int64_t alignment(const void* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  if (address == 0)
    return 0;
  const std::uintptr_t lowest = address & (~address + 1);
  return static_cast<std::int64_t>(lowest > 256 ? 256 : lowest);
}

cublasLtMatrixLayout_t make_layout(cudaDataType type, std::int64_t rows, std::int64_t cols,
                                   std::int64_t ld, std::int64_t batch, std::int64_t stride) {
  cublasLtMatrixLayout_t layout = nullptr;
  DQNTRADER_CUBLAS(cublasLtMatrixLayoutCreate(&layout, type, static_cast<std::uint64_t>(rows),
                                              static_cast<std::uint64_t>(cols), ld));
  if (batch > 1) {
    const std::int32_t count = static_cast<std::int32_t>(batch);
    DQNTRADER_CUBLAS(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                      &count, sizeof(count)));
    DQNTRADER_CUBLAS(cublasLtMatrixLayoutSetAttribute(
        layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
  }
  return layout;
}

template <class TA, class TC>
void batched(const ExecSpace& space, cublasComputeType_t compute, Op op_a, Op op_b, float alpha,
             const StridedBatch<const TA>& a, const StridedBatch<const TA>& b, float beta,
             const StridedBatch<TC>& c, const Epilogue<TC>& epilogue) {
  const detail::Shape shape = detail::check(op_a, op_b, a, b, c, epilogue);
  if (shape.batch == 0 || shape.m == 0 || shape.n == 0)
    return;
  if (shape.k == 0) {
    detail::scale(space, beta, c, epilogue);
    return;
  }
  const std::int64_t m = checked(shape.m, "m"), n = checked(shape.n, "n"),
                     k = checked(shape.k, "k");
  const std::int64_t batch = checked(shape.batch, "batch");
  // cuBLASLt's A is our B, its B our A, its D our C^T (n x m, column-major).
  const std::int64_t rows_b = op_b == Op::none ? n : k, cols_b = op_b == Op::none ? k : n;
  const std::int64_t rows_a = op_a == Op::none ? k : m, cols_a = op_a == Op::none ? m : k;
  auto ld = [](std::size_t row_stride, std::int64_t rows) {
    return std::max<std::int64_t>(static_cast<std::int64_t>(row_stride),
                                  std::max<std::int64_t>(rows, 1));
  };
  const std::int64_t ld_b = ld(b.stride(1), rows_b), ld_a = ld(a.stride(1), rows_a),
                     ld_c = ld(c.stride(1), n);
  const std::int64_t stride_b = shape.share_b ? 0 : static_cast<std::int64_t>(b.stride(0));
  const std::int64_t stride_a = shape.share_a ? 0 : static_cast<std::int64_t>(a.stride(0));
  const std::int64_t stride_c = static_cast<std::int64_t>(c.stride(0));
  const bool has_bias = epilogue.bias.extent(0) > 0;
  const cublasLtEpilogue_t kind =
      has_bias ? (epilogue.relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS)
               : (epilogue.relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT);
  const void* bias = has_bias ? static_cast<const void*>(epilogue.bias.data()) : nullptr;
  const std::int64_t bias_stride = static_cast<std::int64_t>(epilogue.bias_stride);

  cuda::LtContext& context = cuda::LtContext::instance();
  const cuda::PlanKey key{{vendor_op(op_b),
                           vendor_op(op_a),
                           m,
                           n,
                           k,
                           data_type<TA>(),
                           data_type<TC>(),
                           compute,
                           ld_a,
                           ld_b,
                           ld_c,
                           batch,
                           stride_a,
                           stride_b,
                           stride_c,
                           kind,
                           bias_stride,
                           alignment(a.data()) + 512 * alignment(b.data()),
                           alignment(c.data()),
                           alignment(bias)}};
  cuda::Plan* plan = context.find(key);
  if (plan == nullptr) {
    auto fresh = std::make_unique<cuda::Plan>();
    DQNTRADER_CUBLAS(cublasLtMatmulDescCreate(&fresh->operation, compute, CUDA_R_32F));
    const cublasOperation_t trans_a = vendor_op(op_b), trans_b = vendor_op(op_a);
    DQNTRADER_CUBLAS(cublasLtMatmulDescSetAttribute(fresh->operation, CUBLASLT_MATMUL_DESC_TRANSA,
                                                    &trans_a, sizeof(trans_a)));
    DQNTRADER_CUBLAS(cublasLtMatmulDescSetAttribute(fresh->operation, CUBLASLT_MATMUL_DESC_TRANSB,
                                                    &trans_b, sizeof(trans_b)));
    DQNTRADER_CUBLAS(cublasLtMatmulDescSetAttribute(fresh->operation, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                    &kind, sizeof(kind)));
    if (has_bias) {
      DQNTRADER_CUBLAS(cublasLtMatmulDescSetAttribute(
          fresh->operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
      if (batch > 1) {
        DQNTRADER_CUBLAS(cublasLtMatmulDescSetAttribute(fresh->operation,
                                                        CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE,
                                                        &bias_stride, sizeof(bias_stride)));
      }
    }
    fresh->a = make_layout(data_type<TA>(), rows_b, cols_b, ld_b, batch, stride_b);
    fresh->b = make_layout(data_type<TA>(), rows_a, cols_a, ld_a, batch, stride_a);
    fresh->c = make_layout(data_type<TC>(), n, m, ld_c, batch, stride_c);
    cublasLtMatmulPreference_t preference = nullptr;
    DQNTRADER_CUBLAS(cublasLtMatmulPreferenceCreate(&preference));
    const std::size_t workspace = cuda::LtContext::workspace_bytes;
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t status =
        cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &workspace, sizeof(workspace)) == CUBLAS_STATUS_SUCCESS
            ? cublasLtMatmulAlgoGetHeuristic(context.handle(), fresh->operation, fresh->a, fresh->b,
                                             fresh->c, fresh->c, preference, 1, &result, &found)
            : CUBLAS_STATUS_INVALID_VALUE;
    cublasLtMatmulPreferenceDestroy(preference);
    DQNTRADER_CUBLAS(status);
    if (found == 0) {
      std::ostringstream message;
      message << "cuBLASLt has no algorithm for a " << m << "x" << n << "x" << k
              << " product (batch " << batch << ", epilogue " << static_cast<int>(kind) << ")";
      throw Error(message.str());
    }
    fresh->algo = result.algo;
    plan = &context.insert(key, std::move(fresh));
  }
  if (has_bias) {
    DQNTRADER_CUBLAS(cublasLtMatmulDescSetAttribute(
        plan->operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
  DQNTRADER_CUBLAS(cublasLtMatmul(context.handle(), plan->operation, &alpha, b.data(), plan->a,
                                  a.data(), plan->b, &beta, c.data(), plan->c, c.data(), plan->c,
                                  &plan->algo, context.workspace(space.cuda_stream()),
                                  cuda::LtContext::workspace_bytes, space.cuda_stream()));
}

cublasComputeType_t float_compute(Precision precision) {
  detail::check_float_precision(precision);
  return precision == Precision::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

}  // namespace

void gemm(const ExecSpace& space, Precision precision, Op op_a, Op op_b, float alpha,
          const Matrix<const float>& a, const Matrix<const float>& b, float beta,
          const Matrix<float>& c, const Epilogue<float>& epilogue) {
  batched(space, float_compute(precision), op_a, op_b, alpha, detail::as_batch(a),
          detail::as_batch(b), beta, detail::as_batch(c), epilogue);
}

void gemm(const ExecSpace& space, Op op_a, Op op_b, float alpha, const Matrix<const bf16>& a,
          const Matrix<const bf16>& b, float beta, const Matrix<float>& c,
          const Epilogue<float>& epilogue) {
  batched(space, CUBLAS_COMPUTE_32F, op_a, op_b, alpha, detail::as_batch(a), detail::as_batch(b),
          beta, detail::as_batch(c), epilogue);
}

void gemm(const ExecSpace& space, Op op_a, Op op_b, float alpha, const Matrix<const bf16>& a,
          const Matrix<const bf16>& b, float beta, const Matrix<bf16>& c,
          const Epilogue<bf16>& epilogue) {
  batched(space, CUBLAS_COMPUTE_32F, op_a, op_b, alpha, detail::as_batch(a), detail::as_batch(b),
          beta, detail::as_batch(c), epilogue);
}

void gemm_batched(const ExecSpace& space, Precision precision, Op op_a, Op op_b, float alpha,
                  const StridedBatch<const float>& a, const StridedBatch<const float>& b,
                  float beta, const StridedBatch<float>& c, const Epilogue<float>& epilogue) {
  batched(space, float_compute(precision), op_a, op_b, alpha, a, b, beta, c, epilogue);
}

void gemm_batched(const ExecSpace& space, Op op_a, Op op_b, float alpha,
                  const StridedBatch<const bf16>& a, const StridedBatch<const bf16>& b, float beta,
                  const StridedBatch<float>& c, const Epilogue<float>& epilogue) {
  batched(space, CUBLAS_COMPUTE_32F, op_a, op_b, alpha, a, b, beta, c, epilogue);
}

void gemm_batched(const ExecSpace& space, Op op_a, Op op_b, float alpha,
                  const StridedBatch<const bf16>& a, const StridedBatch<const bf16>& b, float beta,
                  const StridedBatch<bf16>& c, const Epilogue<bf16>& epilogue) {
  batched(space, CUBLAS_COMPUTE_32F, op_a, op_b, alpha, a, b, beta, c, epilogue);
}

std::string library_description() {
  const std::size_t version = cublasLtGetVersion();  // major * 10000 + minor * 100 + patch
  return "cuBLASLt " + std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) +
         "." + std::to_string(version % 100);
}

void route_host_library(char**) {}

const char* backend_name() {
  return "cuda";
}

}  // namespace dqntrader::gemm

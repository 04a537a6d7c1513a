// OpenMP backend: KokkosBlas::gemm, which routes float LayoutRight host views to the BLAS
// library (OpenBLAS) through Kokkos Kernels' TPL layer, then the epilogue as one pass (or,
// for a result computed in scratch, on its way back).
// There are no TF32 or bf16 units on the host: tf32 computes in fp32, and bf16 operands
// are widened (exactly) to float scratch matrices first; so are matrices whose rows have a
// gap after them (a row stride longer than a row), which LayoutRight views cannot express.
#define DQNTRADER_COMPAT_KOKKOS_BLAS
#include "dqntrader/core/kokkos_compat.hpp"

#include <string>

#include "../gemm.hpp"
#include "../gemm_common.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/core/for_each_cell.hpp"

namespace dqntrader::gemm {

namespace {

using Contiguous = Kokkos::View<float**, Kokkos::LayoutRight, DeviceMemory,
                                Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
using ContiguousConst = Kokkos::View<const float**, Kokkos::LayoutRight, DeviceMemory,
                                     Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

const char* trans(Op op) {
  return op == Op::none ? "N" : "T";
}

// The BLAS reads matrices in place when they are float and packed (no gap between rows);
// others go through a float scratch matrix.
template <class T>
bool in_place(const StridedBatch<T>& x) {
  return std::is_same<typename StridedBatch<T>::non_const_value_type, float>::value &&
         (x.extent(1) <= 1 || x.stride(1) == x.extent(2));
}

template <class T>
Matrix<float> scratch_for(const ExecSpace& space, const StridedBatch<T>& x, const char* label) {
  if (in_place(x))
    return Matrix<float>();
  return Matrix<float>(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string(label)),
                       x.extent(1), x.extent(2));
}

// Matrix i of a batch (matrix 0 when the batch extent is 1) as a packed float view: itself,
// or copied into scratch (bf16 widened exactly, rows packed).
template <class T>
ContiguousConst item(const ExecSpace& space, const StridedBatch<const T>& x, std::size_t i,
                     const Matrix<float>& scratch) {
  const std::size_t index = x.extent(0) == 1 ? 0 : i;
  const T* source = x.data() + index * x.stride(0);
  const std::size_t rows = x.extent(1), cols = x.extent(2), ld = x.stride(1);
  if constexpr (std::is_same<T, float>::value) {
    if (scratch.extent(0) == 0)
      return ContiguousConst(source, rows, cols);
  }
  for_each_cell(
      "dqntrader::gemm::openmp::pack", space, rows, cols,
      KOKKOS_LAMBDA(const std::size_t r, const std::size_t col) {
        scratch(r, col) = to_float(source[r * ld + col]);
      });
  return ContiguousConst(scratch.data(), rows, cols);
}

template <class TA, class TC>
void batched(const ExecSpace& space, Op op_a, Op op_b, float alpha, const StridedBatch<const TA>& a,
             const StridedBatch<const TA>& b, float beta, const StridedBatch<TC>& c,
             const Epilogue<TC>& epilogue) {
  const detail::Shape shape = detail::check(op_a, op_b, a, b, c, epilogue);
  if (shape.batch == 0 || shape.m == 0 || shape.n == 0)
    return;
  if (shape.k == 0) {
    detail::scale(space, beta, c, epilogue);
    return;
  }
  const Matrix<float> a_wide = scratch_for(space, a, "dqntrader::gemm::a_wide");
  const Matrix<float> b_wide = scratch_for(space, b, "dqntrader::gemm::b_wide");
  const Matrix<float> c_wide = scratch_for(space, c, "dqntrader::gemm::c_wide");
  for (std::size_t i = 0; i < shape.batch; ++i) {
    // A shared operand goes through scratch once.
    const ContiguousConst ai = (i > 0 && shape.share_a && a_wide.extent(0) > 0)
                                   ? ContiguousConst(a_wide.data(), a.extent(1), a.extent(2))
                                   : item(space, a, i, a_wide);
    const ContiguousConst bi = (i > 0 && shape.share_b && b_wide.extent(0) > 0)
                                   ? ContiguousConst(b_wide.data(), b.extent(1), b.extent(2))
                                   : item(space, b, i, b_wide);
    TC* ci = c.data() + i * c.stride(0);
    if constexpr (std::is_same<TC, float>::value) {
      if (c_wide.extent(0) == 0) {
        compat::blas_gemm(space, trans(op_a), trans(op_b), alpha, ai, bi, beta,
                          Contiguous(ci, shape.m, shape.n));
        continue;
      }
    }
    const std::size_t ld = c.stride(1);
    const Matrix<float> wide = c_wide;
    if (beta != 0.0f) {
      for_each_cell(
          "dqntrader::gemm::openmp::widen_c", space, shape.m, shape.n,
          KOKKOS_LAMBDA(const std::size_t r, const std::size_t col) {
            wide(r, col) = to_float(ci[r * ld + col]);
          });
    }
    compat::blas_gemm(space, trans(op_a), trans(op_b), alpha, ai, bi, beta,
                      Contiguous(wide.data(), shape.m, shape.n));
    // Back into C with the epilogue on the way (one pass, one rounding).
    const TC* bias =
        epilogue.bias.extent(0) > 0 ? epilogue.bias.data() + i * epilogue.bias_stride : nullptr;
    const bool relu = epilogue.relu;
    for_each_cell(
        "dqntrader::gemm::openmp::unpack_c", space, shape.m, shape.n,
        KOKKOS_LAMBDA(const std::size_t r, const std::size_t col) {
          float v = wide(r, col);
          if (bias != nullptr)
            v += to_float(bias[col]);
          if (relu && !(v > 0.0f))
            v = 0.0f;
          store(ci[r * ld + col], v);
        });
  }
  if (c_wide.extent(0) == 0)
    detail::apply_epilogue(space, c, epilogue);
}

}  // namespace

void gemm(const ExecSpace& space, Precision precision, Op op_a, Op op_b, float alpha,
          const Matrix<const float>& a, const Matrix<const float>& b, float beta,
          const Matrix<float>& c, const Epilogue<float>& epilogue) {
  detail::check_float_precision(precision);
  batched(space, op_a, op_b, alpha, detail::as_batch(a), detail::as_batch(b), beta,
          detail::as_batch(c), epilogue);
}

void gemm(const ExecSpace& space, Op op_a, Op op_b, float alpha, const Matrix<const bf16>& a,
          const Matrix<const bf16>& b, float beta, const Matrix<float>& c,
          const Epilogue<float>& epilogue) {
  batched(space, op_a, op_b, alpha, detail::as_batch(a), detail::as_batch(b), beta,
          detail::as_batch(c), epilogue);
}

void gemm(const ExecSpace& space, Op op_a, Op op_b, float alpha, const Matrix<const bf16>& a,
          const Matrix<const bf16>& b, float beta, const Matrix<bf16>& c,
          const Epilogue<bf16>& epilogue) {
  batched(space, op_a, op_b, alpha, detail::as_batch(a), detail::as_batch(b), beta,
          detail::as_batch(c), epilogue);
}

void gemm_batched(const ExecSpace& space, Precision precision, Op op_a, Op op_b, float alpha,
                  const StridedBatch<const float>& a, const StridedBatch<const float>& b,
                  float beta, const StridedBatch<float>& c, const Epilogue<float>& epilogue) {
  detail::check_float_precision(precision);
  batched(space, op_a, op_b, alpha, a, b, beta, c, epilogue);
}

void gemm_batched(const ExecSpace& space, Op op_a, Op op_b, float alpha,
                  const StridedBatch<const bf16>& a, const StridedBatch<const bf16>& b, float beta,
                  const StridedBatch<float>& c, const Epilogue<float>& epilogue) {
  batched(space, op_a, op_b, alpha, a, b, beta, c, epilogue);
}

void gemm_batched(const ExecSpace& space, Op op_a, Op op_b, float alpha,
                  const StridedBatch<const bf16>& a, const StridedBatch<const bf16>& b, float beta,
                  const StridedBatch<bf16>& c, const Epilogue<bf16>& epilogue) {
  batched(space, op_a, op_b, alpha, a, b, beta, c, epilogue);
}

const char* backend_name() {
  return "openmp";
}

}  // namespace dqntrader::gemm

// OpenMP backend: KokkosBlas::gemm, which routes float LayoutRight host views to the BLAS
// library (OpenBLAS) through Kokkos Kernels' TPL layer, then the epilogue as one pass.
// There are no TF32 or bf16 units on the host: tf32 computes in fp32, and bf16 operands
// are widened (exactly) to float scratch matrices first.
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

// The BLAS sees matrices with contiguous rows and no gaps between them.
template <class T>
void check_packed(const StridedBatch<T>& x) {
  if (x.extent(1) > 1 && x.stride(1) != x.extent(2)) {
    throw InputError(
        "gemm (OpenMP backend): matrices must be packed, rows exactly as long as the row stride");
  }
}

// Matrix i of a batch (matrix 0 when the batch extent is 1) as a float view; bf16 is
// widened into scratch.
ContiguousConst item(const ExecSpace&, const StridedBatch<const float>& x, std::size_t i,
                     const Matrix<float>&) {
  const std::size_t index = x.extent(0) == 1 ? 0 : i;
  return ContiguousConst(x.data() + index * x.stride(0), x.extent(1), x.extent(2));
}

ContiguousConst item(const ExecSpace& space, const StridedBatch<const bf16>& x, std::size_t i,
                     const Matrix<float>& scratch) {
  const std::size_t index = x.extent(0) == 1 ? 0 : i;
  const bf16* source = x.data() + index * x.stride(0);
  const std::size_t cols = x.extent(2);
  for_each_cell(
      "dqntrader::gemm::openmp::widen_bf16", space, x.extent(1), cols,
      KOKKOS_LAMBDA(const std::size_t r, const std::size_t col) {
        scratch(r, col) = to_float(source[r * cols + col]);
      });
  return ContiguousConst(scratch.data(), x.extent(1), cols);
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
  check_packed(a);
  check_packed(b);
  check_packed(c);
  constexpr bool widened = std::is_same<TA, bf16>::value;
  Matrix<float> a_wide, b_wide, c_wide;
  if (widened) {
    a_wide = Matrix<float>(Kokkos::view_alloc(space, Kokkos::WithoutInitializing,
                                              std::string("dqntrader::gemm::a_wide")),
                           a.extent(1), a.extent(2));
    b_wide = Matrix<float>(Kokkos::view_alloc(space, Kokkos::WithoutInitializing,
                                              std::string("dqntrader::gemm::b_wide")),
                           b.extent(1), b.extent(2));
  }
  if (!std::is_same<TC, float>::value) {
    c_wide = Matrix<float>(Kokkos::view_alloc(space, Kokkos::WithoutInitializing,
                                              std::string("dqntrader::gemm::c_wide")),
                           shape.m, shape.n);
  }
  for (std::size_t i = 0; i < shape.batch; ++i) {
    // A shared operand is widened once.
    const ContiguousConst ai = (i > 0 && shape.share_a && widened)
                                   ? ContiguousConst(a_wide.data(), a.extent(1), a.extent(2))
                                   : item(space, a, i, a_wide);
    const ContiguousConst bi = (i > 0 && shape.share_b && widened)
                                   ? ContiguousConst(b_wide.data(), b.extent(1), b.extent(2))
                                   : item(space, b, i, b_wide);
    TC* ci = c.data() + i * c.stride(0);
    if constexpr (std::is_same<TC, float>::value) {
      compat::blas_gemm(space, trans(op_a), trans(op_b), alpha, ai, bi, beta,
                        Contiguous(ci, shape.m, shape.n));
    } else {
      const std::size_t n = shape.n;
      const Matrix<float> wide = c_wide;
      if (beta != 0.0f) {
        for_each_cell(
            "dqntrader::gemm::openmp::widen_c", space, shape.m, n,
            KOKKOS_LAMBDA(const std::size_t r, const std::size_t col) {
              wide(r, col) = to_float(ci[r * n + col]);
            });
      }
      compat::blas_gemm(space, trans(op_a), trans(op_b), alpha, ai, bi, beta,
                        Contiguous(wide.data(), shape.m, n));
      for_each_cell(
          "dqntrader::gemm::openmp::narrow_c", space, shape.m, n,
          KOKKOS_LAMBDA(const std::size_t r, const std::size_t col) {
            store(ci[r * n + col], wide(r, col));
          });
    }
  }
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

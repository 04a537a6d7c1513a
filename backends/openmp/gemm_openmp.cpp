// OpenMP backend: KokkosBlas::gemm, which routes float LayoutRight host views to the BLAS
// library (OpenBLAS) through Kokkos Kernels' TPL layer. There are no TF32 or bf16 units on
// the host: tf32 computes in fp32, and bf16 operands are widened (exactly) to float
// scratch matrices first.
#define DQNTRADER_COMPAT_KOKKOS_BLAS
#include "dqntrader/core/kokkos_compat.hpp"

#include <string>

#include "../gemm.hpp"
#include "../gemm_common.hpp"

namespace dqntrader::gemm {

namespace {

const char* trans(Op op) {
  return op == Op::none ? "N" : "T";
}

Matrix<float> widen(const ExecSpace& space, const Matrix<const bf16>& x, const char* label) {
  Matrix<float> wide(Kokkos::view_alloc(space, Kokkos::WithoutInitializing, std::string(label)),
                     x.extent(0), x.extent(1));
  Kokkos::parallel_for(
      "dqntrader::gemm::openmp::widen_bf16",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>(space, {0, 0}, {x.extent(0), x.extent(1)}),
      KOKKOS_LAMBDA(const int i, const int j) { wide(i, j) = to_float(x(i, j)); });
  return wide;
}

void narrow(const ExecSpace& space, const Matrix<const float>& x, const Matrix<bf16>& y) {
  Kokkos::parallel_for(
      "dqntrader::gemm::openmp::narrow_to_bf16",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>(space, {0, 0}, {x.extent(0), x.extent(1)}),
      KOKKOS_LAMBDA(const int i, const int j) { y(i, j) = to_bf16(x(i, j)); });
}

void float_gemm(const ExecSpace& space, Op op_a, Op op_b, float alpha, const Matrix<const float>& a,
                const Matrix<const float>& b, float beta, const Matrix<float>& c) {
  const detail::Shape shape = detail::check_shape(op_a, op_b, a, b, c);
  if (shape.m == 0 || shape.n == 0)
    return;
  if (shape.k == 0) {
    detail::scale(space, beta, c);
    return;
  }
  compat::blas_gemm(space, trans(op_a), trans(op_b), alpha, a, b, beta, c);
}

void bf16_gemm(const ExecSpace& space, Op op_a, Op op_b, float alpha, const Matrix<const bf16>& a,
               const Matrix<const bf16>& b, float beta, const Matrix<float>& c) {
  detail::check_shape(op_a, op_b, a, b, c);
  float_gemm(space, op_a, op_b, alpha, widen(space, a, "dqntrader::gemm::openmp::a_wide"),
             widen(space, b, "dqntrader::gemm::openmp::b_wide"), beta, c);
}

void bf16_gemm(const ExecSpace& space, Op op_a, Op op_b, float alpha, const Matrix<const bf16>& a,
               const Matrix<const bf16>& b, float beta, const Matrix<bf16>& c) {
  detail::check_shape(op_a, op_b, a, b, c);
  Matrix<float> c_wide = widen(space, c, "dqntrader::gemm::openmp::c_wide");
  bf16_gemm(space, op_a, op_b, alpha, a, b, beta, c_wide);
  narrow(space, c_wide, c);
}

template <class T>
auto item(const MatrixBatch<T>& x, std::size_t i) {
  return Kokkos::subview(x, x.extent(0) == 1 ? 0 : i, Kokkos::ALL, Kokkos::ALL);
}

template <class TA, class TC, class Product>
void for_each_product(Op op_a, Op op_b, const MatrixBatch<const TA>& a,
                      const MatrixBatch<const TA>& b, const MatrixBatch<TC>& c,
                      const Product& product) {
  const detail::Shape shape = detail::check_batched_shape(op_a, op_b, a, b, c);
  for (std::size_t i = 0; i < shape.batch; ++i) {
    product(Matrix<const TA>(item(a, i)), Matrix<const TA>(item(b, i)), Matrix<TC>(item(c, i)));
  }
}

}  // namespace

void gemm(const ExecSpace& space, Precision precision, Op op_a, Op op_b, float alpha,
          const Matrix<const float>& a, const Matrix<const float>& b, float beta,
          const Matrix<float>& c) {
  detail::check_float_precision(precision);
  float_gemm(space, op_a, op_b, alpha, a, b, beta, c);
}

void gemm(const ExecSpace& space, Op op_a, Op op_b, float alpha, const Matrix<const bf16>& a,
          const Matrix<const bf16>& b, float beta, const Matrix<float>& c) {
  bf16_gemm(space, op_a, op_b, alpha, a, b, beta, c);
}

void gemm(const ExecSpace& space, Op op_a, Op op_b, float alpha, const Matrix<const bf16>& a,
          const Matrix<const bf16>& b, float beta, const Matrix<bf16>& c) {
  bf16_gemm(space, op_a, op_b, alpha, a, b, beta, c);
}

void gemm_batched(const ExecSpace& space, Precision precision, Op op_a, Op op_b, float alpha,
                  const MatrixBatch<const float>& a, const MatrixBatch<const float>& b, float beta,
                  const MatrixBatch<float>& c) {
  detail::check_float_precision(precision);
  for_each_product(op_a, op_b, a, b, c, [&](const auto& ai, const auto& bi, const auto& ci) {
    float_gemm(space, op_a, op_b, alpha, ai, bi, beta, ci);
  });
}

void gemm_batched(const ExecSpace& space, Op op_a, Op op_b, float alpha,
                  const MatrixBatch<const bf16>& a, const MatrixBatch<const bf16>& b, float beta,
                  const MatrixBatch<float>& c) {
  for_each_product(op_a, op_b, a, b, c, [&](const auto& ai, const auto& bi, const auto& ci) {
    bf16_gemm(space, op_a, op_b, alpha, ai, bi, beta, ci);
  });
}

void gemm_batched(const ExecSpace& space, Op op_a, Op op_b, float alpha,
                  const MatrixBatch<const bf16>& a, const MatrixBatch<const bf16>& b, float beta,
                  const MatrixBatch<bf16>& c) {
  for_each_product(op_a, op_b, a, b, c, [&](const auto& ai, const auto& bi, const auto& ci) {
    bf16_gemm(space, op_a, op_b, alpha, ai, bi, beta, ci);
  });
}

const char* backend_name() {
  return "openmp";
}

}  // namespace dqntrader::gemm

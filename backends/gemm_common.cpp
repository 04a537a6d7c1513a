#include "gemm_common.hpp"

#include <sstream>
#include <string>

#include "dqntrader/core/error.hpp"

namespace dqntrader::gemm::detail {

namespace {
const char* op_name(Op op) {
  return op == Op::none ? "N" : "T";
}
}  // namespace

Shape check_shape(Op op_a, Op op_b, std::size_t a_rows, std::size_t a_cols, std::size_t b_rows,
                  std::size_t b_cols, std::size_t c_rows, std::size_t c_cols) {
  const std::size_t m = op_a == Op::none ? a_rows : a_cols;
  const std::size_t k = op_a == Op::none ? a_cols : a_rows;
  const std::size_t k_b = op_b == Op::none ? b_rows : b_cols;
  const std::size_t n = op_b == Op::none ? b_cols : b_rows;
  if (k != k_b || m != c_rows || n != c_cols) {
    std::ostringstream message;
    message << "gemm: shapes do not match: op_a=" << op_name(op_a) << " A is " << a_rows << "x"
            << a_cols << ", op_b=" << op_name(op_b) << " B is " << b_rows << "x" << b_cols
            << ", C is " << c_rows << "x" << c_cols;
    throw InputError(message.str());
  }
  return Shape{m, n, k, 1, false, false};
}

Shape check_batched_shape(Op op_a, Op op_b, std::size_t a_batch, std::size_t a_rows,
                          std::size_t a_cols, std::size_t b_batch, std::size_t b_rows,
                          std::size_t b_cols, std::size_t c_batch, std::size_t c_rows,
                          std::size_t c_cols) {
  Shape shape = check_shape(op_a, op_b, a_rows, a_cols, b_rows, b_cols, c_rows, c_cols);
  if ((a_batch != c_batch && a_batch != 1) || (b_batch != c_batch && b_batch != 1)) {
    std::ostringstream message;
    message << "gemm_batched: batch extents do not match: A has " << a_batch << ", B has "
            << b_batch << ", C has " << c_batch << " (an operand's must be C's or 1)";
    throw InputError(message.str());
  }
  shape.batch = c_batch;
  shape.share_a = a_batch == 1 && c_batch != 1;
  shape.share_b = b_batch == 1 && c_batch != 1;
  return shape;
}

void check_float_precision(Precision precision) {
  if (precision == Precision::bf16) {
    throw InputError("gemm: precision bf16 takes bf16 operands; float operands take fp32 or tf32");
  }
}

namespace {
template <class T>
void scale_matrix(const ExecSpace& space, float beta, const Matrix<T>& c) {
  Kokkos::parallel_for(
      "dqntrader::gemm::scale",
      Kokkos::MDRangePolicy<ExecSpace, Kokkos::Rank<2>>(space, {0, 0}, {c.extent(0), c.extent(1)}),
      KOKKOS_LAMBDA(const int i, const int j) {
        store(c(i, j), beta == 0.0f ? 0.0f : beta * to_float(c(i, j)));
      });
}
}  // namespace

void scale(const ExecSpace& space, float beta, const Matrix<float>& c) {
  scale_matrix(space, beta, c);
}

void scale(const ExecSpace& space, float beta, const Matrix<bf16>& c) {
  scale_matrix(space, beta, c);
}

}  // namespace dqntrader::gemm::detail

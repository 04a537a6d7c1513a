// Shape checks and the degenerate-product kernel shared by the backends (internal to
// backends/).
#pragma once

#include <cstddef>

#include "gemm.hpp"

namespace dqntrader::gemm::detail {

struct Shape {
  std::size_t m, n, k;    // op(A) is m x k, op(B) is k x n, C is m x n
  std::size_t batch;      // number of products (1 for a single product)
  bool share_a, share_b;  // the operand's batch extent is 1 and serves every product
};

/// Checks the extents of one product; throws InputError naming them on a mismatch.
Shape check_shape(Op op_a, Op op_b, std::size_t a_rows, std::size_t a_cols, std::size_t b_rows,
                  std::size_t b_cols, std::size_t c_rows, std::size_t c_cols);

/// Checks a strided batch: every operand's batch extent is C's or 1.
Shape check_batched_shape(Op op_a, Op op_b, std::size_t a_batch, std::size_t a_rows,
                          std::size_t a_cols, std::size_t b_batch, std::size_t b_rows,
                          std::size_t b_cols, std::size_t c_batch, std::size_t c_rows,
                          std::size_t c_cols);

template <class A, class B, class C>
Shape check_shape(Op op_a, Op op_b, const A& a, const B& b, const C& c) {
  return check_shape(op_a, op_b, a.extent(0), a.extent(1), b.extent(0), b.extent(1), c.extent(0),
                     c.extent(1));
}

template <class A, class B, class C>
Shape check_batched_shape(Op op_a, Op op_b, const A& a, const B& b, const C& c) {
  return check_batched_shape(op_a, op_b, a.extent(0), a.extent(1), a.extent(2), b.extent(0),
                             b.extent(1), b.extent(2), c.extent(0), c.extent(1), c.extent(2));
}

/// Throws InputError unless precision is fp32 or tf32 (the float-operand modes).
void check_float_precision(Precision precision);

/// C = beta * C (C = 0 when beta is 0, whatever C held): the whole product when k = 0,
/// which vendor libraries treat inconsistently.
void scale(const ExecSpace& space, float beta, const Matrix<float>& c);
void scale(const ExecSpace& space, float beta, const Matrix<bf16>& c);

}  // namespace dqntrader::gemm::detail

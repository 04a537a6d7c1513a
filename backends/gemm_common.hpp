// Shape checks and the elementwise kernels shared by the backends (internal to backends/).
#pragma once

#include <cstddef>

#include "gemm.hpp"

namespace dqntrader::gemm::detail {

struct Shape {
  std::size_t m, n, k;    // op(A) is m x k, op(B) is k x n, C is m x n
  std::size_t batch;      // number of products
  bool share_a, share_b;  // the operand's batch extent is 1 and serves every product
};

/// A matrix as a batch of one.
template <class T>
StridedBatch<T> as_batch(const Matrix<T>& x) {
  const Kokkos::LayoutStride layout(1, x.extent(0) * x.extent(1), x.extent(0), x.stride(0),
                                    x.extent(1), 1);
  return StridedBatch<T>(x.data(), layout);
}

/// Checks extents, that rows are contiguous, that batch extents are C's or 1, and that the
/// bias covers every product; throws InputError naming what is wrong.
template <class TA, class TC>
Shape check(Op op_a, Op op_b, const StridedBatch<const TA>& a, const StridedBatch<const TA>& b,
            const StridedBatch<TC>& c, const Epilogue<TC>& epilogue);

/// Throws InputError unless precision is fp32 or tf32 (the float-operand modes).
void check_float_precision(Precision precision);

/// C = epilogue(beta * C) (beta 0 writes 0 whatever C held): the whole product when k = 0,
/// which vendor libraries treat inconsistently.
template <class T>
void scale(const ExecSpace& space, float beta, const StridedBatch<T>& c,
           const Epilogue<T>& epilogue);

/// C = epilogue(C): the epilogue as a pass of its own (the OpenMP backend).
template <class T>
void apply_epilogue(const ExecSpace& space, const StridedBatch<T>& c, const Epilogue<T>& epilogue);

}  // namespace dqntrader::gemm::detail

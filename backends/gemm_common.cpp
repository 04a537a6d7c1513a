#include "gemm_common.hpp"

#include <sstream>
#include <string>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/for_each_cell.hpp"

namespace dqntrader::gemm::detail {

namespace {
const char* op_name(Op op) {
  return op == Op::none ? "N" : "T";
}
}  // namespace

template <class TA, class TC>
Shape check(Op op_a, Op op_b, const StridedBatch<const TA>& a, const StridedBatch<const TA>& b,
            const StridedBatch<TC>& c, const Epilogue<TC>& epilogue) {
  const std::size_t m = op_a == Op::none ? a.extent(1) : a.extent(2);
  const std::size_t k = op_a == Op::none ? a.extent(2) : a.extent(1);
  const std::size_t k_b = op_b == Op::none ? b.extent(1) : b.extent(2);
  const std::size_t n = op_b == Op::none ? b.extent(2) : b.extent(1);
  if (k != k_b || m != c.extent(1) || n != c.extent(2)) {
    std::ostringstream message;
    message << "gemm: shapes do not match: op_a=" << op_name(op_a) << " A is " << a.extent(1) << "x"
            << a.extent(2) << ", op_b=" << op_name(op_b) << " B is " << b.extent(1) << "x"
            << b.extent(2) << ", C is " << c.extent(1) << "x" << c.extent(2);
    throw InputError(message.str());
  }
  const std::size_t batch = c.extent(0);
  if ((a.extent(0) != batch && a.extent(0) != 1) || (b.extent(0) != batch && b.extent(0) != 1)) {
    std::ostringstream message;
    message << "gemm_batched: batch extents do not match: A has " << a.extent(0) << ", B has "
            << b.extent(0) << ", C has " << batch << " (an operand's must be C's or 1)";
    throw InputError(message.str());
  }
  if ((a.extent(2) > 1 && a.stride(2) != 1) || (b.extent(2) > 1 && b.stride(2) != 1) ||
      (c.extent(2) > 1 && c.stride(2) != 1)) {
    throw InputError("gemm: matrix rows must be contiguous");
  }
  if (epilogue.bias.extent(0) > 0 && batch > 0 &&
      epilogue.bias.extent(0) < (batch - 1) * epilogue.bias_stride + n) {
    std::ostringstream message;
    message << "gemm: the bias holds " << epilogue.bias.extent(0) << " values, " << batch
            << " products of " << n << " columns with bias stride " << epilogue.bias_stride
            << " need " << (batch - 1) * epilogue.bias_stride + n;
    throw InputError(message.str());
  }
  return Shape{m, n, k, batch, a.extent(0) == 1 && batch != 1, b.extent(0) == 1 && batch != 1};
}

void check_float_precision(Precision precision) {
  if (precision == Precision::bf16) {
    throw InputError("gemm: precision bf16 takes bf16 operands; float operands take fp32 or tf32");
  }
}

namespace {

// c = relu?(bias? + (scale? beta * c : c)), the flags fixed at compile time so that the
// inner loop is branch-free.
template <class T, bool Scale, bool Bias, bool Relu>
void transform(const char* label, const ExecSpace& space, const StridedBatch<T>& c,
               const Epilogue<T>& epilogue, float beta) {
  T* const data = c.data();
  const std::size_t rows = c.extent(1), matrix_stride = c.stride(0), row_stride = c.stride(1);
  const T* const bias = epilogue.bias.data();
  const std::size_t bias_stride = epilogue.bias_stride;
  for_each_cell(
      label, space, c.extent(0) * rows, c.extent(2),
      KOKKOS_LAMBDA(const std::size_t flat_row, const std::size_t j) {
        const std::size_t p = flat_row / rows, i = flat_row - p * rows;
        T& cell = data[p * matrix_stride + i * row_stride + j];
        float v = to_float(cell);
        if (Scale)
          v = beta == 0.0f ? 0.0f : beta * v;
        if (Bias)
          v += to_float(bias[p * bias_stride + j]);
        if (Relu)
          v = v > 0.0f ? v : 0.0f;
        store(cell, v);
      });
}

template <class T, bool Scale>
void transform(const char* label, const ExecSpace& space, const StridedBatch<T>& c,
               const Epilogue<T>& epilogue, float beta) {
  const bool bias = epilogue.bias.extent(0) > 0;
  if (bias && epilogue.relu)
    transform<T, Scale, true, true>(label, space, c, epilogue, beta);
  if (bias && !epilogue.relu)
    transform<T, Scale, true, false>(label, space, c, epilogue, beta);
  if (!bias && epilogue.relu)
    transform<T, Scale, false, true>(label, space, c, epilogue, beta);
  if (!bias && !epilogue.relu)
    transform<T, Scale, false, false>(label, space, c, epilogue, beta);
}

}  // namespace

template <class T>
void scale(const ExecSpace& space, float beta, const StridedBatch<T>& c,
           const Epilogue<T>& epilogue) {
  transform<T, true>("dqntrader::gemm::scale", space, c, epilogue, beta);
}

template <class T>
void apply_epilogue(const ExecSpace& space, const StridedBatch<T>& c, const Epilogue<T>& epilogue) {
  if (epilogue.bias.extent(0) == 0 && !epilogue.relu)
    return;
  transform<T, false>("dqntrader::gemm::epilogue", space, c, epilogue, 1.0f);
}

template Shape check<float, float>(Op, Op, const StridedBatch<const float>&,
                                   const StridedBatch<const float>&, const StridedBatch<float>&,
                                   const Epilogue<float>&);
template Shape check<bf16, float>(Op, Op, const StridedBatch<const bf16>&,
                                  const StridedBatch<const bf16>&, const StridedBatch<float>&,
                                  const Epilogue<float>&);
template Shape check<bf16, bf16>(Op, Op, const StridedBatch<const bf16>&,
                                 const StridedBatch<const bf16>&, const StridedBatch<bf16>&,
                                 const Epilogue<bf16>&);
template void scale<float>(const ExecSpace&, float, const StridedBatch<float>&,
                           const Epilogue<float>&);
template void scale<bf16>(const ExecSpace&, float, const StridedBatch<bf16>&,
                          const Epilogue<bf16>&);
template void apply_epilogue<float>(const ExecSpace&, const StridedBatch<float>&,
                                    const Epilogue<float>&);
template void apply_epilogue<bf16>(const ExecSpace&, const StridedBatch<bf16>&,
                                   const Epilogue<bf16>&);

}  // namespace dqntrader::gemm::detail

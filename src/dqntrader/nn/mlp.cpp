#include "dqntrader/nn/mlp.hpp"

#include <string>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/for_each_cell.hpp"

namespace dqntrader::nn {

namespace {

using gemm::Op;

template <class T>
Matrix<const T> block(const Kokkos::View<const T*, DeviceMemory>& flat, const Tensor& t) {
  return Matrix<const T>(flat.data() + t.offset, t.rows, t.cols);
}

template <class T>
Kokkos::View<const T*, DeviceMemory> vector_of(const Kokkos::View<const T*, DeviceMemory>& flat,
                                               const Tensor& t) {
  return Kokkos::View<const T*, DeviceMemory>(flat.data() + t.offset, t.size());
}

template <class T>
Matrix<T> first_rows(const Matrix<T>& m, std::size_t rows) {
  return Matrix<T>(m.data(), rows, m.extent(1));
}

// q[r][a] = o[r][0] + o[r][1 + a] - mean_b o[r][1 + b]
void combine_dueling(const ExecSpace& space, const Matrix<const float>& o, const Matrix<float>& q,
                     std::size_t rows) {
  const std::size_t actions = q.extent(1);
  Kokkos::parallel_for(
      "dqntrader::nn::combine_dueling", Kokkos::RangePolicy<ExecSpace>(space, 0, rows),
      KOKKOS_LAMBDA(const std::size_t r) {
        float mean = 0.0f;
        for (std::size_t a = 0; a < actions; ++a)
          mean += o(r, 1 + a);
        mean /= static_cast<float>(actions);
        for (std::size_t a = 0; a < actions; ++a)
          q(r, a) = o(r, 0) + o(r, 1 + a) - mean;
      });
}

// The gradient through the dueling combination: dO_0 = sum_a dq_a, dO_{1+a} = dq_a - mean(dq).
void dueling_backward(const ExecSpace& space, const Matrix<const float>& dq,
                      const Matrix<float>& d_out, std::size_t rows) {
  const std::size_t actions = dq.extent(1);
  Kokkos::parallel_for(
      "dqntrader::nn::dueling_backward", Kokkos::RangePolicy<ExecSpace>(space, 0, rows),
      KOKKOS_LAMBDA(const std::size_t r) {
        float sum = 0.0f;
        for (std::size_t a = 0; a < actions; ++a)
          sum += dq(r, a);
        d_out(r, 0) = sum;
        for (std::size_t a = 0; a < actions; ++a)
          d_out(r, 1 + a) = dq(r, a) - sum / static_cast<float>(actions);
      });
}

// bias_grad[j] = sum over rows of x[r][j] (float accumulation, a fixed order per column).
template <class T>
void column_sums(const ExecSpace& space, const Matrix<const T>& x, std::size_t rows,
                 float* bias_grad) {
  using Member = Kokkos::TeamPolicy<ExecSpace>::member_type;
  const std::size_t cols = x.extent(1);
#if defined(DQNTRADER_BACKEND_CUDA)
  const int team = 128;
#else
  const int team = 1;
#endif
  Kokkos::parallel_for(
      "dqntrader::nn::column_sums",
      Kokkos::TeamPolicy<ExecSpace>(space, static_cast<int>(cols), team),
      KOKKOS_LAMBDA(const Member& member) {
        const std::size_t j = static_cast<std::size_t>(member.league_rank());
        float sum = 0.0f;
        Kokkos::parallel_reduce(
            Kokkos::TeamThreadRange(member, rows),
            [&](const std::size_t r, float& partial) { partial += to_float(x(r, j)); }, sum);
        Kokkos::single(Kokkos::PerTeam(member), [&]() { bias_grad[j] = sum; });
      });
}

// dz = dh * (h > 0) in place, and the bias gradient: its column sums.
template <class T>
void relu_backward(const ExecSpace& space, const Matrix<const T>& h, const Matrix<T>& dh,
                   std::size_t rows, float* bias_grad) {
  for_each_cell(
      "dqntrader::nn::relu_mask", space, rows, dh.extent(1),
      KOKKOS_LAMBDA(const std::size_t r, const std::size_t j) {
        if (!(to_float(h(r, j)) > 0.0f))
          store(dh(r, j), 0.0f);
      });
  column_sums(space, Matrix<const T>(dh.data(), rows, dh.extent(1)), rows, bias_grad);
}

template <class T>
void convert(const ExecSpace& space, const Matrix<const float>& from, const Matrix<T>& to,
             std::size_t rows) {
  for_each_cell(
      "dqntrader::nn::convert", space, rows, from.extent(1),
      KOKKOS_LAMBDA(const std::size_t r, const std::size_t j) { store(to(r, j), from(r, j)); });
}

}  // namespace

template <class T>
Mlp<T>::Mlp(const ExecSpace& space, const NetworkSpec& spec, Precision precision,
            std::size_t max_rows)
    : m_layout(spec), m_precision(precision), m_max_rows(max_rows) {
  if ((precision == Precision::bf16) != std::is_same<T, bf16>::value) {
    throw InputError(std::string("the network's storage does not match precision ") +
                     to_string(precision));
  }
  m_head_width = spec.dueling ? spec.actions + 1 : spec.actions;
  std::size_t widest = spec.state_size();
  for (std::size_t w : spec.hidden) {
    m_hidden.push_back(
        Matrix<T>(Kokkos::view_alloc(space, std::string("dqntrader::nn::hidden")), max_rows, w));
    widest = std::max(widest, w);
  }
  m_head_out = Matrix<float>(Kokkos::view_alloc(space, std::string("dqntrader::nn::head_out")),
                             max_rows, m_head_width);
  m_head_grad = Matrix<float>(Kokkos::view_alloc(space, std::string("dqntrader::nn::head_grad")),
                              max_rows, m_head_width);
  m_head_grad_t = Matrix<T>(Kokkos::view_alloc(space, std::string("dqntrader::nn::head_grad_t")),
                            max_rows, m_head_width);
  m_grad_a =
      Matrix<T>(Kokkos::view_alloc(space, std::string("dqntrader::nn::grad_a")), max_rows, widest);
  m_grad_b =
      Matrix<T>(Kokkos::view_alloc(space, std::string("dqntrader::nn::grad_b")), max_rows, widest);
}

template <class T>
template <class TC>
void Mlp<T>::product(const ExecSpace& space, Op op_a, Op op_b, const Matrix<const T>& a,
                     const Matrix<const T>& b, const Matrix<TC>& c,
                     const gemm::Epilogue<TC>& epilogue) const {
  if constexpr (std::is_same<T, bf16>::value) {
    gemm::gemm(space, op_a, op_b, 1.0f, a, b, 0.0f, c, epilogue);
  } else {
    gemm::gemm(space, m_precision, op_a, op_b, 1.0f, a, b, 0.0f, c, epilogue);
  }
}

template <class T>
void Mlp<T>::forward(const ExecSpace& space, const Weights<T>& w, const Matrix<const T>& states,
                     std::size_t rows, const Matrix<float>& q) {
  const NetworkSpec& spec = m_layout.spec();
  if (rows > m_max_rows || rows > states.extent(0) || states.extent(1) != spec.state_size() ||
      q.extent(0) < rows || q.extent(1) != spec.actions) {
    throw InputError("Mlp::forward: " + std::to_string(rows) + " rows do not fit the buffers");
  }
  m_states = states;
  Matrix<const T> in = first_rows(states, rows);
  for (std::size_t l = 0; l < spec.hidden.size(); ++l) {
    gemm::Epilogue<T> epilogue;
    epilogue.bias = vector_of(w.working, m_layout.bias(l));
    epilogue.relu = true;
    const Matrix<T> out = first_rows(m_hidden[l], rows);
    product(space, Op::none, Op::none, in, block(w.working, m_layout.weight(l)), out, epilogue);
    in = out;
  }
  const std::size_t head = spec.hidden.size();
  gemm::Epilogue<float> epilogue;
  epilogue.bias = vector_of(w.master, m_layout.bias(head));
  if (spec.dueling) {
    const Matrix<float> out = first_rows(m_head_out, rows);
    product(space, Op::none, Op::none, in, block(w.working, m_layout.weight(head)), out, epilogue);
    combine_dueling(space, out, q, rows);
  } else {
    product(space, Op::none, Op::none, in, block(w.working, m_layout.weight(head)),
            first_rows(q, rows), epilogue);
  }
}

template <class T>
void Mlp<T>::backward(const ExecSpace& space, const Weights<T>& w, const Matrix<const float>& dq,
                      std::size_t rows, const Kokkos::View<float*, DeviceMemory>& grads) {
  const NetworkSpec& spec = m_layout.spec();
  if (rows > m_max_rows || grads.extent(0) != m_layout.size()) {
    throw InputError("Mlp::backward: rows or gradient buffer do not match the network");
  }
  auto grad_block = [&](const Tensor& t) {
    return Matrix<float>(grads.data() + t.offset, t.rows, t.cols);
  };
  const std::size_t head = spec.hidden.size();
  // The head: d loss / d outputs, its bias and weight gradients, and dH of the last layer.
  Matrix<const float> d_out = Matrix<const float>(dq.data(), rows, dq.extent(1));
  if (spec.dueling) {
    dueling_backward(space, dq, first_rows(m_head_grad, rows), rows);
    d_out = first_rows(m_head_grad, rows);
  }
  column_sums(space, d_out, rows, grads.data() + m_layout.bias(head).offset);
  Matrix<const T> d_out_t;
  if constexpr (std::is_same<T, float>::value) {
    d_out_t = d_out;
  } else {
    convert(space, d_out, first_rows(m_head_grad_t, rows), rows);
    d_out_t = first_rows(m_head_grad_t, rows);
  }
  Matrix<const T> last = first_rows(m_hidden[head - 1], rows);
  product(space, Op::transpose, Op::none, last, d_out_t, grad_block(m_layout.weight(head)), {});
  Matrix<T> dh(m_grad_a.data(), rows, spec.hidden.back());
  product(space, Op::none, Op::transpose, d_out_t, block(w.working, m_layout.weight(head)), dh, {});
  // Hidden layers, last to first: dZ = dH * relu'(Z), db = column sums, dW = H_in^T dZ,
  // dH_in = dZ W^T.
  T* spare = m_grad_b.data();
  for (std::size_t l = head; l-- > 0;) {
    relu_backward(space, Matrix<const T>(first_rows(m_hidden[l], rows)), dh, rows,
                  grads.data() + m_layout.bias(l).offset);
    const Matrix<const T> input =
        l == 0 ? first_rows(m_states, rows) : Matrix<const T>(first_rows(m_hidden[l - 1], rows));
    product(space, Op::transpose, Op::none, input, dh, grad_block(m_layout.weight(l)), {});
    if (l > 0) {
      Matrix<T> next(spare, rows, spec.hidden[l - 1]);
      product(space, Op::none, Op::transpose, dh, block(w.working, m_layout.weight(l)), next, {});
      spare = dh.data();
      dh = next;
    }
  }
}

template class Mlp<float>;
template class Mlp<bf16>;

}  // namespace dqntrader::nn

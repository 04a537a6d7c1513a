#include "dqntrader/nn/mlp.hpp"

#include <string>
#include <type_traits>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/team_sum.hpp"

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

// One pass over a layer's output gradient: y = x, zeroed where h <= 0 when h is given (the
// ReLU's derivative), stored in y when y is given (in place when y is x), and the bias
// gradient bias_grad[j] = sum over rows of y[r][j]. A team takes kColumns adjacent columns
// (neighbouring threads read neighbouring addresses) of one of kRowChunks chunks of rows;
// its kGroups thread groups take every kGroups-th row of the chunk, kBatch rows at a time
// (loaded before any is stored, so that the loads overlap). The team's sums go to
// partials(chunk, column); the last team of a column tile adds its kRowChunks chunks in
// order: the same sum, in the same order, on every backend and at every thread count.
constexpr int kColumns = 32, kGroups = 16, kRowChunks = 8, kBatch = 8;

template <class TX, class TH, class TY>
void masked_column_sums(const ExecSpace& space, const Matrix<const TX>& x,
                        const Matrix<const TH>& h, const Matrix<TY>& y, std::size_t rows,
                        float* bias_grad, const Matrix<float>& partials,
                        const Kokkos::View<int*, DeviceMemory>& arrivals) {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = Policy::member_type;
  using Scratch = TeamScratch<float>;
  const std::size_t cols = x.extent(1);
  const bool masked = h.extent(0) > 0, write = y.extent(0) > 0;
#if defined(DQNTRADER_BACKEND_CUDA)
  const int team = kColumns * kGroups;
#else
  const int team = 1;
#endif
  const std::size_t tiles = (cols + kColumns - 1) / kColumns;
  const std::size_t chunk = (rows + kRowChunks - 1) / kRowChunks;
  Policy policy(space, static_cast<int>(tiles * kRowChunks), team);
  policy.set_scratch_size(0, Kokkos::PerTeam(Scratch::shmem_size(kColumns * kGroups)));
  Kokkos::parallel_for(
      "dqntrader::nn::masked_column_sums", policy, KOKKOS_LAMBDA(const Member& member) {
        const Scratch partial(member.team_scratch(0), kColumns * kGroups);
        const std::size_t tile = static_cast<std::size_t>(member.league_rank()) / kRowChunks;
        const std::size_t part = static_cast<std::size_t>(member.league_rank()) % kRowChunks;
        const std::size_t first = tile * kColumns, begin = part * chunk;
        const std::size_t end = begin + chunk < rows ? begin + chunk : rows;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(member, kColumns * kGroups), [&](const int t) {
          const std::size_t j = first + static_cast<std::size_t>(t % kColumns);
          float sum = 0.0f;
          if (j < cols) {
            for (std::size_t r0 = begin + static_cast<std::size_t>(t / kColumns); r0 < end;
                 r0 += kGroups * kBatch) {
              float value[kBatch];
              for (int k = 0; k < kBatch; ++k) {
                const std::size_t r = r0 + static_cast<std::size_t>(k) * kGroups;
                value[k] = r < end ? to_float(x(r, j)) : 0.0f;
                if (masked && r < end && !(to_float(h(r, j)) > 0.0f))
                  value[k] = 0.0f;
              }
              for (int k = 0; k < kBatch; ++k) {
                const std::size_t r = r0 + static_cast<std::size_t>(k) * kGroups;
                if (write && r < end)
                  store(y(r, j), value[k]);
                sum += value[k];
              }
            }
          }
          partial(t) = sum;
        });
        member.team_barrier();
        Kokkos::parallel_for(Kokkos::TeamThreadRange(member, kColumns), [&](const int c) {
          float sum = 0.0f;
          for (int g = 0; g < kGroups; ++g)
            sum += partial(g * kColumns + c);
          if (first + c < cols)
            partials(part, first + c) = sum;
        });
        if (!last_to_arrive(member, &arrivals(tile), kRowChunks))
          return;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(member, kColumns), [&](const int c) {
          const std::size_t j = first + static_cast<std::size_t>(c);
          if (j >= cols)
            return;
          const volatile float* const column = partials.data() + j;
          float sum = 0.0f;
          for (int p = 0; p < kRowChunks; ++p)
            sum += column[p * partials.extent(1)];
          bias_grad[j] = sum;
        });
      });
}

}  // namespace

template <class T>
Mlp<T>::Mlp(const ExecSpace& space, const NetworkSpec& spec, Precision precision,
            std::size_t max_rows, std::size_t copies)
    : m_layout(spec), m_precision(precision), m_max_rows(max_rows), m_copies(copies) {
  if (copies != 1 && copies != 2)
    throw InputError("Mlp: 1 or 2 copies, not " + std::to_string(copies));
  if ((precision == Precision::bf16) != std::is_same<T, bf16>::value) {
    throw InputError(std::string("the network's storage does not match precision ") +
                     to_string(precision));
  }
  m_head_width = spec.dueling ? spec.actions + 1 : spec.actions;
  std::size_t widest = spec.state_size();
  for (std::size_t w : spec.hidden) {
    m_hidden_copies.push_back(Kokkos::View<T*, DeviceMemory>(
        Kokkos::view_alloc(space, std::string("dqntrader::nn::hidden")), copies * max_rows * w));
    widest = std::max(widest, w);
  }
  m_head_out_copies = Kokkos::View<float*, DeviceMemory>(
      Kokkos::view_alloc(space, std::string("dqntrader::nn::head_out")),
      copies * max_rows * m_head_width);
  m_head_grad = Matrix<float>(Kokkos::view_alloc(space, std::string("dqntrader::nn::head_grad")),
                              max_rows, m_head_width);
  m_head_grad_t = Matrix<T>(Kokkos::view_alloc(space, std::string("dqntrader::nn::head_grad_t")),
                            max_rows, m_head_width);
  m_grad_a =
      Matrix<T>(Kokkos::view_alloc(space, std::string("dqntrader::nn::grad_a")), max_rows, widest);
  m_grad_b =
      Matrix<T>(Kokkos::view_alloc(space, std::string("dqntrader::nn::grad_b")), max_rows, widest);
  widest = std::max(widest, m_head_width);
  m_column_partials = Matrix<float>(
      Kokkos::view_alloc(space, std::string("dqntrader::nn::column_partials")), kRowChunks, widest);
  m_column_arrivals = Kokkos::View<int*, DeviceMemory>(
      Kokkos::view_alloc(space, std::string("dqntrader::nn::column_arrivals")),
      (widest + kColumns - 1) / kColumns);
}

template <class T>
Matrix<T> Mlp<T>::hidden(std::size_t layer, std::size_t rows) const {
  return Matrix<T>(m_hidden_copies[layer].data(), rows, m_layout.spec().hidden[layer]);
}

template <class T>
Matrix<float> Mlp<T>::head_out(std::size_t rows) const {
  return Matrix<float>(m_head_out_copies.data(), rows, m_head_width);
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
void Mlp<T>::forward_pair(const ExecSpace& space, const Weights<T>& w, std::size_t target_offset,
                          const Matrix<const T>& states, std::size_t rows,
                          const MatrixBatch<float>& q) {
  const NetworkSpec& spec = m_layout.spec();
  if (m_copies != 2 || rows > m_max_rows || rows > states.extent(0) ||
      states.extent(1) != spec.state_size() || q.extent(0) != 2 || q.extent(1) < rows ||
      q.extent(2) != spec.actions || target_offset < m_layout.size() ||
      w.working.extent(0) < target_offset + m_layout.size() ||
      w.master.extent(0) < target_offset + m_layout.size()) {
    throw InputError("Mlp::forward_pair: " + std::to_string(rows) +
                     " rows or the weight sets do not fit the buffers");
  }
  m_states = states;
  // [copy][row][column] with copies stride elements apart.
  auto pair = [rows](auto* data, std::size_t stride, std::size_t cols) {
    using V = std::remove_pointer_t<decltype(data)>;
    return gemm::StridedBatch<V>(data, Kokkos::LayoutStride(2, stride, rows, cols, cols, 1));
  };
  auto weights = [&](const Tensor& t) {
    return gemm::StridedBatch<const T>(
        w.working.data() + t.offset,
        Kokkos::LayoutStride(2, target_offset, t.rows, t.cols, t.cols, 1));
  };
  gemm::StridedBatch<const T> in = MatrixBatch<const T>(states.data(), 1, rows, states.extent(1));
  for (std::size_t l = 0; l < spec.hidden.size(); ++l) {
    const Tensor& weight = m_layout.weight(l);
    const Tensor& bias = m_layout.bias(l);
    gemm::Epilogue<T> epilogue;
    epilogue.bias = Kokkos::View<const T*, DeviceMemory>(w.working.data() + bias.offset,
                                                         target_offset + bias.size());
    epilogue.bias_stride = target_offset;
    epilogue.relu = true;
    const gemm::StridedBatch<T> out =
        pair(m_hidden_copies[l].data(), m_max_rows * weight.cols, weight.cols);
    gemm::product_batched<T, T>(space, m_precision, in, weights(weight), out, epilogue);
    in = out;
  }
  const std::size_t head = spec.hidden.size();
  const gemm::StridedBatch<const T> head_weight = weights(m_layout.weight(head));
  const Tensor& bias = m_layout.bias(head);
  gemm::Epilogue<float> epilogue;
  epilogue.bias = Kokkos::View<const float*, DeviceMemory>(w.master.data() + bias.offset,
                                                           target_offset + bias.size());
  epilogue.bias_stride = target_offset;
  const std::size_t q_stride = q.extent(1) * q.extent(2);
  if (spec.dueling) {
    gemm::product_batched<T, float>(
        space, m_precision, in, head_weight,
        pair(m_head_out_copies.data(), m_max_rows * m_head_width, m_head_width), epilogue);
    for (std::size_t c = 0; c < 2; ++c) {
      combine_dueling(space,
                      Matrix<const float>(m_head_out_copies.data() + c * m_max_rows * m_head_width,
                                          rows, m_head_width),
                      Matrix<float>(q.data() + c * q_stride, rows, spec.actions), rows);
    }
  } else {
    gemm::product_batched<T, float>(space, m_precision, in, head_weight,
                                    pair(q.data(), q_stride, spec.actions), epilogue);
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
    const Matrix<T> out = hidden(l, rows);
    product(space, Op::none, Op::none, in, block(w.working, m_layout.weight(l)), out, epilogue);
    in = out;
  }
  const std::size_t head = spec.hidden.size();
  gemm::Epilogue<float> epilogue;
  epilogue.bias = vector_of(w.master, m_layout.bias(head));
  if (spec.dueling) {
    const Matrix<float> out = head_out(rows);
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
  // The head's bias gradient, and d_out in the compute type for the products.
  Matrix<const T> d_out_t;
  float* const head_bias_grad = grads.data() + m_layout.bias(head).offset;
  if constexpr (std::is_same<T, float>::value) {
    masked_column_sums(space, d_out, Matrix<const T>(), Matrix<float>(), rows, head_bias_grad,
                       m_column_partials, m_column_arrivals);
    d_out_t = d_out;
  } else {
    masked_column_sums(space, d_out, Matrix<const T>(), first_rows(m_head_grad_t, rows), rows,
                       head_bias_grad, m_column_partials, m_column_arrivals);
    d_out_t = first_rows(m_head_grad_t, rows);
  }
  Matrix<const T> last = hidden(head - 1, rows);
  product(space, Op::transpose, Op::none, last, d_out_t, grad_block(m_layout.weight(head)), {});
  Matrix<T> dh(m_grad_a.data(), rows, spec.hidden.back());
  product(space, Op::none, Op::transpose, d_out_t, block(w.working, m_layout.weight(head)), dh, {});
  // Hidden layers, last to first: dZ = dH * relu'(Z), db = column sums, dW = H_in^T dZ,
  // dH_in = dZ W^T.
  T* spare = m_grad_b.data();
  for (std::size_t l = head; l-- > 0;) {
    masked_column_sums(space, Matrix<const T>(dh), Matrix<const T>(hidden(l, rows)), dh, rows,
                       grads.data() + m_layout.bias(l).offset, m_column_partials,
                       m_column_arrivals);
    const Matrix<const T> input =
        l == 0 ? first_rows(m_states, rows) : Matrix<const T>(hidden(l - 1, rows));
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

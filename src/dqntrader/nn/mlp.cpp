#include "dqntrader/nn/mlp.hpp"

#include <string>
#include <type_traits>
#include <utility>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/for_each_cell.hpp"
#include "dqntrader/core/team_sum.hpp"

namespace dqntrader::nn {

namespace {

using gemm::Op;

template <class T>
Matrix<const T> block(const Kokkos::View<const T*, DeviceMemory>& flat, const Tensor& t) {
  return Matrix<const T>(flat.data() + t.offset, t.rows, t.cols);
}

template <class V>
auto first_rows(const V& m, std::size_t rows) {
  return Kokkos::subview(m, std::make_pair(std::size_t{0}, rows), Kokkos::ALL);
}

// x followed by the column after it: the column of ones of rows_with_ones.
template <class T>
StridedMatrix<const T> with_ones(const StridedMatrix<const T>& x) {
  return StridedMatrix<const T>(x.data(),
                                Kokkos::LayoutStride(x.extent(0), x.stride(0), x.extent(1) + 1, 1));
}

// A matrix as a batch of one.
template <class T>
gemm::StridedBatch<T> one(const StridedMatrix<T>& x) {
  return gemm::StridedBatch<T>(
      x.data(), Kokkos::LayoutStride(1, 0, x.extent(0), x.stride(0), x.extent(1), 1));
}

// Values a thread loads side by side (the loads overlap).
constexpr int kBatch = 8;

// Rows of the head a team evaluates in head_forward, kHeadLanes threads each.
#if defined(DQNTRADER_BACKEND_CUDA)
constexpr int kRowsPerTeam = 4;
#else
constexpr int kRowsPerTeam = 1;
#endif

// The head in one pass: for row r of copy c, o = hidden(c, r, :) w_c + bias_c, and q(c, r, :)
// its Q-values (head_q). Each row's lanes add their shares in a fixed tree.
template <int W, class T>
void head_forward(const ExecSpace& space, const HeadInputs<T>& head, std::size_t rows,
                  const gemm::StridedBatch<float>& q) {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = Policy::member_type;
  using Scratch = TeamScratch<float>;
  const std::size_t inputs = head.hidden.extent(2), actions = q.extent(2);
  const std::size_t all = q.extent(0) * rows;
  constexpr int team = kHeadLanes * kRowsPerTeam;
  Policy policy(space, static_cast<int>((all + kRowsPerTeam - 1) / kRowsPerTeam), team);
  policy.set_scratch_size(0, Kokkos::PerTeam(Scratch::shmem_size(W * team)));
  Kokkos::parallel_for(
      "dqntrader::nn::head_forward", policy, KOKKOS_LAMBDA(const Member& member) {
        const Scratch partial(member.team_scratch(0), W * team);
        const int lane = member.team_rank() % kHeadLanes, slot = member.team_rank() / kHeadLanes;
        const std::size_t at = static_cast<std::size_t>(member.league_rank()) * kRowsPerTeam + slot;
        const std::size_t c = at / rows, r = at % rows;
        float sum[W] = {};
        if (at < all)
          head_dot<W>(lane, head.row(c, r), head.weight_of(c), inputs, sum);
        // Row slot's sums at [slot][a][lane].
        const int base = slot * W * kHeadLanes;
        for (int a = 0; a < W; ++a)
          partial(base + a * kHeadLanes + lane) = sum[a];
        group_tree_sum(member, partial, W, kHeadLanes);
        if (lane != 0 || at >= all)
          return;
        float values[W];
        head_q<W>([&](int a) { return partial(base + a * kHeadLanes) + head.bias_of(c, a); },
                  head.dueling, values);
        for (std::size_t a = 0; a < actions; ++a)
          q(c, r, a) = values[a];
      });
}

}  // namespace

template <class T>
void head_forward(const ExecSpace& space, const HeadInputs<T>& head, std::size_t rows,
                  const gemm::StridedBatch<float>& q) {
  if (q.extent(0) > head.hidden.extent(0) || rows > head.hidden.extent(1) || q.extent(1) < rows ||
      q.extent(2) != head.actions()) {
    throw InputError("head_forward: " + std::to_string(rows) + " rows do not fit the buffers");
  }
  with_head_width(head.width, [&](auto width) {
    head_forward<decltype(width)::value, T>(space, head, rows, q);
  });
}

template void head_forward(const ExecSpace&, const HeadInputs<float>&, std::size_t,
                           const gemm::StridedBatch<float>&);
template void head_forward(const ExecSpace&, const HeadInputs<bf16>&, std::size_t,
                           const gemm::StridedBatch<float>&);

namespace {

// The head's backward in one pass over the last hidden layer's activations h, from the
// head's output gradient g (rows x W) and weight w (hidden x W): that layer's gradient before
// its ReLU, y = g w^T zeroed where h <= 0 (the ReLU's derivative), in the compute type (g w^T
// has W columns: a product of its own would be wasteful), and the head's weight gradient
// weight_grad[j * W + a] = sum over rows of h[r][j] g[r][a] (h^T g).
//
// A team takes kColumns adjacent columns of one of kRowChunks chunks of rows. On CUDA
// neighbouring threads take neighbouring columns (and addresses), and its kGroups thread
// groups every kGroups-th row of the chunk, kBatch rows at a time (loaded before any is
// stored, so that the loads overlap); on the host the team's one thread walks the chunk's rows
// in order with the columns side by side. The team's sums go to partials(chunk, a * columns +
// column); the last team of a column tile adds its kRowChunks chunks in order: the same order
// on every run and at every thread count.
constexpr int kColumns = 32, kGroups = 16, kRowChunks = 8;
constexpr int kThreads = kColumns * kGroups;
#if defined(DQNTRADER_BACKEND_CUDA)
constexpr int kColumnTeam = kThreads;
#else
constexpr int kColumnTeam = 1;  // one thread a team on the host
#endif

template <int W, class T>
void head_backward(const ExecSpace& space, const Matrix<const T>& g, const Matrix<const T>& w,
                   const StridedMatrix<const T>& h, const Matrix<T>& y, std::size_t rows,
                   float* weight_grad, const Matrix<float>& partials,
                   const Kokkos::View<int*, DeviceMemory>& arrivals) {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = Policy::member_type;
  using Scratch = TeamScratch<float>;
  const std::size_t cols = h.extent(1);
  const std::size_t tiles = (cols + kColumns - 1) / kColumns;
  const std::size_t chunk = (rows + kRowChunks - 1) / kRowChunks;
  // x(r, j) = d loss / d h(r, j) = (g w^T)(r, j).
  auto x = KOKKOS_LAMBDA(const std::size_t r, const std::size_t j) {
    float sum = 0.0f;
    for (int a = 0; a < W; ++a)
      sum += to_float(g(r, a)) * to_float(w(j, a));
    return sum;
  };
  Policy policy(space, static_cast<int>(tiles * kRowChunks), kColumnTeam);
  policy.set_scratch_size(0, Kokkos::PerTeam(Scratch::shmem_size(W * kThreads)));
  Kokkos::parallel_for(
      "dqntrader::nn::head_backward", policy, KOKKOS_LAMBDA(const Member& member) {
        const Scratch partial(member.team_scratch(0), W * kThreads);
        const std::size_t tile = static_cast<std::size_t>(member.league_rank()) / kRowChunks;
        const std::size_t part = static_cast<std::size_t>(member.league_rank()) % kRowChunks;
        const std::size_t first = tile * kColumns, begin = part * chunk;
        const std::size_t end = begin + chunk < rows ? begin + chunk : rows;
        if (kColumnTeam == 1) {  // a constant: one branch compiles to nothing
          // One thread a team (the host): the chunk's rows in order, the tile's columns side
          // by side, their sums independent (so the compiler may vectorize across columns).
          const std::size_t width = first + kColumns < cols ? kColumns : cols - first;
          float sum[W][kColumns] = {}, held[kColumns];
          for (std::size_t r = begin; r < end; ++r) {
            for (std::size_t c = 0; c < width; ++c) {
              const std::size_t j = first + c;
              held[c] = to_float(h(r, j));
              store(y(r, j), held[c] > 0.0f ? stored_value<T>(x(r, j)) : 0.0f);
            }
            for (int a = 0; a < W; ++a) {
              const float ga = to_float(g(r, static_cast<std::size_t>(a)));
              for (std::size_t c = 0; c < width; ++c)
                sum[a][c] += held[c] * ga;
            }
          }
          for (std::size_t c = 0; c < width; ++c) {
            for (int a = 0; a < W; ++a)
              partials(part, static_cast<std::size_t>(a) * cols + first + c) = sum[a][c];
          }
        } else {
          Kokkos::parallel_for(Kokkos::TeamThreadRange(member, kThreads), [&](const int t) {
            const std::size_t j = first + static_cast<std::size_t>(t % kColumns);
            float sum[W] = {};
            if (j < cols) {
              for (std::size_t r0 = begin + static_cast<std::size_t>(t / kColumns); r0 < end;
                   r0 += kGroups * kBatch) {
                float held[kBatch], value[kBatch];
                for (int k = 0; k < kBatch; ++k) {
                  const std::size_t r = r0 + static_cast<std::size_t>(k) * kGroups;
                  held[k] = r < end ? to_float(h(r, j)) : 0.0f;
                  value[k] = held[k] > 0.0f ? stored_value<T>(x(r, j)) : 0.0f;
                }
                for (int k = 0; k < kBatch; ++k) {
                  const std::size_t r = r0 + static_cast<std::size_t>(k) * kGroups;
                  if (r >= end)
                    break;
                  store(y(r, j), value[k]);
                  for (int a = 0; a < W; ++a)
                    sum[a] += held[k] * to_float(g(r, static_cast<std::size_t>(a)));
                }
              }
            }
            for (int a = 0; a < W; ++a)
              partial(a * kThreads + t) = sum[a];
          });
          member.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(member, W * kColumns), [&](const int c) {
            const int a = c / kColumns, column = c % kColumns;
            float total = 0.0f;
            for (int group = 0; group < kGroups; ++group)
              total += partial(a * kThreads + group * kColumns + column);
            if (first + column < cols)
              partials(part, a * cols + first + column) = total;
          });
        }
        if (!last_to_arrive(member, &arrivals(tile), kRowChunks))
          return;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(member, W * kColumns), [&](const int c) {
          const std::size_t a = static_cast<std::size_t>(c / kColumns);
          const std::size_t j = first + static_cast<std::size_t>(c % kColumns);
          if (j >= cols)
            return;
          const volatile float* const column = partials.data() + a * cols + j;
          float total = 0.0f;
          for (int p = 0; p < kRowChunks; ++p)
            total += column[p * partials.extent(1)];
          weight_grad[j * W + a] = total;
        });
      });
}

// y = y zeroed where h <= 0: a hidden layer's gradient before its ReLU, from the gradient
// of its output, in place.
template <class T>
void relu_mask(const ExecSpace& space, const StridedMatrix<const T>& h, const Matrix<T>& y) {
  for_each_cell(
      "dqntrader::nn::relu_mask", space, y.extent(0), y.extent(1),
      KOKKOS_LAMBDA(const std::size_t r, const std::size_t j) {
        if (!(to_float(h(r, j)) > 0.0f))
          store(y(r, j), 0.0f);
      });
}

}  // namespace

template <class T>
StridedMatrix<T> rows_with_ones(const ExecSpace& space, const std::string& label, std::size_t rows,
                                std::size_t cols) {
  const std::size_t stride = (cols + 1 + 7) / 8 * 8;
  const Matrix<T> all(Kokkos::view_alloc(space, label), rows, stride);  // zeros
  Kokkos::parallel_for(
      "dqntrader::nn::rows_with_ones", Kokkos::RangePolicy<ExecSpace>(space, 0, rows),
      KOKKOS_LAMBDA(const std::size_t r) { store(all(r, cols), 1.0f); });
  return Kokkos::subview(all, Kokkos::ALL, std::make_pair(std::size_t{0}, cols));
}

template StridedMatrix<float> rows_with_ones(const ExecSpace&, const std::string&, std::size_t,
                                             std::size_t);
template StridedMatrix<bf16> rows_with_ones(const ExecSpace&, const std::string&, std::size_t,
                                            std::size_t);

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
  if (m_head_width > static_cast<std::size_t>(kMaxHeadWidth)) {
    throw InputError("the training network's head has at most " + std::to_string(kMaxHeadWidth) +
                     " outputs, not " + std::to_string(m_head_width));
  }
  for (std::size_t w : spec.hidden) {
    m_hidden.push_back(rows_with_ones<T>(space, "dqntrader::nn::hidden", copies * max_rows, w));
    m_layer_grads.push_back(Matrix<T>(
        Kokkos::view_alloc(space, std::string("dqntrader::nn::layer_grad")), max_rows, w));
  }
  const std::size_t last = spec.hidden.back();
  m_head_grad = Matrix<T>(Kokkos::view_alloc(space, std::string("dqntrader::nn::head_grad")),
                          max_rows, m_head_width);
  m_column_partials =
      Matrix<float>(Kokkos::view_alloc(space, std::string("dqntrader::nn::column_partials")),
                    kRowChunks, m_head_width * last);
  m_column_arrivals = Kokkos::View<int*, DeviceMemory>(
      Kokkos::view_alloc(space, std::string("dqntrader::nn::column_arrivals")),
      (last + kColumns - 1) / kColumns);
}

template <class T>
StridedMatrix<T> Mlp<T>::hidden(std::size_t layer, std::size_t rows) const {
  return first_rows(m_hidden[layer], rows);
}

template <class T>
template <class TC>
void Mlp<T>::product(const ExecSpace& space, Op op_a, Op op_b, const StridedMatrix<const T>& a,
                     const StridedMatrix<const T>& b, const StridedMatrix<TC>& c) const {
  if constexpr (std::is_same<T, bf16>::value) {
    gemm::gemm_batched(space, op_a, op_b, 1.0f, one(a), one(b), 0.0f, one(c));
  } else {
    gemm::gemm_batched(space, m_precision, op_a, op_b, 1.0f, one(a), one(b), 0.0f, one(c));
  }
}

template <class T>
gemm::StridedBatch<const T> Mlp<T>::hidden_layers(const ExecSpace& space, const Weights<T>& w,
                                                  std::size_t copies, std::size_t target_offset,
                                                  const StridedMatrix<const T>& states,
                                                  std::size_t rows) {
  const NetworkSpec& spec = m_layout.spec();
  m_states = states;
  auto weights = [&](const Tensor& t) {
    return gemm::StridedBatch<const T>(
        w.working.data() + t.offset,
        Kokkos::LayoutStride(copies, target_offset, t.rows, t.cols, t.cols, 1));
  };
  gemm::StridedBatch<const T> in = one(StridedMatrix<const T>(first_rows(states, rows)));
  for (std::size_t l = 0; l < spec.hidden.size(); ++l) {
    const Tensor& weight = m_layout.weight(l);
    const Tensor& bias = m_layout.bias(l);
    gemm::Epilogue<T> epilogue;
    epilogue.bias = Kokkos::View<const T*, DeviceMemory>(
        w.working.data() + bias.offset, (copies - 1) * target_offset + bias.size());
    epilogue.bias_stride = target_offset;
    epilogue.relu = true;
    // [copy][row][column], the copies max_rows rows apart.
    const StridedMatrix<T>& h = m_hidden[l];
    const gemm::StridedBatch<T> out(
        h.data(),
        Kokkos::LayoutStride(copies, m_max_rows * h.stride(0), rows, h.stride(0), weight.cols, 1));
    gemm::product_batched<T, T>(space, m_precision, in, weights(weight), out, epilogue);
    in = out;
  }
  return in;
}

template <class T>
HeadInputs<T> Mlp<T>::forward_pair(const ExecSpace& space, const Weights<T>& w,
                                   std::size_t target_offset, const StridedMatrix<const T>& states,
                                   std::size_t rows) {
  if (m_copies != 2 || rows > m_max_rows || rows > states.extent(0) ||
      states.extent(1) != m_layout.spec().state_size() || target_offset < m_layout.size() ||
      w.working.extent(0) < target_offset + m_layout.size() ||
      w.master.extent(0) < target_offset + m_layout.size()) {
    throw InputError("Mlp::forward_pair: " + std::to_string(rows) +
                     " rows or the weight sets do not fit the buffers");
  }
  return head_inputs(w, hidden_layers(space, w, 2, target_offset, states, rows), target_offset);
}

template <class T>
HeadInputs<T> Mlp<T>::head_inputs(const Weights<T>& w, const gemm::StridedBatch<const T>& hidden,
                                  std::size_t copy_stride) const {
  const std::size_t head = m_layout.spec().hidden.size();
  return HeadInputs<T>{hidden,
                       w.working.data() + m_layout.weight(head).offset,
                       w.master.data() + m_layout.bias(head).offset,
                       copy_stride,
                       m_head_width,
                       m_layout.spec().dueling};
}

template <class T>
void Mlp<T>::forward(const ExecSpace& space, const Weights<T>& w,
                     const StridedMatrix<const T>& states, std::size_t rows,
                     const Matrix<float>& q) {
  const NetworkSpec& spec = m_layout.spec();
  if (rows > m_max_rows || rows > states.extent(0) || states.extent(1) != spec.state_size() ||
      q.extent(0) < rows || q.extent(1) != spec.actions) {
    throw InputError("Mlp::forward: " + std::to_string(rows) + " rows do not fit the buffers");
  }
  nn::head_forward<T>(space, head_inputs(w, hidden_layers(space, w, 1, 0, states, rows), 0), rows,
                      MatrixBatch<float>(q.data(), 1, rows, spec.actions));
}

template <class T>
OutputGradient<T> Mlp<T>::output_gradient(std::size_t rows,
                                          const Kokkos::View<float*, DeviceMemory>& grads) const {
  if (rows > m_max_rows || grads.extent(0) != m_layout.size())
    throw InputError("Mlp::output_gradient: rows or gradient buffer do not match the network");
  const Tensor& bias = m_layout.bias(m_layout.spec().hidden.size());
  return OutputGradient<T>{first_rows(m_head_grad, rows), grads.data() + bias.offset,
                           m_layout.spec().dueling};
}

template <class T>
void Mlp<T>::backward(const ExecSpace& space, const exec::SideStream& side, const Weights<T>& w,
                      std::size_t rows, const Kokkos::View<float*, DeviceMemory>& grads) {
  const NetworkSpec& spec = m_layout.spec();
  if (rows > m_max_rows || grads.extent(0) != m_layout.size()) {
    throw InputError("Mlp::backward: rows or gradient buffer do not match the network");
  }
  if (m_states.stride(0) <= m_states.extent(1)) {
    throw InputError(
        "Mlp::backward: the forward pass's states have no column of ones after them "
        "(rows_with_ones)");
  }
  // The head, from the loss's output gradient g (the head's bias gradient is the loss's):
  // in one pass, dZ of the last hidden layer, (g W^T) * relu'(Z), and the head's weight
  // gradient H^T g.
  const std::size_t head = spec.hidden.size();
  const Matrix<const T> g = first_rows(m_head_grad, rows);
  with_head_width(m_head_width, [&](auto width) {
    constexpr int W = decltype(width)::value;
    head_backward<W, T>(space, g, block(w.working, m_layout.weight(head)), hidden(head - 1, rows),
                        first_rows(m_layer_grads[head - 1], rows), rows,
                        grads.data() + m_layout.weight(head).offset, m_column_partials,
                        m_column_arrivals);
  });
  // Hidden layers, last to first: on the side, [dW; db] = [H_in 1]^T dZ into the layer's
  // weight and the bias that follows it; on space, dH_in = dZ W^T, then the layer below's
  // dZ = dH_in * relu'(Z_in), in place.
  for (std::size_t l = head; l-- > 0;) {
    const StridedMatrix<const T> input = l == 0 ? StridedMatrix<const T>(first_rows(m_states, rows))
                                                : StridedMatrix<const T>(hidden(l - 1, rows));
    const Matrix<const T> dz = first_rows(Matrix<const T>(m_layer_grads[l]), rows);
    const Tensor& weight = m_layout.weight(l);
    side.fork(space);
    product(side.space(), Op::transpose, Op::none, with_ones(input), dz,
            StridedMatrix<float>(
                Matrix<float>(grads.data() + weight.offset, weight.rows + 1, weight.cols)));
    if (l == 0)
      break;
    const Matrix<T> next = first_rows(m_layer_grads[l - 1], rows);
    product(space, Op::none, Op::transpose, dz, block(w.working, weight), StridedMatrix<T>(next));
    relu_mask(space, input, next);
  }
  side.join(space);
}

template class Mlp<float>;
template class Mlp<bf16>;

}  // namespace dqntrader::nn

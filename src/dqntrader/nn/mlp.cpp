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

// The gradient before a layer's ReLU, x(r, j) = d loss / d h(r, j) for its output h:
// read from a matrix, or computed from the head's output gradient g and weight w
// (hidden x head width), x = g w^T, whose few columns make a product of their own wasteful.
template <class TX>
struct Loaded {
  Matrix<const TX> x;
  KOKKOS_INLINE_FUNCTION float operator()(std::size_t r, std::size_t j) const {
    return to_float(x(r, j));
  }
};

template <int W, class T>
struct ThroughHead {
  Matrix<const T> g, w;  // rows x W, hidden x W
  KOKKOS_INLINE_FUNCTION float operator()(std::size_t r, std::size_t j) const {
    float sum = 0.0f;
    for (int a = 0; a < W; ++a)
      sum += to_float(g(r, a)) * to_float(w(j, a));
    return sum;
  }
};

// One pass over a layer's output gradient: y = x, zeroed where h <= 0 (the ReLU's
// derivative), in the compute type (y may be the matrix x reads), and the bias gradient
// bias_grad[j] = sum over rows of y[r][j] as stored. With E > 0 and g (rows x E), the head's
// output gradient when h is the last hidden layer, also the head's weight gradient
// weight_grad[j * E + a] = sum over rows of h[r][j] g[r][a] (h^T g).
//
// A team takes kColumns adjacent columns of one of kRowChunks chunks of rows. On CUDA
// neighbouring threads take neighbouring columns (and addresses), and its kGroups thread
// groups every kGroups-th row of the chunk, kBatch rows at a time (loaded before any is
// stored, so that the loads overlap); on the host the team's one thread walks the chunk's rows
// in order with the columns side by side. The team's sums go to partials(chunk, s * columns +
// column) for sum s (0: the bias, 1 + a: the weight's column a); the last team of a column
// tile adds its kRowChunks chunks in order: the same order on every run and at every thread
// count.
constexpr int kColumns = 32, kGroups = 16, kRowChunks = 8;
constexpr int kThreads = kColumns * kGroups;
#if defined(DQNTRADER_BACKEND_CUDA)
constexpr int kColumnTeam = kThreads;
#else
constexpr int kColumnTeam = 1;  // one thread a team on the host
#endif

template <int E, class Source, class T>
void masked_column_sums(const ExecSpace& space, const Source& x, const Matrix<const T>& h,
                        const Matrix<T>& y, std::size_t rows, float* bias_grad,
                        const Matrix<const T>& g, float* weight_grad, const Matrix<float>& partials,
                        const Kokkos::View<int*, DeviceMemory>& arrivals) {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = Policy::member_type;
  using Scratch = TeamScratch<float>;
  const std::size_t cols = h.extent(1);
  constexpr int sums = 1 + E;
  const std::size_t tiles = (cols + kColumns - 1) / kColumns;
  const std::size_t chunk = (rows + kRowChunks - 1) / kRowChunks;
  Policy policy(space, static_cast<int>(tiles * kRowChunks), kColumnTeam);
  policy.set_scratch_size(0, Kokkos::PerTeam(Scratch::shmem_size(sums * kThreads)));
  Kokkos::parallel_for(
      "dqntrader::nn::masked_column_sums", policy, KOKKOS_LAMBDA(const Member& member) {
        const Scratch partial(member.team_scratch(0), sums * kThreads);
        const std::size_t tile = static_cast<std::size_t>(member.league_rank()) / kRowChunks;
        const std::size_t part = static_cast<std::size_t>(member.league_rank()) % kRowChunks;
        const std::size_t first = tile * kColumns, begin = part * chunk;
        const std::size_t end = begin + chunk < rows ? begin + chunk : rows;
        if (kColumnTeam == 1) {  // a constant: one branch compiles to nothing
          // One thread a team (the host): the chunk's rows in order, the tile's columns side
          // by side, their sums independent (so the compiler may vectorize across columns).
          const std::size_t width = first + kColumns < cols ? kColumns : cols - first;
          float sum[kColumns] = {}, extra[E > 0 ? E : 1][kColumns] = {}, held[kColumns];
          for (std::size_t r = begin; r < end; ++r) {
            for (std::size_t c = 0; c < width; ++c) {
              const std::size_t j = first + c;
              held[c] = to_float(h(r, j));
              const float value = held[c] > 0.0f ? stored_value<T>(x(r, j)) : 0.0f;
              store(y(r, j), value);
              sum[c] += value;
            }
            for (int e = 1; e < sums; ++e) {
              const float ge = to_float(g(r, static_cast<std::size_t>(e - 1)));
              for (std::size_t c = 0; c < width; ++c)
                extra[e - 1][c] += held[c] * ge;
            }
          }
          for (std::size_t c = 0; c < width; ++c) {
            partials(part, first + c) = sum[c];
            for (int e = 1; e < sums; ++e)
              partials(part, static_cast<std::size_t>(e) * cols + first + c) = extra[e - 1][c];
          }
        } else {
          Kokkos::parallel_for(Kokkos::TeamThreadRange(member, kThreads), [&](const int t) {
            const std::size_t j = first + static_cast<std::size_t>(t % kColumns);
            float sum = 0.0f, extra[E > 0 ? E : 1] = {};
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
                  sum += value[k];
                  for (int e = 0; e < E; ++e)
                    extra[e] += held[k] * to_float(g(r, static_cast<std::size_t>(e)));
                }
              }
            }
            partial(t) = sum;
            for (int e = 1; e < sums; ++e)
              partial(e * kThreads + t) = extra[e - 1];
          });
          member.team_barrier();
          Kokkos::parallel_for(Kokkos::TeamThreadRange(member, sums * kColumns), [&](const int c) {
            const int e = c / kColumns, column = c % kColumns;
            float total = 0.0f;
            for (int group = 0; group < kGroups; ++group)
              total += partial(e * kThreads + group * kColumns + column);
            if (first + column < cols)
              partials(part, e * cols + first + column) = total;
          });
        }
        if (!last_to_arrive(member, &arrivals(tile), kRowChunks))
          return;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(member, sums * kColumns), [&](const int c) {
          const std::size_t e = static_cast<std::size_t>(c / kColumns);
          const std::size_t j = first + static_cast<std::size_t>(c % kColumns);
          if (j >= cols)
            return;
          const volatile float* const column = partials.data() + e * cols + j;
          float total = 0.0f;
          for (int p = 0; p < kRowChunks; ++p)
            total += column[p * partials.extent(1)];
          if (e == 0)
            bias_grad[j] = total;
          else
            weight_grad[j * E + e - 1] = total;
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
  if (m_head_width > static_cast<std::size_t>(kMaxHeadWidth)) {
    throw InputError("the training network's head has at most " + std::to_string(kMaxHeadWidth) +
                     " outputs, not " + std::to_string(m_head_width));
  }
  std::size_t widest = 0;
  for (std::size_t w : spec.hidden) {
    m_hidden_copies.push_back(Kokkos::View<T*, DeviceMemory>(
        Kokkos::view_alloc(space, std::string("dqntrader::nn::hidden")), copies * max_rows * w));
    m_layer_grads.push_back(Matrix<T>(
        Kokkos::view_alloc(space, std::string("dqntrader::nn::layer_grad")), max_rows, w));
    widest = std::max(widest, w);
  }
  m_head_grad = Matrix<T>(Kokkos::view_alloc(space, std::string("dqntrader::nn::head_grad")),
                          max_rows, m_head_width);
  m_column_partials =
      Matrix<float>(Kokkos::view_alloc(space, std::string("dqntrader::nn::column_partials")),
                    kRowChunks, (1 + m_head_width) * widest);
  m_column_arrivals = Kokkos::View<int*, DeviceMemory>(
      Kokkos::view_alloc(space, std::string("dqntrader::nn::column_arrivals")),
      (widest + kColumns - 1) / kColumns);
}

template <class T>
Matrix<T> Mlp<T>::hidden(std::size_t layer, std::size_t rows) const {
  return Matrix<T>(m_hidden_copies[layer].data(), rows, m_layout.spec().hidden[layer]);
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
HeadInputs<T> Mlp<T>::forward_pair(const ExecSpace& space, const Weights<T>& w,
                                   std::size_t target_offset, const Matrix<const T>& states,
                                   std::size_t rows) {
  const NetworkSpec& spec = m_layout.spec();
  if (m_copies != 2 || rows > m_max_rows || rows > states.extent(0) ||
      states.extent(1) != spec.state_size() || target_offset < m_layout.size() ||
      w.working.extent(0) < target_offset + m_layout.size() ||
      w.master.extent(0) < target_offset + m_layout.size()) {
    throw InputError("Mlp::forward_pair: " + std::to_string(rows) +
                     " rows or the weight sets do not fit the buffers");
  }
  m_states = states;
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
    // [copy][row][column], the copies max_rows rows apart.
    const gemm::StridedBatch<T> out(
        m_hidden_copies[l].data(),
        Kokkos::LayoutStride(2, m_max_rows * weight.cols, rows, weight.cols, weight.cols, 1));
    gemm::product_batched<T, T>(space, m_precision, in, weights(weight), out, epilogue);
    in = out;
  }
  return head_inputs(w, in, target_offset);
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
  nn::head_forward<T>(space,
                      head_inputs(w, MatrixBatch<const T>(in.data(), 1, rows, in.extent(1)), 0),
                      rows, MatrixBatch<float>(q.data(), 1, rows, spec.actions));
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
  auto grad_block = [&](const Tensor& t) {
    return Matrix<float>(grads.data() + t.offset, t.rows, t.cols);
  };
  auto bias_grad = [&](std::size_t l) { return grads.data() + m_layout.bias(l).offset; };
  // The head, from the loss's output gradient g (the head's bias gradient is the loss's):
  // in one pass, dZ of the last hidden layer, (g W^T) * relu'(Z), its bias gradient and the
  // head's weight gradient H^T g (g's few columns make products of their own wasteful).
  const std::size_t head = spec.hidden.size();
  const Matrix<const T> g = first_rows(m_head_grad, rows);
  const Matrix<const T> last = hidden(head - 1, rows);
  const Matrix<T> dz_last = first_rows(m_layer_grads[head - 1], rows);
  with_head_width(m_head_width, [&](auto width) {
    constexpr int W = decltype(width)::value;
    masked_column_sums<W>(space, ThroughHead<W, T>{g, block(w.working, m_layout.weight(head))},
                          last, dz_last, rows, bias_grad(head - 1), g,
                          grads.data() + m_layout.weight(head).offset, m_column_partials,
                          m_column_arrivals);
  });
  // Hidden layers, last to first: dW = H_in^T dZ on the side; on space, dH_in = dZ W^T,
  // then the layer below's dZ = dH_in * relu'(Z_in) and its bias gradient, in place.
  for (std::size_t l = head; l-- > 0;) {
    const Matrix<const T> input =
        l == 0 ? first_rows(m_states, rows) : Matrix<const T>(hidden(l - 1, rows));
    const Matrix<const T> dz = first_rows(Matrix<const T>(m_layer_grads[l]), rows);
    side.fork(space);
    product(side.space(), Op::transpose, Op::none, input, dz, grad_block(m_layout.weight(l)), {});
    if (l == 0)
      break;
    const Matrix<T> next = first_rows(m_layer_grads[l - 1], rows);
    product(space, Op::none, Op::transpose, dz, block(w.working, m_layout.weight(l)), next, {});
    masked_column_sums<0>(space, Loaded<T>{next}, input, next, rows, bias_grad(l - 1),
                          Matrix<const T>(), nullptr, m_column_partials, m_column_arrivals);
  }
  side.join(space);
}

template class Mlp<float>;
template class Mlp<bf16>;

}  // namespace dqntrader::nn

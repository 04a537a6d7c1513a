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

template <class V>
auto first_rows(const V& m, std::size_t rows) {
  return Kokkos::subview(m, std::make_pair(std::size_t{0}, rows), Kokkos::ALL);
}

// The first sets blocks and their first rows rows.
template <class T>
gemm::StridedBatch<T> first_of(const gemm::StridedBatch<T>& x, std::size_t sets, std::size_t rows) {
  return gemm::StridedBatch<T>(
      x.data(), Kokkos::LayoutStride(sets, x.stride(0), rows, x.stride(1), x.extent(2), 1));
}

// The column after x: the column of ones of rows_with_ones.
template <class T>
gemm::StridedBatch<const T> ones_after(const gemm::StridedBatch<const T>& x) {
  return gemm::StridedBatch<const T>(
      x.data() + x.extent(2),
      Kokkos::LayoutStride(x.extent(0), x.stride(0), x.extent(1), x.stride(1), 1, 1));
}

// Tensor t of count weight sets, set s at s * stride values into values: [set][row][col].
template <class T>
gemm::StridedBatch<T> tensor_sets(T* values, const Tensor& t, std::size_t count,
                                  std::size_t stride) {
  return gemm::StridedBatch<T>(values + t.offset,
                               Kokkos::LayoutStride(count, stride, t.rows, t.cols, t.cols, 1));
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

// The head's backward in one pass over the last hidden layer's activations h, for each
// learner k: from the head's output gradient g_k (rows x W) and weight w_k (hidden x W), that
// layer's gradient before its ReLU, y_k = g_k w_k^T zeroed where h_k <= 0 (the ReLU's
// derivative), in the compute type (g w^T has W columns: a product of its own would be
// wasteful), and the head's weight gradient weight_grad_k[j * W + a] = sum over rows of
// h_k[r][j] g_k[r][a] (h^T g).
//
// A team takes kColumns adjacent columns of one of kRowChunks chunks of one learner's rows.
// On CUDA neighbouring threads take neighbouring columns (and addresses), and its kGroups
// thread groups every kGroups-th row of the chunk, kBatch rows at a time (loaded before any is
// stored, so that the loads overlap); on the host the team's one thread walks the chunk's rows
// in order with the columns side by side. The team's sums go to partials(k, chunk, a * columns
// + column); the last team of a learner's column tile adds its kRowChunks chunks in order: the
// same order on every run, at every thread count and for any number of learners.
constexpr int kColumns = 32, kGroups = 16, kRowChunks = 8;
constexpr int kThreads = kColumns * kGroups;
#if defined(DQNTRADER_BACKEND_CUDA)
constexpr int kColumnTeam = kThreads;
#else
constexpr int kColumnTeam = 1;  // one thread a team on the host
#endif

// The head's backward's operands, learner k's at k times the strides.
template <class T>
struct HeadBackward {
  gemm::StridedBatch<const T> g, h;  // [learner][row][W], [learner][row][hidden]
  gemm::StridedBatch<T> y;           // [learner][row][hidden]
  const T* w = nullptr;              // learner k's head weight (hidden x W) at w + k * w_stride
  std::size_t w_stride = 0;
  float* weight_grad = nullptr;  // learner k's at weight_grad + k * grad_stride
  std::size_t grad_stride = 0;
  MatrixBatch<float> partials;                 // [learner][chunk][W * hidden]
  Kokkos::View<int**, DeviceMemory> arrivals;  // [learner][column tile]
};

template <int W, class T>
void head_backward(const ExecSpace& space, const HeadBackward<T>& p, std::size_t rows) {
  using Policy = Kokkos::TeamPolicy<ExecSpace>;
  using Member = Policy::member_type;
  using Scratch = TeamScratch<float>;
  const std::size_t cols = p.h.extent(2), learners = p.g.extent(0);
  const std::size_t tiles = (cols + kColumns - 1) / kColumns;
  const std::size_t chunk = (rows + kRowChunks - 1) / kRowChunks;
  Policy policy(space, static_cast<int>(learners * tiles * kRowChunks), kColumnTeam);
  policy.set_scratch_size(0, Kokkos::PerTeam(Scratch::shmem_size(W * kThreads)));
  Kokkos::parallel_for(
      "dqntrader::nn::head_backward", policy, KOKKOS_LAMBDA(const Member& member) {
        const Scratch partial(member.team_scratch(0), W * kThreads);
        const std::size_t league = static_cast<std::size_t>(member.league_rank());
        const std::size_t k = league / (tiles * kRowChunks);
        const std::size_t tile = league / kRowChunks % tiles;
        const std::size_t part = league % kRowChunks;
        const std::size_t first = tile * kColumns, begin = part * chunk;
        const std::size_t end = begin + chunk < rows ? begin + chunk : rows;
        const T* const w = p.w + k * p.w_stride;
        // x(r, j) = d loss / d h(r, j) = (g w^T)(r, j).
        auto x = [&](const std::size_t r, const std::size_t j) {
          float sum = 0.0f;
          for (int a = 0; a < W; ++a)
            sum += to_float(p.g(k, r, a)) * to_float(w[j * W + a]);
          return sum;
        };
        const auto partials = Kokkos::subview(p.partials, k, Kokkos::ALL, Kokkos::ALL);
        if (kColumnTeam == 1) {  // a constant: one branch compiles to nothing
          // One thread a team (the host): the chunk's rows in order, the tile's columns side
          // by side, their sums independent (so the compiler may vectorize across columns).
          const std::size_t width = first + kColumns < cols ? kColumns : cols - first;
          float sum[W][kColumns] = {}, held[kColumns];
          for (std::size_t r = begin; r < end; ++r) {
            for (std::size_t c = 0; c < width; ++c) {
              const std::size_t j = first + c;
              held[c] = to_float(p.h(k, r, j));
              store(p.y(k, r, j), held[c] > 0.0f ? stored_value<T>(x(r, j)) : 0.0f);
            }
            for (int a = 0; a < W; ++a) {
              const float ga = to_float(p.g(k, r, static_cast<std::size_t>(a)));
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
                for (int b = 0; b < kBatch; ++b) {
                  const std::size_t r = r0 + static_cast<std::size_t>(b) * kGroups;
                  held[b] = r < end ? to_float(p.h(k, r, j)) : 0.0f;
                  value[b] = held[b] > 0.0f ? stored_value<T>(x(r, j)) : 0.0f;
                }
                for (int b = 0; b < kBatch; ++b) {
                  const std::size_t r = r0 + static_cast<std::size_t>(b) * kGroups;
                  if (r >= end)
                    break;
                  store(p.y(k, r, j), value[b]);
                  for (int a = 0; a < W; ++a)
                    sum[a] += held[b] * to_float(p.g(k, r, static_cast<std::size_t>(a)));
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
        if (!last_to_arrive(member, &p.arrivals(k, tile), kRowChunks))
          return;
        float* const weight_grad = p.weight_grad + k * p.grad_stride;
        Kokkos::parallel_for(Kokkos::TeamThreadRange(member, W * kColumns), [&](const int c) {
          const std::size_t a = static_cast<std::size_t>(c / kColumns);
          const std::size_t j = first + static_cast<std::size_t>(c % kColumns);
          if (j >= cols)
            return;
          const volatile float* const column = &partials(0, a * cols + j);
          float total = 0.0f;
          for (int q = 0; q < kRowChunks; ++q)
            total += column[q * partials.stride(0)];
          weight_grad[j * W + a] = total;
        });
      });
}

// y = y zeroed where h <= 0, for every learner: a hidden layer's gradient before its ReLU,
// from the gradient of its output, in place.
template <class T>
void relu_mask(const ExecSpace& space, const gemm::StridedBatch<const T>& h,
               const gemm::StridedBatch<T>& y) {
  const std::size_t rows = y.extent(1);
  for_each_cell(
      "dqntrader::nn::relu_mask", space, y.extent(0) * rows, y.extent(2),
      KOKKOS_LAMBDA(const std::size_t kr, const std::size_t j) {
        const std::size_t k = kr / rows, r = kr % rows;
        if (!(to_float(h(k, r, j)) > 0.0f))
          store(y(k, r, j), 0.0f);
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
gemm::StridedBatch<T> blocks_with_ones(const ExecSpace& space, const std::string& label,
                                       std::size_t sets, std::size_t rows, std::size_t cols) {
  const std::size_t stride = (cols + 1 + 7) / 8 * 8;
  const MatrixBatch<T> all(Kokkos::view_alloc(space, label), sets, rows, stride);  // zeros
  Kokkos::parallel_for(
      "dqntrader::nn::blocks_with_ones", Kokkos::RangePolicy<ExecSpace>(space, 0, sets * rows),
      KOKKOS_LAMBDA(const std::size_t r) { store(all(r / rows, r % rows, cols), 1.0f); });
  return Kokkos::subview(all, Kokkos::ALL, Kokkos::ALL, std::make_pair(std::size_t{0}, cols));
}

template gemm::StridedBatch<float> blocks_with_ones(const ExecSpace&, const std::string&,
                                                    std::size_t, std::size_t, std::size_t);
template gemm::StridedBatch<bf16> blocks_with_ones(const ExecSpace&, const std::string&,
                                                   std::size_t, std::size_t, std::size_t);

template <class T>
Mlp<T>::Mlp(const ExecSpace& space, const NetworkSpec& spec, Precision precision,
            std::size_t max_rows, std::size_t max_sets, std::size_t max_learners)
    : m_layout(spec),
      m_precision(precision),
      m_max_rows(max_rows),
      m_max_sets(max_sets),
      m_max_learners(max_learners > 0 ? max_learners : max_sets) {
  if (max_sets == 0 || m_max_learners > max_sets)
    throw InputError("Mlp: at least one network, and no more learners than networks");
  if ((precision == Precision::bf16) != std::is_same<T, bf16>::value) {
    throw InputError(std::string("the network's storage does not match precision ") +
                     to_string(precision));
  }
  m_head_width = spec.dueling ? spec.actions + 1 : spec.actions;
  if (m_head_width > static_cast<std::size_t>(kMaxHeadWidth)) {
    throw InputError("the training network's head has at most " + std::to_string(kMaxHeadWidth) +
                     " outputs, not " + std::to_string(m_head_width));
  }
  auto alloc = [&](const char* label) { return Kokkos::view_alloc(space, std::string(label)); };
  for (std::size_t w : spec.hidden) {
    m_hidden.push_back(blocks_with_ones<T>(space, "dqntrader::nn::hidden", max_sets, max_rows, w));
    m_layer_grads.push_back(
        MatrixBatch<T>(alloc("dqntrader::nn::layer_grad"), m_max_learners, max_rows, w));
  }
  const std::size_t last = spec.hidden.back();
  m_head_grad =
      MatrixBatch<T>(alloc("dqntrader::nn::head_grad"), m_max_learners, max_rows, m_head_width);
  m_column_partials = MatrixBatch<float>(alloc("dqntrader::nn::column_partials"), m_max_learners,
                                         kRowChunks, m_head_width * last);
  m_column_arrivals = Kokkos::View<int**, DeviceMemory>(
      alloc("dqntrader::nn::column_arrivals"), m_max_learners, (last + kColumns - 1) / kColumns);
}

template <class T>
gemm::StridedBatch<const T> Mlp<T>::learner_hidden(std::size_t layer, std::size_t rows) const {
  return first_of(gemm::StridedBatch<const T>(m_hidden[layer]), m_learners, rows);
}

template <class T>
gemm::StridedBatch<const T> Mlp<T>::learner_states(std::size_t rows) const {
  if (m_states.extent(0) == 1)
    return first_of(m_states, 1, rows);  // shared by every learner
  return first_of(m_states, m_learners, rows);
}

template <class T>
template <class TC>
void Mlp<T>::product(const ExecSpace& space, Op op_a, Op op_b, const gemm::StridedBatch<const T>& a,
                     const gemm::StridedBatch<const T>& b, const gemm::StridedBatch<TC>& c) const {
  if constexpr (std::is_same<T, bf16>::value) {
    gemm::gemm_batched(space, op_a, op_b, 1.0f, a, b, 0.0f, c);
  } else {
    gemm::gemm_batched(space, m_precision, op_a, op_b, 1.0f, a, b, 0.0f, c);
  }
}

template <class T>
gemm::StridedBatch<const T> Mlp<T>::hidden_layers(const ExecSpace& space, const Weights<T>& w,
                                                  std::size_t sets, std::size_t stride,
                                                  const gemm::StridedBatch<const T>& states,
                                                  std::size_t rows) {
  const NetworkSpec& spec = m_layout.spec();
  m_states = states;
  gemm::StridedBatch<const T> in = first_of(states, states.extent(0), rows);
  for (std::size_t l = 0; l < spec.hidden.size(); ++l) {
    const Tensor& weight = m_layout.weight(l);
    const Tensor& bias = m_layout.bias(l);
    gemm::Epilogue<T> epilogue;
    epilogue.bias = Kokkos::View<const T*, DeviceMemory>(w.working.data() + bias.offset,
                                                         (sets - 1) * stride + bias.size());
    epilogue.bias_stride = stride;
    epilogue.relu = true;
    const gemm::StridedBatch<T> out = first_of(m_hidden[l], sets, rows);
    gemm::product_batched<T, T>(space, m_precision, in,
                                tensor_sets(w.working.data(), weight, sets, stride), out, epilogue);
    in = out;
  }
  return in;
}

template <class T>
HeadInputs<T> Mlp<T>::head_inputs(const Weights<T>& w, const gemm::StridedBatch<const T>& hidden,
                                  std::size_t stride) const {
  const std::size_t head = m_layout.spec().hidden.size();
  return HeadInputs<T>{hidden,
                       w.working.data() + m_layout.weight(head).offset,
                       w.master.data() + m_layout.bias(head).offset,
                       stride,
                       m_head_width,
                       m_layout.spec().dueling};
}

namespace {
// InputError unless count weight sets of size values lie stride apart in buffers of the given
// lengths.
void check_sets(const char* what, std::size_t count, std::size_t stride, std::size_t size,
                std::size_t working, std::size_t master) {
  const std::size_t needed = (count - 1) * stride + size;
  if (count == 0 || (count > 1 && stride < size) || working < needed || master < needed) {
    throw InputError(std::string(what) + ": " + std::to_string(count) + " weight sets of " +
                     std::to_string(size) + " values " + std::to_string(stride) +
                     " apart do not fit the buffers");
  }
}
}  // namespace

template <class T>
void Mlp<T>::forward(const ExecSpace& space, const Weights<T>& w,
                     const gemm::StridedBatch<const T>& states, std::size_t rows,
                     const gemm::StridedBatch<float>& q) {
  const NetworkSpec& spec = m_layout.spec();
  const std::size_t sets = w.count;
  check_sets("Mlp::forward", sets, w.stride, m_layout.size(), w.working.extent(0),
             w.master.extent(0));
  if (sets > m_max_sets || sets > m_max_learners || rows > m_max_rows || rows > states.extent(1) ||
      states.extent(2) != spec.state_size() ||
      (states.extent(0) != 1 && states.extent(0) != sets) || q.extent(0) != sets ||
      q.extent(1) < rows || q.extent(2) != spec.actions) {
    throw InputError("Mlp::forward: " + std::to_string(sets) + " networks on " +
                     std::to_string(rows) + " rows do not fit the buffers");
  }
  const HeadInputs<T> head =
      head_inputs(w, hidden_layers(space, w, sets, w.stride, states, rows), w.stride);
  m_learners = sets;
  nn::head_forward<T>(space, head, rows, q);
}

template <class T>
HeadInputs<T> Mlp<T>::forward_pair(const ExecSpace& space, const Weights<T>& w,
                                   const gemm::StridedBatch<const T>& states, std::size_t rows) {
  const std::size_t members = w.count, sets = 2 * members;
  const std::size_t stride = w.stride > 0 ? w.stride : m_layout.size();
  check_sets("Mlp::forward_pair", sets, stride, m_layout.size(), w.working.extent(0),
             w.master.extent(0));
  if (sets > m_max_sets || members > m_max_learners || rows > m_max_rows ||
      rows > states.extent(1) || states.extent(2) != m_layout.spec().state_size() ||
      (states.extent(0) != 1 && states.extent(0) != sets)) {
    throw InputError("Mlp::forward_pair: " + std::to_string(members) + " members on " +
                     std::to_string(rows) + " rows or their weight sets do not fit the buffers");
  }
  const HeadInputs<T> head =
      head_inputs(w, hidden_layers(space, w, sets, stride, states, rows), stride);
  m_learners = members;
  return head;
}

template <class T>
OutputGradient<T> Mlp<T>::output_gradient(std::size_t rows, const Gradients& grads) const {
  const std::size_t k = grads.count;
  if (rows > m_max_rows || k != m_learners || (k > 1 && grads.stride < m_layout.size()) ||
      grads.values.extent(0) < (k - 1) * grads.stride + m_layout.size()) {
    throw InputError("Mlp::output_gradient: rows or gradient buffer do not match the network");
  }
  const Tensor& bias = m_layout.bias(m_layout.spec().hidden.size());
  return OutputGradient<T>{first_of(m_head_grad, k, rows), grads.values.data() + bias.offset,
                           grads.stride, m_layout.spec().dueling};
}

template <class T>
void Mlp<T>::backward(const ExecSpace& space, const exec::SideStream& side, const Weights<T>& w,
                      std::size_t rows, const Gradients& grads) {
  const NetworkSpec& spec = m_layout.spec();
  const std::size_t k = m_learners;
  if (rows > m_max_rows || grads.count != k || w.count != k ||
      (k > 1 && grads.stride < m_layout.size()) ||
      grads.values.extent(0) < (k - 1) * grads.stride + m_layout.size()) {
    throw InputError("Mlp::backward: rows, weights or gradient buffer do not match the network");
  }
  check_sets("Mlp::backward", k, w.stride, m_layout.size(), w.working.extent(0),
             w.master.extent(0));
  if (m_states.stride(1) <= m_states.extent(2)) {
    throw InputError(
        "Mlp::backward: the forward pass's states have no column of ones after them "
        "(rows_with_ones)");
  }
  // The head, from the loss's output gradient g (the head's bias gradient is the loss's):
  // in one pass, dZ of the last hidden layer, (g W^T) * relu'(Z), and the head's weight
  // gradient H^T g.
  const std::size_t head = spec.hidden.size();
  HeadBackward<T> pass;
  pass.g = first_of(gemm::StridedBatch<const T>(m_head_grad), k, rows);
  pass.h = learner_hidden(head - 1, rows);
  pass.y = first_of(m_layer_grads[head - 1], k, rows);
  pass.w = w.working.data() + m_layout.weight(head).offset;
  pass.w_stride = w.stride;
  pass.weight_grad = grads.values.data() + m_layout.weight(head).offset;
  pass.grad_stride = grads.stride;
  pass.partials = m_column_partials;
  pass.arrivals = m_column_arrivals;
  with_head_width(m_head_width,
                  [&](auto width) { head_backward<decltype(width)::value, T>(space, pass, rows); });
  // Hidden layers, last to first: on the side, dW = H_in^T dZ and db = 1^T dZ (1: the column
  // of ones after H_in) into the layer's weight and bias; two products rather than one of
  // [H_in 1]^T dZ, whose width (that of H_in plus one) is no multiple of 8, for which cuBLASLt
  // takes an sm75 kernel without vector loads (docs/BENCHMARKS.md, populations); on space,
  // dH_in = dZ W^T, then the layer below's dZ = dH_in * relu'(Z_in), in place.
  for (std::size_t l = head; l-- > 0;) {
    const gemm::StridedBatch<const T> input =
        l == 0 ? learner_states(rows) : learner_hidden(l - 1, rows);
    const gemm::StridedBatch<const T> dz =
        first_of(gemm::StridedBatch<const T>(m_layer_grads[l]), k, rows);
    const Tensor& weight = m_layout.weight(l);
    const Tensor& bias = m_layout.bias(l);
    side.fork(space);
    product(side.space(), Op::transpose, Op::none, input, dz,
            gemm::StridedBatch<float>(
                grads.values.data() + weight.offset,
                Kokkos::LayoutStride(k, grads.stride, weight.rows, weight.cols, weight.cols, 1)));
    product(side.space(), Op::transpose, Op::none, ones_after(input), dz,
            gemm::StridedBatch<float>(
                grads.values.data() + bias.offset,
                Kokkos::LayoutStride(k, grads.stride, 1, bias.size(), bias.size(), 1)));
    if (l == 0)
      break;
    const gemm::StridedBatch<T> next = first_of(m_layer_grads[l - 1], k, rows);
    product(space, Op::none, Op::transpose, dz, tensor_sets(w.working.data(), weight, k, w.stride),
            next);
    relu_mask(space, input, next);
  }
  side.join(space);
}

template class Mlp<float>;
template class Mlp<bf16>;

}  // namespace dqntrader::nn

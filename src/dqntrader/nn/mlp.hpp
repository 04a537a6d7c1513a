// The Q-network's forward and backward passes over a batch of states, for training, for one
// network or many of the same shape at once (a population's members: every product below is
// one strided-batched product over them, every other pass one kernel over them all).
//
// Parameters live in flat float buffers (ParameterLayout), weight set k of several at k times
// a stride; the products read a working copy in the compute type T (bf16 on CUDA by default,
// else the float buffer itself), with the same layout. Hidden biases are read from the
// working copy, the head's bias from the float buffer. The hidden layers are products
// (backends/gemm.hpp); the head, a few columns wide, runs in passes of its own: its forward
// (with a dueling head's combination) in head_forward, or in the kernel of a loss that
// evaluates it on the rows it reads (head_dot, head_q), and its backward inside the last
// hidden layer's gradient pass. A hidden layer's weight gradient dW = X^T dZ is a product; its
// bias gradient, dZ's column sums, comes from the pass that writes dZ (the head's backward
// pass, or the ReLU's mask of the layer below), so that no pass of its own reads dZ again.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/execution.hpp"
#include "backends/gemm.hpp"
#include "dqntrader/core/bf16.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/core/packs.hpp"
#include "dqntrader/core/precision.hpp"
#include "dqntrader/core/types.hpp"
#include "dqntrader/nn/network_spec.hpp"
#include "dqntrader/nn/q_head.hpp"

namespace dqntrader::nn {

/// count weight sets of one layout: set k's parameters at k * stride values into both the
/// working copy and the float master (one set: count 1, stride unused).
template <class T>
struct Weights {
  Kokkos::View<const T*, DeviceMemory> working;     // the layout, in the compute type
  Kokkos::View<const float*, DeviceMemory> master;  // the layout, float
  std::size_t count = 1, stride = 0;
};

/// count gradient vectors of one layout in one float buffer, vector k at k * stride.
struct Gradients {
  Kokkos::View<float*, DeviceMemory> values;
  std::size_t count = 1, stride = 0;

  float* of(std::size_t k) const { return values.data() + k * stride; }
};

/// A matrix as a batch of one (shared by every product it meets).
template <class T>
gemm::StridedBatch<T> batch_of_one(const StridedMatrix<T>& x) {
  return gemm::StridedBatch<T>(
      x.data(), Kokkos::LayoutStride(1, 0, x.extent(0), x.stride(0), x.extent(1), 1));
}

/// Where a loss writes d loss / d Q for backward(), for each learner (one network, or each
/// member of a population): row by row through write_row, which maps it through a dueling
/// head's combination and stores the head's output gradient in the compute type, and once per
/// learner through write_bias with the column sums of d loss / d Q (over the rows written),
/// which gives the head's bias gradient. The loss's kernels call them, so that no pass of its
/// own converts or sums the gradient.
template <class T>
struct OutputGradient {
  gemm::StridedBatch<T> head;  // d loss / d head outputs: [learner][row][head width]
  float* bias = nullptr;       // learner k's head bias gradient at bias + k * bias_stride
  std::size_t bias_stride = 0;
  bool dueling = false;

  KOKKOS_INLINE_FUNCTION std::size_t actions() const {
    return dueling ? head.extent(2) - 1 : head.extent(2);
  }
  KOKKOS_INLINE_FUNCTION std::size_t learners() const { return head.extent(0); }
  KOKKOS_INLINE_FUNCTION std::size_t rows() const { return head.extent(1); }
  /// dq(a) = d loss / d Q(row of learner k)[a] for a < actions(), mapped through the head
  /// (head_gradient).
  template <class Row>
  KOKKOS_INLINE_FUNCTION void write_row(std::size_t k, std::size_t row, const Row& dq) const {
    write(dq, [&](std::size_t column, float value) { store(head(k, row, column), value); });
  }
  /// sums(a) = the sum over learner k's rows of dq(a); the same map, the bias being added to
  /// every row.
  template <class Sums>
  KOKKOS_INLINE_FUNCTION void write_bias(std::size_t k, const Sums& sums) const {
    float* const b = bias + k * bias_stride;
    write(sums, [&](std::size_t column, float value) { b[column] = value; });
  }

 private:
  template <class Row, class Out>
  KOKKOS_INLINE_FUNCTION void write(const Row& dq, const Out& out) const {
    float g[kMaxHeadWidth];
    head_gradient(dq, static_cast<int>(actions()), dueling, g);
    for (std::size_t c = 0; c < head.extent(2); ++c)
      out(c, g[c]);
  }
};

/// Calls f(std::integral_constant<int, W>()) for W = width, 1 to kMaxHeadWidth (InputError
/// otherwise): kernels over the head's outputs (or the actions) take their count as a
/// constant, so that their loops over them unroll into registers with no bounds checks.
template <class F>
void with_head_width(std::size_t width, const F& f) {
  switch (width) {
    case 1:
      return f(std::integral_constant<int, 1>());
    case 2:
      return f(std::integral_constant<int, 2>());
    case 3:
      return f(std::integral_constant<int, 3>());
    case 4:
      return f(std::integral_constant<int, 4>());
    case 5:
      return f(std::integral_constant<int, 5>());
    case 6:
      return f(std::integral_constant<int, 6>());
    case 7:
      return f(std::integral_constant<int, 7>());
    case 8:
      return f(std::integral_constant<int, 8>());
    default:
      throw InputError("a head of " + std::to_string(width) + " outputs (1 to " +
                       std::to_string(kMaxHeadWidth) + ")");
  }
}
static_assert(kMaxHeadWidth == 8, "with_head_width covers widths 1 to kMaxHeadWidth");

/// The head's inputs for one or two networks evaluated together (copy 0 the online network,
/// copy 1 the target): the last hidden layer's activations [copy][row][column], and each copy's
/// head weight (hidden x width, in T) and bias (float), copy c's copy_stride values after
/// copy c - 1's. width is the head's outputs: the actions, plus one with a dueling head.
template <class T>
struct HeadInputs {
  gemm::StridedBatch<const T> hidden;
  const T* weight = nullptr;
  const float* bias = nullptr;
  std::size_t copy_stride = 0;
  std::size_t width = 0;
  bool dueling = false;

  KOKKOS_INLINE_FUNCTION std::size_t actions() const { return dueling ? width - 1 : width; }
  KOKKOS_INLINE_FUNCTION const T* row(std::size_t copy, std::size_t r) const {
    return &hidden(copy, r, 0);
  }
  KOKKOS_INLINE_FUNCTION const T* weight_of(std::size_t copy) const {
    return weight + copy * copy_stride;
  }
  KOKKOS_INLINE_FUNCTION float bias_of(std::size_t copy, int output) const {
    return bias[copy * copy_stride + static_cast<std::size_t>(output)];
  }
};

/// Threads that evaluate one row of the head together: up to a warp on CUDA (head_lanes), one
/// thread on the host.
#if defined(DQNTRADER_BACKEND_CUDA)
constexpr int kHeadLanes = 32, kFewestHeadLanes = 4;
#else
constexpr int kHeadLanes = 1, kFewestHeadLanes = 1;
#endif

/// The lanes of a row for a head of `inputs` inputs: as many as it has runs of `packs` packs of
/// kPack (a power of two, from kFewestHeadLanes to kHeadLanes), so that no lane of a narrow
/// head idles; the other lanes of a warp take other rows. A power of two dividing the warp: a
/// row's lanes are aligned within it. With one pack a lane (the default) a row's evaluation is
/// shortest; with more, a row costs fewer instructions (fewer lanes to add, and each group's
/// fixed work shared by more rows a warp), for passes with rows enough to fill the device.
inline int head_lanes(std::size_t inputs, std::size_t packs = 1) {
  int lanes = kFewestHeadLanes;
  while (lanes < kHeadLanes && static_cast<std::size_t>(lanes) * kPack * packs < inputs)
    lanes *= 2;
  return lanes;
}

/// Lane `lane`'s share of the head's W outputs on U rows of one network, sum[u][a] +=
/// rows[u] . w(:, a) (w: inputs x W, row-major), before the lanes' shares are added
/// (lane_sums). The `lanes` lanes of the row take every lanes-th pack of kPack inputs, with the
/// pack's kPack x W weights, each as whole packs when Whole (head_packs): the weights' loads and
/// every row's issued before any is used, the weights loaded once for the U rows. One lane (the
/// host) takes each dot product in 8 independent running sums (no chain of dependent additions),
/// added in order.
template <int W, int U, bool Whole, class T>
KOKKOS_INLINE_FUNCTION void head_dot(int lane, int lanes, const T* const (&rows)[U], const T* w,
                                     std::size_t inputs, float (&sum)[U][W]) {
  if (kHeadLanes == 1) {  // a constant: one branch compiles to nothing
    constexpr int kBatch = 8;
    for (int u = 0; u < U; ++u) {
      for (int a = 0; a < W; ++a) {
        const T* const row = rows[u];
        const T* const column = w + a;
        float dot[kBatch] = {};
        std::size_t j = 0;
        for (; j + kBatch <= inputs; j += kBatch) {
          for (int k = 0; k < kBatch; ++k)
            dot[k] += to_float(row[j + k]) * to_float(column[(j + k) * W]);
        }
        for (; j < inputs; ++j)
          dot[0] += to_float(row[j]) * to_float(column[j * W]);
        for (int k = 0; k < kBatch; ++k)
          sum[u][a] += dot[k];
      }
    }
  } else {
    const std::size_t span = std::size_t{kPack} * static_cast<std::size_t>(lanes);
    for (std::size_t j = static_cast<std::size_t>(lane) * kPack; j < inputs; j += span) {
      const int n = static_cast<int>(inputs - j < kPack ? inputs - j : kPack);
      float v[W][kPack], x[U][kPack];
      for (int q = 0; q < W; ++q) {  // the pack's weights, kPack x W values in a row
        const int left = n * W - q * kPack;
        load_pack<Whole>(w + j * W + static_cast<std::size_t>(q) * kPack,
                         left < kPack ? (left > 0 ? left : 0) : kPack, v[q]);
      }
      for (int u = 0; u < U; ++u)
        load_pack<Whole>(rows[u] + j, n, x[u]);
      for (int u = 0; u < U; ++u) {
        for (int c = 0; c < kPack; ++c) {
          for (int a = 0; a < W; ++a) {
            const int at = c * W + a;
            sum[u][a] += x[u][c] * v[at / kPack][at % kPack];
          }
        }
      }
    }
  }
}

/// Adds the head_dot shares of the `lanes` lanes of each row (or any W values of groups of
/// `lanes` aligned lanes): on return every lane holds the row's sums, added in a pairwise tree
/// (a butterfly within each row's lanes on CUDA, where every lane of the warp calls this;
/// nothing to add on the host).
template <int W, class V>
KOKKOS_INLINE_FUNCTION void lane_sums(V (&sum)[W], int lanes) {
#if defined(__CUDA_ARCH__)
  for (int half = lanes / 2; half > 0; half /= 2) {
    for (int a = 0; a < W; ++a)
      sum[a] += __shfl_xor_sync(0xffffffffu, sum[a], half);
  }
#else
  (void)sum;
  (void)lanes;
#endif
}

/// Whether head_dot may take the head's rows and weights as whole packs.
template <class T>
bool head_packs(const HeadInputs<T>& head) {
  return head.hidden.extent(2) % kPack == 0 &&
         packs_fit(head.hidden.data(), head.hidden.stride(0), head.hidden.stride(1)) &&
         packs_fit(head.weight, head.copy_stride);
}

/// q(c, r, a) = Q_c(r)[a] for every copy c of head.hidden and the first rows rows: one pass,
/// kHeadLanes threads a row (it replaces cuBLASLt's two kernels for a head of a few columns, an
/// unaligned split-K product and its reduction).
template <class T>
void head_forward(const ExecSpace& space, const HeadInputs<T>& head, std::size_t rows,
                  const gemm::StridedBatch<float>& q);

template <class T>
class Mlp {
 public:
  /// precision: fp32 or tf32 for T = float, bf16 for T = bf16. Buffers for up to max_rows
  /// states in each of up to max_sets networks evaluated together, and for the backward pass
  /// of up to max_learners of them (0: max_sets), are allocated here.
  Mlp(const ExecSpace& space, const NetworkSpec& spec, Precision precision, std::size_t max_rows,
      std::size_t max_sets = 1, std::size_t max_learners = 0);

  /// q(k, r, a) = Q_k(states(k, r))[a] for the w.count networks of w and the first rows
  /// states of each (states: batch extent 1, shared by every network, or w.count; rows x
  /// state_size, in T). Keeps the activations and a view of states for backward(), whose
  /// learners are these networks: states must outlive the backward pass.
  void forward(const ExecSpace& space, const Weights<T>& w,
               const gemm::StridedBatch<const T>& states, std::size_t rows,
               const gemm::StridedBatch<float>& q);

  /// The online networks and their targets, one batched product per hidden layer each: the
  /// M = w.count online networks at m * w.stride values into w on the first rows states of
  /// states (batch extent 1, shared by every member, or M: states(m) member m's), and their
  /// targets, member m's at (M + m) * w.stride, on rows [target_first, target_first +
  /// target_rows) of the same states only, on side (forked from space and joined back, so
  /// that the two chains of products run side by side). Returns the head's inputs of the 2M
  /// networks (copy m member m's online network, copy M + m its target, whose rows outside
  /// the target's range may not be evaluated: on CUDA one member's target is evaluated on
  /// every row, with its online network in one product a layer, where three products more
  /// would cost more than the rows they save), valid until the next pass; the head is left to
  /// the caller (head_forward, or a loss that evaluates it where it needs it). Keeps the
  /// online networks' activations for backward(), whose learners they are.
  HeadInputs<T> forward_pair(const ExecSpace& space, const exec::SideStream& side,
                             const Weights<T>& w, const gemm::StridedBatch<const T>& states,
                             std::size_t rows, std::size_t target_first, std::size_t target_rows);

  /// Where the loss writes d loss / d Q for the first rows states of each learner of the last
  /// forward pass, and the head's bias gradients in grads (the parameter layout, float).
  OutputGradient<T> output_gradient(std::size_t rows, const Gradients& grads) const;

  /// Completes grads: for each learner k of the last forward pass, the gradient with respect
  /// to every parameter of sum over r < rows, a of dq_k[r][a] * Q_k(states_k[r])[a], for
  /// the states of that pass and the dq written through output_gradient(rows, grads) before.
  /// w must be the weights of that pass (its online ones for forward_pair). The weight
  /// gradients' products run on side, forked from space as each layer's gradient is ready,
  /// beside the chain of input gradients on space; side is joined back into space at the end.
  void backward(const ExecSpace& space, const exec::SideStream& side, const Weights<T>& w,
                std::size_t rows, const Gradients& grads);

  const ParameterLayout& layout() const { return m_layout; }
  /// The head's outputs: the actions, plus one with a dueling head.
  std::size_t head_width() const { return m_head_width; }

 private:
  template <class TC>
  void product(const ExecSpace& space, gemm::Op op_a, gemm::Op op_b,
               const gemm::StridedBatch<const T>& a, const gemm::StridedBatch<const T>& b,
               const gemm::StridedBatch<TC>& c) const;

  // The hidden layers of sets weight sets (set s at s * stride values from weights) on rows
  // [first_row, first_row + rows) of states (batch extent 1, shared, or sets), into the same
  // rows of activation sets [first_set, first_set + sets); returns the last layer's
  // activations of those sets and rows [set][row][column].
  gemm::StridedBatch<const T> hidden_layers(const ExecSpace& space, const T* weights,
                                            std::size_t sets, std::size_t stride,
                                            const gemm::StridedBatch<const T>& states,
                                            std::size_t first_set, std::size_t first_row,
                                            std::size_t rows);

  // The head's inputs: the last hidden layer's activations and the head of each set (set s
  // at s * stride values into w).
  HeadInputs<T> head_inputs(const Weights<T>& w, const gemm::StridedBatch<const T>& hidden,
                            std::size_t stride) const;

  // Layer layer's activations of the learners for their first rows states.
  gemm::StridedBatch<const T> learner_hidden(std::size_t layer, std::size_t rows) const;
  // The learners' states of the last pass.
  gemm::StridedBatch<const T> learner_states(std::size_t rows) const;

  ParameterLayout m_layout;
  Precision m_precision;
  std::size_t m_max_rows, m_max_sets, m_max_learners, m_head_width = 0;
  gemm::StridedBatch<const T> m_states;  // of the last pass
  // The last pass's learners: its first m_learners networks.
  std::size_t m_learners = 0;
  // Post-ReLU activations per hidden layer: set s's rows from s * max_rows.
  std::vector<gemm::StridedBatch<T>> m_hidden;
  gemm::StridedBatch<T> m_head_grad;  // d loss / d head outputs, written by the loss
  // d loss / d Z per hidden layer (before its ReLU), [learner][row][column], each kept until
  // the side's weight-gradient product has read it.
  std::vector<gemm::StridedBatch<T>> m_layer_grads;
  // A column pass's sums per chunk of rows (bias gradient, then the head's weight gradient per
  // output), [learner][chunk][sum * width + column]: one buffer for the passes of the backward
  // chain, one at a time; and one for the head's weight gradient when a pass of its own takes
  // it beside them (one learner: m_head_partials' one sum per head output).
  MatrixBatch<float> m_column_partials, m_head_partials;
  Kokkos::View<int**, DeviceMemory> m_column_arrivals, m_head_arrivals;  // [learner][tile]
};

}  // namespace dqntrader::nn

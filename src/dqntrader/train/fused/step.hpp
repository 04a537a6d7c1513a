// The learning step of narrow networks in two kernels, for every member of a population at once
// (train::LearningStep runs it for the fused learning path: bf16, every hidden layer at most
// kMaxWidth wide; --learning-path auto takes it wherever takes() is true). The loss kernel
// (loss_kernel.cpp) takes, per member and chunk of its batch, the target network on the next
// states s', the online network on s', on a share of the environments' states and on the states
// s, the DQN rule of each sample (train/dqn_rule.hpp) and the backward chain to every layer's
// weight gradient, with the chunk's activations and both networks' weights in shared memory (one
// at a time where two do not fit) and every product on the tensor cores (tiles.hpp: mma.sync,
// bf16 operands, float accumulation). It writes the online Q-values of every row and each
// chunk's gradient and sums apart. The learn kernel (learn_kernel.cpp), one cooperative grid,
// adds the chunks' parts in a fixed order into the gradient and the loss's sums and the squares
// of the gradient's values by blocks; once the whole grid has, every member's Adam step
// (nn/adam_rule.hpp, as Adam::step) from the blocks' sums in a fixed order. No atomics: the same
// inputs give the same bits. The kernels are built with CUDA only; elsewhere takes() is false
// and no Step can be made.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dqntrader/core/bf16.hpp"
#include "dqntrader/core/member_settings.hpp"
#include "dqntrader/core/types.hpp"
#include "dqntrader/nn/adam_rule.hpp"
#include "dqntrader/train/fused/plan.hpp"

namespace dqntrader::train::fused {

/// Whether Step takes networks of this shape on this build and device (plan.hpp's fits() for
/// the device's shared memory; false without CUDA).
bool takes(const Shape& shape);

/// What a step reads: the networks (bf16 working copies, member m's online network at m *
/// stride values, its target at (M + m) * stride; the heads' biases from the float master
/// copy, laid out alike), the states (member m's row r at m * state_member + r * state_row:
/// rows [0, B) s, [B, 2B) s', [2B, 2B + E) the environments'), the batch (entry m B + i) and
/// each member's Huber threshold.
struct Inputs {
  const bf16* working = nullptr;
  const float* master = nullptr;
  std::size_t stride = 0;
  const bf16* states = nullptr;
  std::size_t state_member = 0, state_row = 0;
  const std::int8_t* action = nullptr;
  const float* return_n = nullptr;
  const float* discount = nullptr;
  const MemberSettings* settings = nullptr;
};

/// What learn() updates, laid out as Adam's state (nn::Adam): member m's float parameters, their
/// bf16 working copy and both moments at m * stride, its counters and settings at m. A member
/// whose active[m] is 0 stays as it is (active null: every member steps).
struct Update {
  float* parameters = nullptr;
  bf16* working = nullptr;
  float *m = nullptr, *v = nullptr;
  std::size_t stride = 0;
  nn::AdamCounters* counters = nullptr;
  const nn::AdamSettings* settings = nullptr;
  const int* active = nullptr;
};

class Step {
 public:
  /// For members networks of shape (takes(shape)), batches of batch samples and environments
  /// further rows; chunks the batches for the device and allocates their parts.
  Step(const ExecSpace& space, const Shape& shape, std::size_t members, std::size_t batch,
       std::size_t environments);

  /// The loss kernel: Q_online of every row into q (member m's row r, action a at m *
  /// q_member + r * q_row + a) and every chunk's parts.
  void loss(const ExecSpace& space, const Inputs& in, float* q, std::size_t q_member,
            std::size_t q_row) const;

  /// The learn kernel, after loss(): member m's gradient of its mean loss at m * grad_stride
  /// into grads; its batch's sums (loss, Q, 1 when every value was finite) at 3 m into sums,
  /// and the loss, Q and one batch added to the totals at 3 m; then every member's Adam step
  /// with its gradient, as update says.
  void learn(const ExecSpace& space, float* grads, std::size_t grad_stride, double* sums,
             double* totals, const Update& update) const;

  /// Where learn() reads member m's gradient from, loss()'s parts, by chunks: the first
  /// chunk's at m * part_member() floats from parts(), in the layout of the parameters.
  float* parts() const { return m_partials.data(); }
  std::size_t part_member() const {
    return static_cast<std::size_t>(m_chunks.chunks) * part_stride(m_shape);
  }

 private:
  Shape m_shape;
  std::size_t m_members, m_batch, m_environments;
  Chunking m_chunks;
  Kokkos::View<float*, DeviceMemory> m_partials;       // [member][chunk][parameter]
  Kokkos::View<double*, DeviceMemory> m_partial_sums;  // [member][chunk][sum]
  int m_norm_blocks = 0;  // blocks of a member's gradient whose squares learn() sums apart
  int m_grid = 0;         // learn()'s blocks: at most as many as the device holds at once
  Kokkos::View<double*, DeviceMemory> m_norms;               // [member][block]
  Kokkos::View<nn::AdamCounters*, DeviceMemory> m_counters;  // [member]: before the step
};

}  // namespace dqntrader::train::fused

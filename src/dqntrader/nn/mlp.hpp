// The Q-network's forward and backward passes over a batch of states, for training.
//
// Parameters live in one flat float buffer (ParameterLayout); the products read a working
// copy in the compute type T (bf16 on CUDA by default, else the float buffer itself). Hidden
// biases are read from the working copy, the head's bias from the float buffer.
#pragma once

#include <cstddef>
#include <vector>

#include "backends/gemm.hpp"
#include "dqntrader/core/bf16.hpp"
#include "dqntrader/core/precision.hpp"
#include "dqntrader/core/types.hpp"
#include "dqntrader/nn/network_spec.hpp"

namespace dqntrader::nn {

template <class T>
struct Weights {
  Kokkos::View<const T*, DeviceMemory> working;     // the layout, in the compute type
  Kokkos::View<const float*, DeviceMemory> master;  // the layout, float
};

template <class T>
class Mlp {
 public:
  /// precision: fp32 or tf32 for T = float, bf16 for T = bf16. Buffers for up to max_rows
  /// states are allocated here, for copies (1 or 2) networks evaluated together.
  Mlp(const ExecSpace& space, const NetworkSpec& spec, Precision precision, std::size_t max_rows,
      std::size_t copies = 1);

  /// q[r][a] = Q(states[r])[a] for the first rows states (states: rows x state_size, in T).
  /// Keeps the activations (and a reference to states) for backward().
  void forward(const ExecSpace& space, const Weights<T>& w, const Matrix<const T>& states,
               std::size_t rows, const Matrix<float>& q);

  /// Two weight sets on the same states, one batched product per layer: w and a second set
  /// in the same layout target_offset elements further in both w.working and w.master (the
  /// target network). q(0, r, a) = Q(states[r])[a] under w, q(1, r, a) under the second set,
  /// for the first rows states. Needs two copies; keeps w's activations for backward().
  void forward_pair(const ExecSpace& space, const Weights<T>& w, std::size_t target_offset,
                    const Matrix<const T>& states, std::size_t rows, const MatrixBatch<float>& q);

  /// Writes into grads (flat, float, same layout) the gradient, with respect to every
  /// parameter, of sum over r < rows, a of dq[r][a] * Q(states[r])[a], for the states of the
  /// last forward() (rows <= its rows).
  void backward(const ExecSpace& space, const Weights<T>& w, const Matrix<const float>& dq,
                std::size_t rows, const Kokkos::View<float*, DeviceMemory>& grads);

  const ParameterLayout& layout() const { return m_layout; }

 private:
  template <class TC>
  void product(const ExecSpace& space, gemm::Op op_a, gemm::Op op_b, const Matrix<const T>& a,
               const Matrix<const T>& b, const Matrix<TC>& c,
               const gemm::Epilogue<TC>& epilogue) const;

  // The first copy's first rows: the activations backward() uses.
  Matrix<T> hidden(std::size_t layer, std::size_t rows) const;
  Matrix<float> head_out(std::size_t rows) const;

  ParameterLayout m_layout;
  Precision m_precision;
  std::size_t m_max_rows, m_copies, m_head_width;
  Matrix<const T> m_states;
  // Post-ReLU activations per hidden layer and, with a dueling head, [V | A] before
  // combining: [copy][row][column], max_rows rows a copy.
  std::vector<Kokkos::View<T*, DeviceMemory>> m_hidden_copies;
  Kokkos::View<float*, DeviceMemory> m_head_out_copies;
  Matrix<float> m_head_grad;        // d loss / d head outputs
  Matrix<T> m_head_grad_t;          // the same in the compute type
  Matrix<T> m_grad_a, m_grad_b;     // activation gradients, ping-pong
  Matrix<float> m_column_partials;  // bias gradients: partial sums per chunk of rows
  Kokkos::View<int*, DeviceMemory> m_column_arrivals;  // chunks summed, per column tile
};

}  // namespace dqntrader::nn

// The shape of a Q-network and the layout of its parameters in one flat float buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dqntrader::nn {

/// An MLP from the state (features + one-hot of the incoming position) to one Q-value per
/// action: hidden layers with ReLU, then a linear head. With dueling, the head is two
/// streams on the last hidden layer, value V (1 output) and advantage A (one per action),
/// combined as Q = V + A - mean(A).
struct NetworkSpec {
  std::size_t features = 0;   // feature columns of the state
  std::size_t positions = 3;  // incoming-position one-hot width
  std::vector<std::size_t> hidden = {512, 512, 512};
  std::size_t actions = 3;
  bool dueling = false;

  std::size_t state_size() const { return features + positions; }
  bool operator==(const NetworkSpec& other) const;
};

/// "state-hidden...-actions", with " dueling" for a dueling head, e.g. "24-128-128-3".
std::string describe(const NetworkSpec& spec);

/// Where each tensor lives in the flat parameter buffer. Weights are row-major
/// [inputs x outputs] (y = x W + b); the first layer's weight has state_size() rows: the
/// feature rows first, then one row per incoming position.
struct Tensor {
  std::string name;
  std::size_t rows, cols;  // a bias has rows = 1
  std::size_t offset;      // in floats
  std::size_t size() const { return rows * cols; }
};

class ParameterLayout {
 public:
  explicit ParameterLayout(const NetworkSpec& spec);

  const NetworkSpec& spec() const { return m_spec; }
  std::size_t size() const { return m_size; }  // floats in the buffer
  /// Hidden and head layers in order: weight(i), bias(i) for i < layers(). The last layer
  /// is the head: Q directly, or with dueling one layer of 1 + actions outputs, column 0
  /// the value V and columns 1.. the advantages A.
  std::size_t layers() const { return m_weights.size(); }
  const Tensor& weight(std::size_t i) const { return m_weights[i]; }
  const Tensor& bias(std::size_t i) const { return m_biases[i]; }
  std::size_t hidden_layers() const { return m_spec.hidden.size(); }

 private:
  NetworkSpec m_spec;
  std::vector<Tensor> m_weights, m_biases;
  std::size_t m_size = 0;
};

/// Fresh parameters: He-uniform weights for ReLU layers, uniform(+-1/sqrt(fan_in)) for the
/// heads, zero biases; drawn from the seed, the same on every machine.
std::vector<float> initial_parameters(const ParameterLayout& layout, std::uint64_t seed);

/// Checks a spec: at least one feature and one hidden layer, actions >= 2, positions >= 1.
/// Throws InputError.
void validate(const NetworkSpec& spec);

}  // namespace dqntrader::nn

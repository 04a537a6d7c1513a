#include "dqntrader/nn/network_spec.hpp"

#include <cmath>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/random.hpp"

namespace dqntrader::nn {

bool NetworkSpec::operator==(const NetworkSpec& other) const {
  return features == other.features && positions == other.positions && hidden == other.hidden &&
         actions == other.actions && dueling == other.dueling;
}

std::string describe(const NetworkSpec& spec) {
  std::string text = std::to_string(spec.state_size());
  for (std::size_t w : spec.hidden)
    text.append("-").append(std::to_string(w));
  text.append("-").append(std::to_string(spec.actions));
  return spec.dueling ? text + " dueling" : text;
}

void validate(const NetworkSpec& spec) {
  if (spec.features == 0)
    throw InputError("the network needs at least one feature");
  if (spec.positions == 0)
    throw InputError("the network needs at least one position");
  if (spec.hidden.empty())
    throw InputError("the network needs at least one hidden layer");
  for (std::size_t width : spec.hidden) {
    if (width == 0)
      throw InputError("hidden layer widths must be positive");
  }
  if (spec.actions < 2)
    throw InputError("the network needs at least two actions");
}

ParameterLayout::ParameterLayout(const NetworkSpec& spec) : m_spec(spec) {
  validate(spec);
  auto add = [&](const std::string& name, std::size_t in, std::size_t out) {
    m_weights.push_back(Tensor{name + ".weight", in, out, m_size});
    m_size += in * out;
    m_biases.push_back(Tensor{name + ".bias", 1, out, m_size});
    m_size += out;
  };
  std::size_t in = spec.state_size();
  for (std::size_t i = 0; i < spec.hidden.size(); ++i) {
    add("hidden" + std::to_string(i), in, spec.hidden[i]);
    in = spec.hidden[i];
  }
  if (spec.dueling) {
    add("dueling_head", in, 1 + spec.actions);  // column 0: value V; columns 1..: advantages A
  } else {
    add("q", in, spec.actions);
  }
}

std::vector<float> initial_parameters(const ParameterLayout& layout, std::uint64_t seed) {
  std::vector<float> parameters(layout.size(), 0.0f);
  HostRng rng(seed);
  for (std::size_t i = 0; i < layout.layers(); ++i) {
    const Tensor& w = layout.weight(i);
    const bool relu = i < layout.hidden_layers();
    const double limit =
        relu ? std::sqrt(6.0 / w.rows) : 1.0 / std::sqrt(static_cast<double>(w.rows));
    for (std::size_t k = 0; k < w.size(); ++k) {
      parameters[w.offset + k] = static_cast<float>((2.0 * rng.uniform() - 1.0) * limit);
    }
  }
  return parameters;
}

}  // namespace dqntrader::nn

// The fused step where the build has no CUDA: it takes no network, so that the learning step
// never makes one (train/learning_step.cpp asks takes() first; --learning-path fused is refused
// there with what it needs).
#include <string>

#include "dqntrader/core/error.hpp"
#include "dqntrader/train/fused/step.hpp"

namespace dqntrader::train::fused {

namespace {

[[noreturn]] void refuse() {
  throw InputError("fused step: built only with CUDA");
}

}  // namespace

bool takes(const Shape&) {
  return false;
}

Step::Step(const ExecSpace&, const Shape& shape, std::size_t members, std::size_t batch,
           std::size_t environments)
    : m_shape(shape), m_members(members), m_batch(batch), m_environments(environments) {
  refuse();
}

void Step::loss(const ExecSpace&, const Inputs&, float*, std::size_t, std::size_t) const {
  refuse();
}

void Step::learn(const ExecSpace&, float*, std::size_t, double*, double*, const Update&) const {
  refuse();
}

}  // namespace dqntrader::train::fused

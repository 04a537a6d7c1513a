#include "dqntrader/train/learning_step.hpp"

namespace dqntrader::train {

template <class T>
LearningStep<T>::LearningStep(const ExecSpace& space, const nn::NetworkSpec& spec,
                              Precision precision, std::size_t members, std::size_t batch_size,
                              std::size_t environments, std::size_t max_rows)
    : m_batch_size(batch_size),
      m_environments(environments),
      m_net(space, spec, precision, max_rows, 2 * members, members),
      m_td(space, members, batch_size, environments, m_net.head_width()) {}

template <class T>
void LearningStep<T>::evaluate(const ExecSpace& space, const nn::Weights<T>& online,
                               const gemm::StridedBatch<const T>& states, std::size_t rows,
                               const gemm::StridedBatch<float>& q) {
  m_net.forward(space, online, states, rows, q);
}

template <class T>
void LearningStep<T>::loss(const ExecSpace& space, const exec::SideStream& side,
                           const nn::Weights<T>& pair, const gemm::StridedBatch<const T>& states,
                           const replay::Batch& batch,
                           const Kokkos::View<const MemberSettings*, DeviceMemory>& settings,
                           const gemm::StridedBatch<float>& q, const nn::Gradients& grads) {
  const std::size_t b = m_batch_size, rows = 2 * b + m_environments;
  // The hidden layers of both networks; the TD loss evaluates the heads on the rows it reads.
  const nn::HeadInputs<T> head = m_net.forward_pair(space, side, pair, states, rows, b, b);
  m_partials = m_td.compute(space, head, rows, q, batch, settings, m_net.output_gradient(b, grads));
}

template <class T>
void LearningStep<T>::gradients(const ExecSpace& space, const exec::SideStream& side,
                                const nn::Weights<T>& online, const nn::Gradients& grads,
                                const Kokkos::View<LossSums*, DeviceMemory>& sums,
                                const Kokkos::View<LossTotals*, DeviceMemory>& totals) {
  // The loss's sums across teams and the heads' bias gradients on the side, beside the
  // heads' backward pass (Mlp::backward joins the side at its end).
  const std::size_t b = m_batch_size;
  m_td.add(side.space(), m_partials, m_net.output_gradient(b, grads), sums, totals);
  m_net.backward(space, side, online, b, grads);
}

template class LearningStep<float>;
template class LearningStep<bf16>;

}  // namespace dqntrader::train

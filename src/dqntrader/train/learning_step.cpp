#include "dqntrader/train/learning_step.hpp"

#include <type_traits>

#include "backends/gemm.hpp"
#include "dqntrader/core/error.hpp"
#include "dqntrader/train/fused/step.hpp"

namespace dqntrader::train {

bool fused_takes(const nn::NetworkSpec& spec, Precision precision) {
  return precision == Precision::bf16 && fused::takes(fused::shape_of(spec));
}

std::size_t learning_step_bytes(LearningPath path, const nn::NetworkSpec& spec, Precision precision,
                                std::size_t batch_size, std::size_t rows) {
  if (path == LearningPath::fused)
    return fused::member_bytes(fused::shape_of(spec), batch_size);
  std::size_t widths = 0;
  for (std::size_t w : spec.hidden)
    widths += (w + 8) / 8 * 8;
  return rows * widths * (precision == Precision::bf16 ? 2 : 4);
}

LearningPath choose(const std::string& requested, const nn::NetworkSpec& spec,
                    Precision precision) {
  if (requested == "fused")
    return LearningPath::fused;
  if (requested == "auto" && fused_takes(spec, precision))
    return LearningPath::fused;
  return LearningPath::products;
}

std::string describe(LearningPath path) {
  if (path == LearningPath::fused)
    return "fused narrow MLP";
  // The library's name and release, without where it was loaded from.
  const std::string library = gemm::library_description();
  return "batched products (" + library.substr(0, library.find(" (")) + ")";
}

template <class T>
LearningStep<T>::LearningStep(const ExecSpace& space, const nn::NetworkSpec& spec,
                              Precision precision, std::size_t members, std::size_t batch_size,
                              std::size_t environments, std::size_t max_rows, LearningPath path)
    : m_path(path),
      m_batch_size(batch_size),
      m_environments(environments),
      m_net(space, spec, precision, max_rows, path == LearningPath::fused ? members : 2 * members,
            members) {
  if (path == LearningPath::products) {
    m_td = std::make_unique<TdLoss>(space, members, batch_size, environments, m_net.head_width());
    return;
  }
  if (!fused_takes(spec, precision)) {
    throw InputError(
        "learning-path fused: it trains on CUDA in bf16 networks of 1 to 4 hidden "
        "layers at most 128 wide, not a " +
        nn::describe(spec) + " network in " + to_string(precision));
  }
  m_fused = std::make_unique<fused::Step>(space, fused::shape_of(spec), members, batch_size,
                                          environments);
}

template <class T>
LearningStep<T>::~LearningStep() = default;

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
  if constexpr (std::is_same<T, bf16>::value) {
    if (m_path == LearningPath::fused) {
      fused::Inputs in;
      in.working = pair.working.data();
      in.master = pair.master.data();
      in.stride = pair.stride;
      in.states = states.data();
      in.state_member = states.stride(0);
      in.state_row = states.stride(1);
      in.action = batch.action.data();
      in.return_n = batch.return_n.data();
      in.discount = batch.discount.data();
      in.settings = settings.data();
      m_fused->loss(space, in, q.data(), q.stride(0), q.stride(1));
      return;
    }
  }
  // The hidden layers of both networks; the TD loss evaluates the heads on the rows it reads.
  const nn::HeadInputs<T> head = m_net.forward_pair(space, side, pair, states, rows, b, b);
  m_partials =
      m_td->compute(space, head, rows, q, batch, settings, m_net.output_gradient(b, grads));
}

template <class T>
void LearningStep<T>::learn(const ExecSpace& space, const exec::SideStream& side,
                            const nn::Weights<T>& online, const nn::Gradients& grads,
                            const Kokkos::View<LossSums*, DeviceMemory>& sums,
                            const Kokkos::View<LossTotals*, DeviceMemory>& totals,
                            const Update<T>& update, const InjectedFaults& faults) {
  if constexpr (std::is_same<T, bf16>::value) {
    if (m_path == LearningPath::fused) {
      static_assert(
          sizeof(LossSums) == 3 * sizeof(double) && sizeof(LossTotals) == 3 * sizeof(double),
          "the fused step writes the sums as three doubles a member");
      // The gradient and Adam's step are one kernel: a fault goes into the chunks' parts.
      faults.after_gradients(space, m_fused->parts(), m_fused->part_member());
      const nn::Adam& adam = *update.adam;
      const nn::MemberVectors& layout = adam.layout();
      if (layout.members != grads.count || update.parameters.extent(0) < layout.extent() ||
          update.working.extent(0) < layout.extent() ||
          (update.active.extent(0) != 0 && update.active.extent(0) < layout.members)) {
        throw Error("LearningStep::learn: the parameter buffers do not fit Adam's members");
      }
      fused::Update u;
      u.parameters = update.parameters.data();
      u.working = update.working.data();
      u.m = adam.first_moment().data();
      u.v = adam.second_moment().data();
      u.stride = adam.layout().stride;
      u.counters = adam.counters().data();
      u.settings = adam.device_settings().data();
      u.active = update.active.extent(0) == 0 ? nullptr : update.active.data();
      m_fused->learn(space, grads.values.data(), grads.stride,
                     reinterpret_cast<double*>(sums.data()),
                     reinterpret_cast<double*>(totals.data()), u);
      side.join(space);
      return;
    }
  }
  // The loss's sums across teams and the heads' bias gradients on the side, beside the
  // heads' backward pass (Mlp::backward joins the side at its end).
  const std::size_t b = m_batch_size;
  m_td->add(side.space(), m_partials, m_net.output_gradient(b, grads), sums, totals);
  m_net.backward(space, side, online, b, grads);
  faults.after_gradients(space, grads.values.data(), grads.stride);
  update.adam->step(space, update.parameters,
                    Kokkos::View<const float*, DeviceMemory>(grads.values), grads.stride,
                    update.working, update.active);
}

template class LearningStep<float>;
template class LearningStep<bf16>;

}  // namespace dqntrader::train

// The network work of a learning step for every member of a population, as the trainer asks
// for it: the online networks and their targets on the step's states, the double-DQN TD loss
// (td_loss.hpp) with the online Q-values of every row, the gradient of every member's online
// parameters and Adam's step with it. The trainer does not see how; there are two paths
// (LearningPath).
#pragma once

#include <cstddef>
#include <memory>

#include "backends/execution.hpp"
#include "dqntrader/core/member_settings.hpp"
#include "dqntrader/core/precision.hpp"
#include "dqntrader/nn/adam.hpp"
#include "dqntrader/nn/mlp.hpp"
#include "dqntrader/replay/replay_buffer.hpp"
#include "dqntrader/train/injected_faults.hpp"
#include "dqntrader/train/learning_path.hpp"
#include "dqntrader/train/td_loss.hpp"

namespace dqntrader::train {

namespace fused {
class Step;
}

/// What learn() updates by adam: every member's online parameters (float, a stride apart as
/// the gradients) and their working copy (empty in float). A member whose active(m) is 0 stays
/// as it is (active empty: every member steps).
template <class T>
struct Update {
  nn::Adam* adam = nullptr;
  Kokkos::View<float*, DeviceMemory> parameters;
  Kokkos::View<T*, DeviceMemory> working;
  Kokkos::View<const int*, DeviceMemory> active;
};

template <class T>
class LearningStep {
 public:
  /// For members networks of spec, batches of batch_size samples, environments further rows
  /// a learning step evaluates, and up to max_rows rows of states in evaluate(); on path
  /// (InputError when fused does not take the networks).
  LearningStep(const ExecSpace& space, const nn::NetworkSpec& spec, Precision precision,
               std::size_t members, std::size_t batch_size, std::size_t environments,
               std::size_t max_rows, LearningPath path);
  ~LearningStep();
  LearningStep(const LearningStep&) = delete;
  LearningStep& operator=(const LearningStep&) = delete;

  /// q(m, r, :) = Q of member m's online network (online: every member's, a stride apart) on
  /// states(m, r) for the first rows rows (states: one matrix per member, or one shared).
  void evaluate(const ExecSpace& space, const nn::Weights<T>& online,
                const gemm::StridedBatch<const T>& states, std::size_t rows,
                const gemm::StridedBatch<float>& q);

  /// The loss of a learning step: member m's states(m) hold its batch's states s (rows [0, B)),
  /// next states s' (rows [B, 2B)) and its environments' states (the further rows, to 2B + E);
  /// pair holds every member's online network, then every member's target. Writes Q_online of
  /// every row into q (the environments act on rows [2B, 2B + E)) and d loss / d Q where
  /// gradients() reads it; settings(m).huber_delta is member m's threshold. Uses side.
  void loss(const ExecSpace& space, const exec::SideStream& side, const nn::Weights<T>& pair,
            const gemm::StridedBatch<const T>& states, const replay::Batch& batch,
            const Kokkos::View<const MemberSettings*, DeviceMemory>& settings,
            const gemm::StridedBatch<float>& q, const nn::Gradients& grads);

  /// After loss(): every member's gradient of its mean loss into grads, the batch's sums
  /// into sums(m), added to totals(m); then faults.after_gradients() on what the update
  /// reads, and every member's Adam step with its gradient, as update says. The sums go on
  /// side first (forked by the caller, which may have put other work there after loss());
  /// side is joined back into space by the end.
  void learn(const ExecSpace& space, const exec::SideStream& side, const nn::Weights<T>& online,
             const nn::Gradients& grads, const Kokkos::View<LossSums*, DeviceMemory>& sums,
             const Kokkos::View<LossTotals*, DeviceMemory>& totals, const Update<T>& update,
             const InjectedFaults& faults);

  const nn::ParameterLayout& layout() const { return m_net.layout(); }
  LearningPath path() const { return m_path; }

 private:
  LearningPath m_path;
  std::size_t m_batch_size, m_environments;
  // evaluate()'s networks; on the products path every member's online network and the
  // targets with them, and their backward pass.
  nn::Mlp<T> m_net;
  std::unique_ptr<TdLoss> m_td;          // products
  TdLoss::Partials m_partials;           // products: the last loss()'s sums across teams
  std::unique_ptr<fused::Step> m_fused;  // fused
};

}  // namespace dqntrader::train

// The double-DQN TD loss of the products path, fused in one kernel with the network's head: per
// sample the rule of train/dqn_rule.hpp (the double-DQN target, the Huber loss and d loss / d
// Q), the loss being the mean of huber(d) over the batch.
// The kernel evaluates the head itself, from the last hidden layer of both networks, on the
// rows the loss reads (the target's Q on s is never computed), so that no pass of its own
// computes Q first. The gradient goes straight to where the network's backward pass reads it,
// so no other kernel converts it; the batch's sums and the head's bias gradient (the
// gradient's column sums) are added across teams by a second kernel, which may run on another
// stream. Both take every member of a population at once (of M members, member m's online
// network is head copy m, its target copy M + m), each with its own Huber threshold.
#pragma once

#include "dqntrader/core/member_settings.hpp"
#include "dqntrader/core/types.hpp"
#include "dqntrader/nn/mlp.hpp"
#include "dqntrader/replay/replay_buffer.hpp"

namespace dqntrader::train {

struct LossSums {
  double loss;    // sum of huber(d) over the batch
  double q;       // sum of Q_online(s, a)
  double finite;  // 1 when every value was finite, else 0 (a minimum)
};

/// Running sums over many batches (an epoch's).
struct LossTotals {
  double loss;     // sum of huber(d) over every sample
  double q;        // sum of Q_online(s, a) over every sample
  double batches;  // batches added
};

/// The fused kernel, the kernel that adds its teams' sums, and the device buffer between them.
class TdLoss {
 public:
  /// For members networks, batches of up to batch_size samples, up to `further` further rows
  /// and a head of up to width outputs.
  TdLoss(const ExecSpace& space, std::size_t members, std::size_t batch_size, std::size_t further,
         std::size_t width);

  /// A batch's sums, one set per team of compute(), for add().
  struct Partials {
    Kokkos::View<const double*, DeviceMemory> values;  // [member][sum][team]
    int teams = 0;                                     // per member
    std::size_t width = 0;                             // the head's
  };

  /// For each member m of M = gradient.learners(): head copies m and M + m, the last hidden
  /// layer of its online and target networks, on rows [0, B) the states s, [B, 2B) the next
  /// states s' and [2B, rows) further states (the environments'); its batch is entries
  /// [m B, (m + 1) B) of batch, B = batch.size() / M. Writes Q_online of every one of the rows
  /// into q (member, row, action; the guard and the environments read it), dL/dQ_online(s)
  /// (B rows) through gradient.write_row, and the batch's sums team by team, which it returns
  /// for add(); settings(m).huber_delta is member m's threshold. One kernel, whose teams never
  /// wait for each other.
  template <class T>
  Partials compute(const ExecSpace& space, const nn::HeadInputs<T>& head, std::size_t rows,
                   const gemm::StridedBatch<float>& q, const replay::Batch& batch,
                   const Kokkos::View<const MemberSettings*, DeviceMemory>& settings,
                   const nn::OutputGradient<T>& gradient) const;

  /// Adds the sums of compute() (on space, ordered after it; before the next compute()): each
  /// member's batch sums into sums(m), added to totals(m), and its gradient's column sums, the
  /// head's bias gradient, through gradient.write_bias. One kernel of one team per member; the
  /// sums are taken in a fixed order.
  template <class T>
  void add(const ExecSpace& space, const Partials& partials, const nn::OutputGradient<T>& gradient,
           const Kokkos::View<LossSums*, DeviceMemory>& sums,
           const Kokkos::View<LossTotals*, DeviceMemory>& totals) const;

 private:
  std::size_t m_members, m_batch_size, m_further, m_width;
  Kokkos::View<double*, DeviceMemory> m_partials;  // per member and team: its sums
};

}  // namespace dqntrader::train

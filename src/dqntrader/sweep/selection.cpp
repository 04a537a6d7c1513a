#include "dqntrader/sweep/selection.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "dqntrader/core/error.hpp"
#include "dqntrader/core/kokkos_compat.hpp"
#include "dqntrader/core/transfer.hpp"
#include "dqntrader/data/features.hpp"
#include "dqntrader/eval/backtest_evaluator.hpp"
#include "dqntrader/eval/policy_file.hpp"
#include "dqntrader/eval/selection_statistics.hpp"
#include "dqntrader/io/json_values.hpp"
#include "dqntrader/train/run_data.hpp"
#include "dqntrader/train/train_config.hpp"

namespace dqntrader::sweep {

namespace {

// A member whose selected policy takes part, and its column of the return matrix.
struct Candidate {
  std::size_t member = 0;
  eval::PolicyFile policy;
  std::size_t column = 0;
};

}  // namespace

nlohmann::json logit_histogram(const std::vector<double>& logits) {
  // A logit is ln(w / (1 - w)) of a rank w that moves in halves: at most 2N + 1 values occur.
  std::map<double, std::size_t> counts;
  for (double l : logits)
    ++counts[l];
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [logit, splits] : counts)
    out.push_back({{"logit", io::json_number(logit)}, {"splits", splits}});
  return out;
}

// The most policies one evaluation takes at once: a population's most members (the evaluator's
// activations are bounded however many it takes: eval::evaluation_chunk).
constexpr std::size_t kPoliciesAtOnce = 256;

nlohmann::json selection_json(const ExecSpace& space, const SweepPlan& plan) {
  std::vector<Candidate> candidates;
  for (const MemberPlan& m : plan.members) {
    if (m.result.best_epoch > 0 && std::isfinite(m.result.validation_sharpe) &&
        (m.result.status == "finished" || m.result.status == "stopped early")) {
      Candidate c;
      c.member = m.id;
      candidates.push_back(std::move(c));
    }
  }
  nlohmann::json j = {{"trials", candidates.size()}, {"blocks", plan.pbo_blocks}};
  if (candidates.size() < 2) {
    j["note"] =
        "the selection statistics need two or more members with a best policy; this "
        "sweep has " +
        std::to_string(candidates.size());
    return j;
  }
  // The winner: the leaderboard's first (the best validation Sharpe, the first of equals).
  std::size_t winner = candidates.front().member;
  for (const Candidate& c : candidates) {
    if (plan.members[c.member].result.validation_sharpe >
        plan.members[winner].result.validation_sharpe)
      winner = c.member;
  }

  // The data the members were trained and validated on (every member shares it), and the
  // validation window every candidate's features define (their warm-ups may differ).
  const train::TrainConfig config = member_config(plan, candidates.front().member);
  const train::RunData data = train::load_run_data(config);
  const data::Bars& bars = data.separate_validation() ? data.validation : data.bars;
  std::size_t begin = 0, end = bars.size();
  for (Candidate& c : candidates) {
    const std::string path = plan.directory + "/" + plan.members[c.member].run + "/best.dqnpolicy";
    c.policy = eval::read_policy(path);
    train::check_same_data(data, c.policy, path);
    const train::RunWindows w =
        train::split_windows(member_config(plan, c.member), data.bars.size(),
                             data.validation.size(), c.policy.features.warmup());
    begin = std::max(begin, w.val_begin);
    end = std::min(end, w.val_end);
  }
  const eval::BarRange window{begin, end};
  j["window"] = {
      {"first_bar", window.begin}, {"last_bar", window.end - 1}, {"returns", window.returns()}};

  // One column a candidate, those that share an evaluator side by side: each group's features
  // once, its policies in batches of at most kPoliciesAtOnce (the evaluator's buffers grow
  // with the policies it takes at once; a sweep may hold thousands).
  eval::ReturnMatrix returns(
      Kokkos::view_alloc(space, std::string("dqntrader::sweep::selection_returns")),
      window.returns(), candidates.size());
  std::vector<const eval::PolicyFile*> policies;
  for (const Candidate& c : candidates)
    policies.push_back(&c.policy);
  std::size_t column = 0;
  for (const std::vector<std::size_t>& group : eval::evaluator_groups(policies)) {
    for (std::size_t i : group)
      candidates[i].column = column++;
    const eval::PolicyFile& policy = candidates[group.front()].policy;
    const data::FeatureSet features(space, bars, policy.features);
    const std::size_t batch = std::min(group.size(), kPoliciesAtOnce);
    eval::BacktestEvaluator evaluator(space, features, policy.stats, policy.network, window,
                                      train::backtest_config(config, policy.positions), batch);
    for (std::size_t first = 0; first < group.size(); first += batch) {
      const std::size_t count = std::min(batch, group.size() - first);
      std::vector<float> rows;
      for (std::size_t i = first; i < first + count; ++i) {
        const std::vector<float>& p = candidates[group[i]].policy.parameters;
        rows.insert(rows.end(), p.begin(), p.end());
      }
      const auto device = upload(space, rows, "dqntrader::sweep::selection_policies");
      evaluator.enqueue_returns(
          eval::parameter_rows(device.data(), count, policy.parameters.size()), returns,
          candidates[group[first]].column);
      compat::fence(space, "dqntrader::sweep: the batch's parameters go out of scope");
    }
  }
  std::size_t winner_column = 0;
  nlohmann::json members = nlohmann::json::array();
  std::vector<std::size_t> by_column(candidates.size());
  for (const Candidate& c : candidates) {
    by_column[c.column] = c.member;
    if (c.member == winner)
      winner_column = c.column;
  }
  for (std::size_t member : by_column)
    members.push_back(member);
  j["members"] = members;  // the matrix's columns

  eval::SelectionStatistics s;
  try {
    s = eval::selection_statistics(space, returns, winner_column, plan.pbo_blocks);
  } catch (const InputError& e) {
    j["note"] = e.what();
    return j;
  }
  const double annual = std::sqrt(config.bars_per_year);
  const MemberResult& best = plan.members[winner].result;
  j["winner"] = {
      {"member", winner},
      {"run", plan.members[winner].run},
      {"validation_sharpe", io::json_number(best.validation_sharpe)},
      {"test_sharpe", best.test.contains("sharpe") ? best.test["sharpe"] : nlohmann::json(nullptr)},
      {"sharpe_per_bar", io::json_number(s.sharpes[winner_column])},
      {"skewness", io::json_number(s.skewness)},
      {"kurtosis", io::json_number(s.kurtosis)}};
  j["sharpe_variance"] = io::json_number(s.sharpe_variance);
  j["expected_max_sharpe"] = io::json_number(s.expected_max_sharpe);
  j["expected_max_sharpe_annualised"] = io::json_number(s.expected_max_sharpe * annual);
  j["deflated_sharpe"] = io::json_number(s.deflated_sharpe);
  j["pbo"] = io::json_number(s.pbo);
  j["probability_of_loss"] = io::json_number(s.probability_of_loss);
  j["slope"] = io::json_number(s.slope);
  j["splits"] = s.logits.size();
  j["dropped"] = s.dropped;
  if (!s.pbo_note.empty())
    j["pbo_note"] = s.pbo_note;
  j["logit_histogram"] = logit_histogram(s.logits);
  return j;
}

}  // namespace dqntrader::sweep

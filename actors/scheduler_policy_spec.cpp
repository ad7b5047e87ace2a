// SchedulerPolicy's speculative decoding: how many proposals a decode
// feeds (from its acceptance rate), asking the proposer for every
// speculating decode at once, and what a verification teaches.
#include <algorithm>

#include "actors/scheduler_policy.hpp"
#include "actors/scheduler_policy_step.hpp"

namespace troupe {

// The proposals a decode of `s` feeds this step: as many as its acceptance
// rate makes worth their cost, within the step's slack, the request's
// max_new_tokens and the length limit (so the tokens a step adds never pass
// them), and what the proposer finds. Fills draft_scratch_.
int32_t SchedulerPolicy::draft_length(Seq& s, const StepState& st) const {
  if (!s.speculative) return 0;
  // Laplace's rule on decayed counts: 1/2 before any verification.
  const double r = (s.spec_hits + 1.0) / (s.spec_trials + 2.0);
  // Verifying a token, plus making it (nothing for a lookup, a share of a
  // step for a draft model).
  const double token_cost = cfg_.spec_token_cost + proposer_->cost_per_token();
  int32_t best_k = 0;
  double best = 1.0;
  double reach = 1.0;  // r^k: the chance that all of k proposals are accepted
  double expected = 1.0;
  for (int32_t k = 1; k <= cfg_.spec_max_draft; ++k) {
    reach *= r;
    expected += reach;
    const double gain = expected / (1.0 + token_cost * k);
    if (gain > best) {
      best = gain;
      best_k = k;
    }
  }
  if (best_k == 0) best_k = s.spec_idle >= s.spec_probe_every - 1 ? 1 : 0;  // a probe: does the rate recover?
  const int32_t slack = st.budget - st.reserved_decode;  // reserved_decode counts this decode
  const int32_t left = std::min(s.max_new_tokens - s.n_generated, limit_ - static_cast<int32_t>(s.tokens.size())) - 1;
  return std::max(0, std::min({best_k, slack, left}));
}

void SchedulerPolicy::propose(StepState& st) {
  proposals_.clear();
  if (!proposer_) return;
  queries_.clear();
  for (const int64_t id : running_) {
    Seq& s = seqs_.at(id);
    if (!s.speculative || s.n_computed < s.prefill_end) continue;
    const int32_t k = draft_length(s, st);
    if (k == 0) {
      ++s.spec_idle;
      continue;
    }
    queries_.push_back({.id = s.id, .tokens = s.tokens, .k = k});
  }
  if (queries_.empty()) return;
  proposer_->propose(queries_, proposed_);
  for (size_t i = 0; i < queries_.size() && i < proposed_.size(); ++i) {
    if (!proposed_[i].empty()) proposals_[queries_[i].id] = std::move(proposed_[i]);
  }
}

void SchedulerPolicy::forget(int64_t id) {
  if (proposer_) proposer_->forget(id);
}

void SchedulerPolicy::schedule_decode(Seq& s, StepState& st) {
  // What was proposed, within the slack left now (earlier decodes may have
  // taken some since the proposals were asked for).
  const auto it = proposals_.find(s.id);
  const int32_t slack = st.budget - st.reserved_decode;
  const int32_t n_draft =
      it == proposals_.end() ? 0 : std::max(0, std::min(static_cast<int32_t>(it->second.size()), slack));
  // Proposals only where the pool has room: they never preempt anyone.
  if (n_draft == 0 || !kv_.reserve(s.id, 1 + n_draft)) {
    schedule_running(s, 1, st);
    return;
  }
  s.spec_idle = 0;
  emit(s, 1, false, st);
  ScheduledSeq& e = st.plan.seqs.back();
  e.tokens.insert(e.tokens.end(), it->second.begin(), it->second.begin() + n_draft);
  e.n_draft = n_draft;  // the block table emit() copied covers them: reserved above
  st.budget -= n_draft;
}

void SchedulerPolicy::note_verification(Seq& s, const ScheduledSeq& e, const SeqOutput& out) {
  kv_.release_unused(s.id);
  // One verification: the accepted ones, and the first rejected one (none
  // when every proposal was accepted or the sequence ended).
  const auto hits = static_cast<double>(out.accepted.size());
  const bool rejected = out.token && out.accepted.size() < static_cast<size_t>(e.n_draft);
  // Decay 0.9: the rate follows about the last ten verifications, and a
  // run of rejections takes it under what one proposal costs.
  s.spec_hits = 0.9 * s.spec_hits + hits;
  s.spec_trials = 0.9 * s.spec_trials + hits + (rejected ? 1.0 : 0.0);
  s.spec_probe_every = out.accepted.empty() ? std::min(2 * s.spec_probe_every, 256) : 16;
  stats_.spec_proposed += static_cast<uint64_t>(e.n_draft);
  stats_.spec_accepted += out.accepted.size();
}

}  // namespace troupe

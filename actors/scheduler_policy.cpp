// Continuous-batching policy: the step order, the length-aware queue and the
// preemption rule are described above SchedulerPolicy in the header.
#include "actors/scheduler_policy.hpp"
#include "actors/scheduler_policy_step.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace troupe {
namespace {

constexpr Priority kPriorities[] = {Priority::interactive, Priority::batch};

void require_option(bool ok, const std::string& what) {
  if (!ok) throw Error(Errc::invalid_argument, "SchedulerConfig: " + what);
}

}  // namespace

int32_t StepPlan::n_tokens() const {
  int32_t n = 0;
  for (const ScheduledSeq& s : seqs) n += static_cast<int32_t>(s.tokens.size());
  return n;
}

SchedulerPolicy::SchedulerPolicy(const SchedulerConfig& config, KvCacheManager& kv)
    : cfg_(config), kv_(kv) {
  if (cfg_.spec_max_draft > 0) {
    proposer_ = cfg_.spec_proposer ? cfg_.spec_proposer : std::make_shared<NgramProposer>(cfg_.spec_ngram);
  }
  require_option(cfg_.max_batch_size >= 1, "max_batch_size must be at least 1");
  require_option(cfg_.max_tokens_per_step >= cfg_.max_batch_size,
                 "max_tokens_per_step must cover one decode token per sequence (>= max_batch_size)");
  require_option(!cfg_.chunked_prefill || cfg_.prefill_chunk >= 1, "prefill_chunk must be at least 1");
  require_option(cfg_.context_length >= 2, "context_length must be at least 2");
  require_option(cfg_.max_waiting >= 1, "max_waiting must be at least 1");
  require_option(cfg_.min_batch_size >= 1, "min_batch_size must be at least 1");
  require_option(cfg_.max_wait.count() >= 0 && cfg_.level_aging.count() >= 0,
                 "max_wait and level_aging must not be negative");
  require_option(cfg_.kv_watermark >= 0.0 && cfg_.kv_watermark < 1.0, "kv_watermark must be in [0, 1)");
  for (size_t i = 0; i < cfg_.level_bounds.size(); ++i) {
    require_option(cfg_.level_bounds[i] > 0 && (i == 0 || cfg_.level_bounds[i] > cfg_.level_bounds[i - 1]),
                   "level_bounds must be positive and increasing");
  }
  const int64_t capacity = kv_.capacity_tokens();
  limit_ = static_cast<int32_t>(std::min<int64_t>(cfg_.context_length, capacity));
  require_option(limit_ >= 2, "the KV cache must hold at least 2 tokens");
  // Without chunking a (re)admitted sequence is prefilled in one step, and it
  // may be as long as limit_ - 1 tokens.
  require_option(cfg_.chunked_prefill || cfg_.max_tokens_per_step >= limit_ - 1,
                 "without chunked_prefill, max_tokens_per_step must hold the longest prompt (" +
                     std::to_string(limit_ - 1) + " tokens)");
  require_option(!cfg_.whole_prompts || cfg_.max_tokens_per_step >= limit_,
                 "an encoder computes each prompt in one step: max_tokens_per_step must hold the context (" +
                     std::to_string(limit_) + " tokens)");
  require_option(cfg_.kv_demand_fraction >= 0.0 && cfg_.kv_demand_fraction <= 1.0,
                 "kv_demand_fraction must be in [0, 1]");
  require_option(cfg_.short_kv_share >= 0.0 && cfg_.short_kv_share < 1.0 && cfg_.short_batch_share >= 0.0 &&
                     cfg_.short_batch_share < 1.0,
                 "short_kv_share and short_batch_share must be in [0, 1)");
  require_option(cfg_.short_request_tokens >= 0, "short_request_tokens must not be negative");
  require_option(cfg_.max_preemptions >= 0, "max_preemptions must not be negative");
  require_option(cfg_.spec_max_draft >= 0 && cfg_.spec_max_draft <= 64, "spec_max_draft must be in [0, 64]");
  require_option(cfg_.spec_token_cost > 0.0 && cfg_.spec_token_cost <= 1.0, "spec_token_cost must be in (0, 1]");
  require_option(cfg_.score_chunk >= 1, "score_chunk must be at least 1");
  watermark_blocks_ = static_cast<int32_t>(cfg_.kv_watermark * kv_.pool().n_blocks());
  short_blocks_ = static_cast<int32_t>(cfg_.short_kv_share * kv_.pool().n_blocks());
  short_slots_ = static_cast<int32_t>(cfg_.short_batch_share * cfg_.max_batch_size);
  waiting_.assign(2, std::vector<std::deque<int64_t>>(cfg_.level_bounds.size() + 1));
}

int32_t SchedulerPolicy::level_of(size_t n_tokens) const {
  for (size_t i = 0; i < cfg_.level_bounds.size(); ++i) {
    if (n_tokens <= static_cast<size_t>(cfg_.level_bounds[i])) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(cfg_.level_bounds.size());
}

int32_t SchedulerPolicy::effective_level(const Seq& s, Clock::time_point now) const {
  if (cfg_.level_aging.count() == 0 || now <= s.arrival) return s.level;
  const auto lifts = (now - s.arrival) / cfg_.level_aging;
  return static_cast<int32_t>(std::max<int64_t>(0, s.level - static_cast<int64_t>(lifts)));
}

bool SchedulerPolicy::ranks_before(const Seq& a, const Seq& b, Clock::time_point now) const {
  return std::make_tuple(effective_level(a, now), a.arrival, a.id) <
         std::make_tuple(effective_level(b, now), b.arrival, b.id);
}

std::deque<int64_t>& SchedulerPolicy::queue(Priority p, int32_t level) {
  return waiting_[static_cast<size_t>(p)][static_cast<size_t>(level)];
}

SchedulerPolicy::Seq* SchedulerPolicy::best_waiting(Priority p, Clock::time_point now, bool only_short) {
  Seq* best = nullptr;
  for (const std::deque<int64_t>& q : waiting_[static_cast<size_t>(p)]) {
    // FIFO inside a level: its head, or with only_short its first short
    // request (a scan, but only while a long request is held back).
    for (const int64_t id : q) {
      Seq& s = seqs_.at(id);
      if (only_short && !s.is_short) continue;
      if (best == nullptr || ranks_before(s, *best, now)) best = &s;
      break;
    }
  }
  return best;
}

int32_t SchedulerPolicy::demand_blocks(const Seq& s) const {
  // The prompt, the expected share of the output, and at least one token
  // more than it holds now (a sequence past its estimate still grows).
  // A sequence preempted max_preemptions times is readmitted with all it
  // may need: it never outgrows what admission counted for it.
  const bool protect = s.n_preempted >= cfg_.max_preemptions;
  const double used = output_fraction_ < 0 || protect ? 1.0 : output_fraction_;
  const double output = used * s.max_new_tokens;
  const double fraction = protect ? 1.0 : cfg_.kv_demand_fraction;
  const double expected = s.n_prompt + std::ceil(fraction * output);
  const auto now_plus_one = static_cast<int64_t>(s.tokens.size()) + 1;
  const int64_t tokens = std::min<int64_t>(limit_, std::max<int64_t>(static_cast<int64_t>(expected), now_plus_one));
  return kv_.n_blocks_needed(static_cast<int32_t>(tokens));
}

int32_t SchedulerPolicy::kv_outstanding_blocks() const {
  int32_t n = 0;
  for (const int64_t id : running_) {
    const int32_t held = static_cast<int32_t>(kv_.block_table(id).size());
    n += std::max(0, demand_blocks(seqs_.at(id)) - held);
  }
  return n;
}

int64_t SchedulerPolicy::kv_waiting_demand_blocks() const {
  int64_t n = 0;
  for (const auto& [id, s] : seqs_) {
    if (!s.running) n += demand_blocks(s);
  }
  return n;
}

int32_t SchedulerPolicy::n_preemptions(int64_t request_id) const {
  const auto it = seqs_.find(request_id);
  return it == seqs_.end() ? 0 : it->second.n_preempted;
}

bool SchedulerPolicy::remove_waiting(const Seq& s) {
  std::deque<int64_t>& q = queue(s.priority, s.level);
  const auto it = std::find(q.begin(), q.end(), s.id);
  if (it == q.end()) return false;
  q.erase(it);
  --n_waiting_;
  return true;
}

void SchedulerPolicy::remove_running(int64_t id) {
  running_.erase(std::find(running_.begin(), running_.end(), id));
}

bool SchedulerPolicy::cancel(int64_t request_id) {
  const auto rj =
      std::find_if(pending_rejects_.begin(), pending_rejects_.end(),
                   [&](const RejectedRequest& r) { return r.request_id == request_id; });
  if (rj != pending_rejects_.end()) {
    pending_rejects_.erase(rj);
    ++stats_.cancelled;
    return true;
  }
  const auto it = seqs_.find(request_id);
  if (it == seqs_.end()) return false;
  if (it->second.running) {
    kv_.free(request_id);
    remove_running(request_id);
  } else {
    remove_waiting(it->second);
  }
  seqs_.erase(it);
  forget(request_id);
  ++stats_.cancelled;
  return true;
}

std::optional<Clock::time_point> SchedulerPolicy::batching_deadline(Clock::time_point now) const {
  if (cfg_.max_wait.count() == 0 || !running_.empty() || n_waiting_ == 0 ||
      n_waiting_ >= cfg_.min_batch_size) {
    return std::nullopt;
  }
  auto oldest = Clock::time_point::max();
  for (const auto& levels : waiting_) {
    for (const auto& q : levels) {
      for (const int64_t id : q) oldest = std::min(oldest, seqs_.at(id).arrival);
    }
  }
  const Clock::time_point deadline = oldest + cfg_.max_wait;
  if (now < deadline) return deadline;
  return std::nullopt;
}

StepPlan SchedulerPolicy::schedule(Clock::time_point now, int32_t kv_reserve) {
  if (in_flight_ != 0) {
    throw Error(Errc::invalid_argument, "SchedulerPolicy::schedule: step " +
                                            std::to_string(in_flight_) + " still awaits update()");
  }
  StepState st;
  st.now = now;
  st.step = step_ + 1;
  st.kv_reserve = std::max(0, kv_reserve);
  st.plan.rejected = std::move(pending_rejects_);
  pending_rejects_.clear();
  stats_.rejected += st.plan.rejected.size();
  if (auto deadline = batching_deadline(now)) {
    st.plan.wait_until = deadline;
    return std::move(st.plan);
  }
  st.budget = cfg_.max_tokens_per_step;
  for (const int64_t id : running_) {
    const Seq& s = seqs_.at(id);
    if (s.n_computed >= s.prefill_end) ++st.reserved_decode;
  }
  propose(st);
  for (const Priority p : kPriorities) schedule_priority(p, st);
  if (!st.plan.seqs.empty()) {
    step_ = st.step;
    in_flight_ = st.step;
    st.plan.step = st.step;
    ++stats_.steps;
  }
  return std::move(st.plan);
}

void SchedulerPolicy::schedule_priority(Priority p, StepState& st) {
  // 1. Decodes; a copy, since preemption edits running_. Protected ones
  // (preempted max_preemptions times) first, so that when they need blocks
  // the unprotected ones are still there to be taken, not themselves.
  std::vector<int64_t> snapshot = running_;
  std::stable_partition(snapshot.begin(), snapshot.end(),
                        [&](int64_t id) { return seqs_.at(id).n_preempted >= cfg_.max_preemptions; });
  for (const int64_t id : snapshot) {
    Seq& s = seqs_.at(id);
    if (s.running && s.priority == p && s.n_computed >= s.prefill_end &&
        s.scheduled_step != st.step) {
      schedule_decode(s, st);
    }
  }
  // 2. Prefill work in rank order.
  std::vector<Seq*> ongoing;
  for (const int64_t id : running_) {
    Seq& s = seqs_.at(id);
    if (s.priority == p && s.n_computed < s.prefill_end && s.scheduled_step != st.step) {
      ongoing.push_back(&s);
    }
  }
  std::sort(ongoing.begin(), ongoing.end(),
            [&](const Seq* a, const Seq* b) { return ranks_before(*a, *b, st.now); });
  size_t next = 0;
  for (;;) {
    const int32_t prefill_budget = st.budget - st.reserved_decode;
    if (prefill_budget <= 0) break;
    while (next < ongoing.size() &&
           (!ongoing[next]->running || ongoing[next]->scheduled_step == st.step)) {
      ++next;
    }
    Seq* run = next < ongoing.size() ? ongoing[next] : nullptr;
    const auto n_running = static_cast<int32_t>(running_.size());
    // Long requests leave the last short_slots_ batch slots to short ones.
    if (n_running >= cfg_.max_batch_size - short_slots_) st.long_open = false;
    const bool can_admit = st.admissions_open && n_running < cfg_.max_batch_size;
    Seq* wait = can_admit ? best_waiting(p, st.now, !st.long_open) : nullptr;
    if (run == nullptr && wait == nullptr) break;
    if (wait != nullptr && (run == nullptr || ranks_before(*wait, *run, st.now))) {
      // A long request that does not fit holds back the long ones behind
      // it (they are no smaller in rank), never the short ones.
      if (!try_admit(*wait, st)) (wait->is_short ? st.admissions_open : st.long_open) = false;
      continue;
    }
    ++next;
    const int32_t remaining = static_cast<int32_t>(run->tokens.size()) - run->n_computed;
    const int32_t n = step_tokens(*run, run->n_computed, remaining, prefill_budget);
    if (n <= prefill_budget) schedule_running(*run, n, st);
  }
}

bool SchedulerPolicy::schedule_running(Seq& s, int32_t n_tokens, StepState& st) {
  while (!kv_.reserve(s.id, n_tokens)) {
    // Lowest priority, then most recently admitted, among the running ones
    // not yet scheduled and not more important than s (s itself included).
    // Within a priority, sequences preempted max_preemptions times rank
    // last: taken only when no other of that priority can be.
    Seq* victim = nullptr;
    auto key = [&](const Seq& v) {
      return std::make_tuple(v.priority, v.n_preempted < cfg_.max_preemptions, v.admit_order);
    };
    for (const int64_t id : running_) {
      Seq& v = seqs_.at(id);
      if (v.scheduled_step == st.step || v.priority < s.priority) continue;
      if (victim == nullptr || key(v) > key(*victim)) victim = &v;
    }
    preempt(*victim, st);
    if (victim == &s) return false;
  }
  emit(s, n_tokens, false, st);
  return true;
}

void SchedulerPolicy::emit(Seq& s, int32_t n_tokens, bool first, StepState& st) {
  ScheduledSeq e;
  e.request_id = s.id;
  const auto begin = s.tokens.begin() + s.n_computed;
  e.tokens.assign(begin, begin + n_tokens);
  e.n_past = s.n_computed;
  const std::span<const int32_t> table = kv_.block_table(s.id);
  e.block_table.assign(table.begin(), table.end());
  e.state_slot = kv_.state_slot(s.id);
  e.is_prefill = s.n_computed < s.prefill_end;
  e.need_logits = s.n_computed + n_tokens == static_cast<int32_t>(s.tokens.size());
  e.first_chunk = first;
  e.score_prompt = s.score_prompt && s.n_computed < s.n_prompt;
  st.plan.seqs.push_back(std::move(e));
  s.scheduled_step = st.step;
  st.budget -= n_tokens;
  if (!st.plan.seqs.back().is_prefill) --st.reserved_decode;
}

void SchedulerPolicy::preempt(Seq& s, StepState& st) {
  // Victims are never scheduled yet, so a decoding one gives its token back.
  if (s.n_computed >= s.prefill_end) --st.reserved_decode;
  requeue(s);
  st.plan.preempted.push_back(s.id);
  st.admissions_open = false;
}

void SchedulerPolicy::requeue(Seq& s) {
  kv_.free(s.id);
  remove_running(s.id);
  s.running = false;
  s.n_computed = 0;
  s.prefill_end = static_cast<int32_t>(s.tokens.size());
  s.level = level_of(s.tokens.size());
  ++s.n_preempted;
  queue(s.priority, s.level).push_front(s.id);
  ++n_waiting_;
  ++stats_.preemptions;
}

bool SchedulerPolicy::preempt(int64_t request_id) {
  const auto it = seqs_.find(request_id);
  if (in_flight_ != 0 || it == seqs_.end() || !it->second.running) return false;
  requeue(it->second);
  return true;
}

std::vector<FinishedSeq> SchedulerPolicy::update(const StepPlan& plan, const StepResult& result) {
  std::vector<FinishedSeq> finished;
  if (plan.step == 0) return finished;
  if (plan.step != in_flight_) {
    throw Error(Errc::invalid_argument,
                "SchedulerPolicy::update: step " + std::to_string(plan.step) +
                    " is not the step in flight (" + std::to_string(in_flight_) + ")");
  }
  if (result.outputs.size() != plan.seqs.size()) {
    throw Error(Errc::invalid_argument,
                "SchedulerPolicy::update: " + std::to_string(result.outputs.size()) +
                    " outputs for " + std::to_string(plan.seqs.size()) + " scheduled sequences");
  }
  // Validate everything first, so a bad result changes nothing.
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const ScheduledSeq& e = plan.seqs[i];
    const SeqOutput& out = result.outputs[i];
    if (out.request_id != e.request_id) {
      throw Error(Errc::invalid_argument, "SchedulerPolicy::update: output " + std::to_string(i) +
                                              " is for " + req_name(out.request_id) +
                                              ", the plan has " + req_name(e.request_id));
    }
    if (out.token && !e.need_logits) {
      throw Error(Errc::invalid_argument, "SchedulerPolicy::update: " + req_name(e.request_id) +
                                              " got a token for a non-final prefill chunk");
    }
    if (!out.token && e.need_logits && !out.finished) {
      throw Error(Errc::invalid_argument,
                  "SchedulerPolicy::update: " + req_name(e.request_id) + " needs a sampled token");
    }
    const bool proposals_match =
        out.accepted.size() <= static_cast<size_t>(e.n_draft) &&
        std::equal(out.accepted.begin(), out.accepted.end(), e.tokens.end() - e.n_draft);
    if (!proposals_match || (!out.accepted.empty() && !out.token && !out.finished)) {
      throw Error(Errc::invalid_argument, "SchedulerPolicy::update: " + req_name(e.request_id) +
                                              " accepted tokens it was not proposed");
    }
  }
  in_flight_ = 0;
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const ScheduledSeq& e = plan.seqs[i];
    const SeqOutput& out = result.outputs[i];
    const auto it = seqs_.find(e.request_id);
    // Cancelled while the step ran (and possibly re-added under the same id).
    if (it == seqs_.end() || !it->second.running || it->second.n_computed != e.n_past) continue;
    Seq& s = it->second;
    // Of proposals, only the accepted ones' KV stands (after the fed token);
    // the pages reserved for the rest go back.
    const size_t fed = e.n_draft > 0 ? 1 + out.accepted.size() : e.tokens.size();
    kv_.commit(s.id, std::span<const int32_t>(e.tokens).first(fed));
    s.n_computed += static_cast<int32_t>(fed);
    if (e.n_draft > 0) note_verification(s, e, out);
    for (const int32_t t : out.accepted) {
      s.tokens.push_back(t);
      ++s.n_generated;
    }
    if (out.token) {
      s.tokens.push_back(*out.token);
      ++s.n_generated;
    }
    std::optional<FinishReason> reason;
    if (out.finished) {
      reason = FinishReason::stop;
    } else if (s.n_computed >= s.prefill_end &&  // an embedding's prompt may fill the context while it is computed
               (s.n_generated >= s.max_new_tokens || static_cast<int32_t>(s.tokens.size()) >= limit_)) {
      reason = FinishReason::length;
    }
    if (!reason) continue;
    // The upper envelope of the share of max_new_tokens used: up to a
    // larger one at once, a twentieth of the way down to a smaller one. A
    // sequence stopped by the length limit used all it could.
    const double used = *reason == FinishReason::length
                            ? 1.0
                            : std::min(1.0, static_cast<double>(s.n_generated) / s.max_new_tokens);
    output_fraction_ = used >= output_fraction_ ? used : output_fraction_ + 0.05 * (used - output_fraction_);
    kv_.free(s.id);
    remove_running(s.id);
    finished.push_back({.request_id = s.id, .reason = *reason});
    forget(s.id);
    seqs_.erase(it);
    ++stats_.finished;
  }
  return finished;
}

bool SchedulerPolicy::is_running(int64_t request_id) const {
  const auto it = seqs_.find(request_id);
  return it != seqs_.end() && it->second.running;
}

bool SchedulerPolicy::is_waiting(int64_t request_id) const {
  const auto it = seqs_.find(request_id);
  return it != seqs_.end() && !it->second.running;
}

const std::vector<int32_t>* SchedulerPolicy::tokens(int64_t request_id) const {
  const auto it = seqs_.find(request_id);
  return it == seqs_.end() ? nullptr : &it->second.tokens;
}

void SchedulerPolicy::check_invariants() const {
  kv_.check_invariants();
  auto fail = [](const std::string& what) {
    throw Error(Errc::internal, "SchedulerPolicy invariant: " + what);
  };
  size_t n_queued = 0;
  for (size_t p = 0; p < waiting_.size(); ++p) {
    for (size_t level = 0; level < waiting_[p].size(); ++level) {
      for (const int64_t id : waiting_[p][level]) {
        ++n_queued;
        const auto it = seqs_.find(id);
        if (it == seqs_.end()) fail("queued " + req_name(id) + " is unknown");
        const Seq& s = it->second;
        if (s.running || static_cast<size_t>(s.priority) != p ||
            static_cast<size_t>(s.level) != level) {
          fail(req_name(id) + " sits in the wrong queue");
        }
        if (kv_.contains(id) || s.n_computed != 0) fail("waiting " + req_name(id) + " holds KV");
      }
    }
  }
  if (n_queued != static_cast<size_t>(n_waiting_)) fail("n_waiting does not match the queues");
  uint64_t last_order = 0;
  for (const int64_t id : running_) {
    const auto it = seqs_.find(id);
    if (it == seqs_.end() || !it->second.running)
      fail("running " + req_name(id) + " not marked running");
    const Seq& s = it->second;
    if (s.admit_order <= last_order) fail("running list out of admission order");
    last_order = s.admit_order;
    if (!kv_.contains(id) || kv_.n_tokens(id) != s.n_computed)
      fail(req_name(id) + " KV out of step");
  }
  if (running_.size() + n_queued != seqs_.size()) fail("a request is neither running nor waiting");
  if (running_.size() > static_cast<size_t>(cfg_.max_batch_size))
    fail("more running than max_batch_size");
  if (kv_.n_sequences() != static_cast<int32_t>(running_.size()))
    fail("KV holds sequences not running");
  for (const auto& [id, s] : seqs_) {
    if (static_cast<int32_t>(s.tokens.size()) >= limit_)
      fail(req_name(id) + " is past the length limit");
  }
}

}  // namespace troupe

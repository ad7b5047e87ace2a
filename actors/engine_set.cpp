// EngineSet: least-loaded placement, rounds of per-engine scheduling, and
// the bookkeeping of which engine owns which request.
#include "actors/engine_set.hpp"

#include <algorithm>
#include <string>
#include <tuple>

#include "core/error.hpp"

namespace troupe {

EngineSet::EngineSet(const SchedulerConfig& config, const KvCacheOptions& kv, int32_t n_engines)
    : kv_(kv),
      chunk_(config.chunked_prefill ? config.prefill_chunk : config.context_length),
      max_preemptions_(config.max_preemptions) {
  if (n_engines < 1) {
    throw Error(Errc::invalid_argument,
                "EngineSet: n_engines must be at least 1, not " + std::to_string(n_engines));
  }
  engines_.resize(static_cast<size_t>(n_engines));
  for (Engine& e : engines_) e.policy = std::make_unique<SchedulerPolicy>(config, kv_);
}

AddStatus EngineSet::add(Request request) {
  if (owner_.count(request.id) != 0) return AddStatus::duplicate_id;
  auto load = [](const Engine& e) { return e.policy->n_running() + e.policy->n_waiting(); };
  const auto it = std::min_element(engines_.begin(), engines_.end(),
                                   [&](const Engine& a, const Engine& b) { return load(a) < load(b); });
  const int64_t id = request.id;
  const Priority priority = request.priority;
  const AddStatus status = it->policy->add(std::move(request));
  if (status == AddStatus::accepted) {
    owner_[id] = static_cast<int32_t>(it - engines_.begin());
    info_[id] = {.priority = priority};
  }
  return status;
}

bool EngineSet::cancel(int64_t request_id) {
  const auto it = owner_.find(request_id);
  if (it == owner_.end()) return false;
  const bool found = engines_[static_cast<size_t>(it->second)].policy->cancel(request_id);
  owner_.erase(it);
  info_.erase(request_id);
  return found;
}

SchedulingRound EngineSet::schedule(Clock::time_point now) {
  SchedulingRound round;
  // An admission needs more blocks than the pool has, so no admission in a
  // round that preempted (the policy's own rule, across engines): the
  // sequence just freed would otherwise be readmitted at once.
  const int32_t no_admission = kv_.pool().n_blocks() + 1;
  bool block_admissions = false;
  for (;;) {
    bool changed = false;
    for (size_t i = 0; i < engines_.size(); ++i) {
      Engine& e = engines_[i];
      if (e.plan || !e.policy->has_work()) continue;
      const size_t n_preempted = round.preempted.size();
      const bool room = make_room(static_cast<int32_t>(i), round);
      if (round.preempted.size() != n_preempted) {
        changed = true;
        block_admissions = true;
      }
      if (!room) continue;  // the sequence to preempt is in a step in flight: wait for it
      const bool admit = !block_admissions && !batch_must_wait(static_cast<int32_t>(i));
      StepPlan plan = e.policy->schedule(now, admit ? growth_reserve(static_cast<int32_t>(i)) : no_admission);
      if (!plan.preempted.empty()) block_admissions = true;
      if (!plan.rejected.empty() || !plan.preempted.empty()) changed = true;
      for (RejectedRequest& r : plan.rejected) {
        owner_.erase(r.request_id);
        info_.erase(r.request_id);
        round.rejected.push_back(std::move(r));
      }
      plan.rejected.clear();
      round.preempted.insert(round.preempted.end(), plan.preempted.begin(), plan.preempted.end());
      if (plan.wait_until && (!round.wake_at || *plan.wait_until < *round.wake_at)) {
        round.wake_at = plan.wait_until;
      }
      if (plan.step != 0) {
        for (const ScheduledSeq& s : plan.seqs) {
          if (s.first_chunk) info_[s.request_id].admitted = ++admit_counter_;
        }
        e.plan = std::move(plan);
        round.started.push_back(static_cast<int32_t>(i));
      }
    }
    // Another pass only when something changed and nothing is in flight (a
    // finishing step triggers the next round anyway); admissions must then
    // be open, or nothing would ever run again.
    if (!changed || n_in_flight() > 0) break;
    block_admissions = false;
  }
  return round;
}

const StepPlan* EngineSet::in_flight(int32_t engine) const {
  if (engine < 0 || engine >= n_engines()) return nullptr;
  const Engine& e = engines_[static_cast<size_t>(engine)];
  return e.plan ? &*e.plan : nullptr;
}

std::vector<FinishedSeq> EngineSet::complete(int32_t engine, const StepResult& result) {
  if (in_flight(engine) == nullptr) {
    throw Error(Errc::invalid_argument,
                "EngineSet::complete: engine " + std::to_string(engine) + " has no step in flight");
  }
  Engine& e = engines_[static_cast<size_t>(engine)];
  std::vector<FinishedSeq> finished = e.policy->update(*e.plan, result);
  e.plan.reset();
  forget_finished(finished);
  return finished;
}

int32_t EngineSet::growth_reserve(int32_t engine) const {
  if (engines_.size() == 1) return 0;
  // Tokens each sequence has in a step in flight (reserved, not committed).
  std::unordered_map<int64_t, int32_t> in_flight_tokens;
  for (size_t i = 0; i < engines_.size(); ++i) {
    if (static_cast<int32_t>(i) == engine || !engines_[i].plan) continue;
    for (const ScheduledSeq& e : engines_[i].plan->seqs) {
      in_flight_tokens[e.request_id] = static_cast<int32_t>(e.tokens.size());
    }
  }
  int32_t reserve = 0;
  for (const auto& [id, owner] : owner_) {
    if (owner == engine || !kv_.contains(id)) continue;
    const auto it = in_flight_tokens.find(id);
    const int32_t after_step = kv_.n_tokens(id) + (it == in_flight_tokens.end() ? 0 : it->second);
    // Its next step: the next prefill chunk while prompt tokens remain (the
    // sampled token of the step in flight is not known yet: count 1), else
    // one decode token.
    const std::vector<int32_t>* toks = engines_[static_cast<size_t>(owner)].policy->tokens(id);
    const int32_t remaining = toks == nullptr ? 0 : static_cast<int32_t>(toks->size()) - after_step;
    const int32_t next = remaining > 1 ? std::min(remaining, chunk_) : 1;
    const int32_t have = static_cast<int32_t>(kv_.block_table(id).size());
    reserve += std::max(0, kv_.n_blocks_needed(after_step + next) - have);
  }
  // And the whole demand the other engines' running sequences may still
  // claim (SchedulerConfig::kv_demand_fraction), when that is larger.
  int32_t demand = 0;
  for (size_t i = 0; i < engines_.size(); ++i) {
    if (static_cast<int32_t>(i) != engine) demand += engines_[i].policy->kv_outstanding_blocks();
  }
  return std::max(reserve, demand);
}

void EngineSet::forget_finished(const std::vector<FinishedSeq>& finished) {
  for (const FinishedSeq& f : finished) {
    owner_.erase(f.request_id);
    info_.erase(f.request_id);
  }
}

bool EngineSet::batch_must_wait(int32_t engine) const {
  if (engines_.size() == 1) return false;
  bool interactive_here = false;
  bool interactive_elsewhere = false;
  for (const auto& [id, owner] : owner_) {
    const Info& info = info_.at(id);
    if (info.priority != Priority::interactive) continue;
    if (!engines_[static_cast<size_t>(owner)].policy->is_waiting(id)) continue;
    (owner == engine ? interactive_here : interactive_elsewhere) = true;
  }
  return interactive_elsewhere && !interactive_here;
}

bool EngineSet::make_room(int32_t engine, SchedulingRound& round) {
  if (engines_.size() == 1) return true;  // the policy alone sees every sequence
  for (;;) {
    // Blocks this engine's running sequences need for one more token each
    // (it is idle: nothing of it is in flight), and the most expendable
    // running sequence of all engines.
    int32_t need = 0;
    int64_t victim = -1;
    int32_t victim_engine = -1;
    std::tuple<Priority, bool, uint64_t> victim_key{};
    for (const auto& [id, owner] : owner_) {
      if (!kv_.contains(id)) continue;  // only running sequences hold KV
      if (owner == engine) need += kv_.n_new_blocks_needed(id, 1);
      const Info& info = info_.at(id);
      // Lowest priority, not preempted max_preemptions times yet, newest.
      const bool unprotected = engines_[static_cast<size_t>(owner)].policy->n_preemptions(id) < max_preemptions_;
      const std::tuple<Priority, bool, uint64_t> key{info.priority, unprotected, info.admitted};
      if (victim < 0 || key > victim_key) {
        victim = id;
        victim_engine = owner;
        victim_key = key;
      }
    }
    if (need <= kv_.n_available_blocks()) return true;
    Engine& e = engines_[static_cast<size_t>(victim_engine)];
    if (e.plan) return false;
    e.policy->preempt(victim);
    round.preempted.push_back(victim);
  }
}

const std::vector<int32_t>* EngineSet::tokens(int64_t request_id) const {
  const auto it = owner_.find(request_id);
  if (it == owner_.end()) return nullptr;
  return engines_[static_cast<size_t>(it->second)].policy->tokens(request_id);
}

int32_t EngineSet::n_in_flight() const {
  return static_cast<int32_t>(
      std::count_if(engines_.begin(), engines_.end(), [](const Engine& e) { return e.plan.has_value(); }));
}

int32_t EngineSet::n_running() const {
  int32_t n = 0;
  for (const Engine& e : engines_) n += e.policy->n_running();
  return n;
}

int32_t EngineSet::n_waiting() const {
  int32_t n = 0;
  for (const Engine& e : engines_) n += e.policy->n_waiting();
  return n;
}

bool EngineSet::has_work() const {
  return std::any_of(engines_.begin(), engines_.end(),
                     [](const Engine& e) { return e.policy->has_work(); });
}

SchedulerStats EngineSet::stats() const {
  SchedulerStats sum;
  for (const Engine& e : engines_) {
    const SchedulerStats& s = e.policy->stats();
    sum.steps += s.steps;
    sum.admitted += s.admitted;
    sum.preemptions += s.preemptions;
    sum.finished += s.finished;
    sum.rejected += s.rejected;
    sum.cancelled += s.cancelled;
    sum.prompt_tokens += s.prompt_tokens;
    sum.prefix_hit_tokens += s.prefix_hit_tokens;
    sum.spec_proposed += s.spec_proposed;
    sum.spec_accepted += s.spec_accepted;
  }
  return sum;
}

void EngineSet::check_invariants() const {
  kv_.check_invariants();
  if (kv_.n_sequences() != n_running()) {
    throw Error(Errc::internal, "EngineSet invariant: the KV cache holds " +
                                    std::to_string(kv_.n_sequences()) + " sequences but " +
                                    std::to_string(n_running()) + " are running");
  }
  // Requests awaiting their rejection are owned but neither running nor
  // waiting, hence <= rather than ==.
  if (n_running() + n_waiting() > static_cast<int32_t>(owner_.size())) {
    throw Error(Errc::internal, "EngineSet invariant: engines hold requests the set does not own");
  }
  for (const auto& [id, engine] : owner_) {
    const SchedulerPolicy& p = *engines_[static_cast<size_t>(engine)].policy;
    if (p.is_running(id) != kv_.contains(id)) {
      throw Error(Errc::internal, "EngineSet invariant: request " + std::to_string(id) +
                                      " of engine " + std::to_string(engine) + " KV out of step");
    }
  }
}

}  // namespace troupe

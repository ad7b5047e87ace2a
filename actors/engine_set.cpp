// EngineSet: least-loaded placement, rounds of per-engine scheduling, and
// the bookkeeping of which engine owns which request.
#include "actors/engine_set.hpp"

#include <algorithm>
#include <string>

#include "core/error.hpp"

namespace troupe {

EngineSet::EngineSet(const SchedulerConfig& config, const KvCacheOptions& kv, int32_t n_engines)
    : kv_(kv) {
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
  const AddStatus status = it->policy->add(std::move(request));
  if (status == AddStatus::accepted) owner_[id] = static_cast<int32_t>(it - engines_.begin());
  return status;
}

bool EngineSet::cancel(int64_t request_id) {
  const auto it = owner_.find(request_id);
  if (it == owner_.end()) return false;
  const bool found = engines_[static_cast<size_t>(it->second)].policy->cancel(request_id);
  owner_.erase(it);
  return found;
}

SchedulingRound EngineSet::schedule(Clock::time_point now) {
  SchedulingRound round;
  bool again = true;
  while (again) {
    again = false;
    for (size_t i = 0; i < engines_.size(); ++i) {
      Engine& e = engines_[i];
      if (e.plan || !e.policy->has_work()) continue;
      StepPlan plan = e.policy->schedule(now);
      if (!plan.rejected.empty() || !plan.preempted.empty()) again = true;
      for (RejectedRequest& r : plan.rejected) {
        owner_.erase(r.request_id);
        round.rejected.push_back(std::move(r));
      }
      plan.rejected.clear();
      round.preempted.insert(round.preempted.end(), plan.preempted.begin(), plan.preempted.end());
      if (plan.wait_until && (!round.wake_at || *plan.wait_until < *round.wake_at)) {
        round.wake_at = plan.wait_until;
      }
      if (plan.step != 0) {
        e.plan = std::move(plan);
        round.started.push_back(static_cast<int32_t>(i));
      }
    }
    // Another pass only helps an engine that found no room, and only while
    // no step is in flight (a finishing step triggers the next round anyway).
    if (again && n_in_flight() > 0) again = false;
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

void EngineSet::forget_finished(const std::vector<FinishedSeq>& finished) {
  for (const FinishedSeq& f : finished) owner_.erase(f.request_id);
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

// The scheduler's virtual engines: N SchedulerPolicy instances sharing one
// KvCacheManager, each with at most one step in flight, so that a chain of N
// executor stages holds up to N micro-batches at once. Plain C++ (the
// scheduler actor is a shell around it); it is the KV manager's only writer.
#pragma once

#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "actors/scheduler_policy.hpp"
#include "memory/kv_cache_manager.hpp"

namespace troupe {

// What one scheduling round did.
struct SchedulingRound {
  std::vector<int32_t> started;             // engines whose new step is now in flight
  std::vector<RejectedRequest> rejected;    // requests that can never run
  std::vector<int64_t> preempted;           // freed and requeued for recompute
  std::optional<Clock::time_point> wake_at; // call schedule() again by then (batching delay)
};

class EngineSet {
 public:
  // Throws Error(invalid_argument) for n_engines < 1 or a bad config.
  EngineSet(const SchedulerConfig& config, const KvCacheOptions& kv, int32_t n_engines);

  // Queues a request on the least loaded engine (fewest running + waiting).
  AddStatus add(Request request);
  // Forgets a request wherever it is and frees its KV at once.
  bool cancel(int64_t request_id);

  // Plans a step on every idle engine that has work. Engines share the KV
  // pool, so a round repeats while a plan freed blocks (preemption,
  // rejection) and nothing is in flight: another engine may fit now.
  SchedulingRound schedule(Clock::time_point now);

  // The plan of the engine's step in flight, or nullptr.
  const StepPlan* in_flight(int32_t engine) const;
  // Applies the outcome of the engine's step in flight (see
  // SchedulerPolicy::update) and frees the engine for the next one.
  std::vector<FinishedSeq> complete(int32_t engine, const StepResult& result);

  bool contains(int64_t request_id) const { return owner_.count(request_id) != 0; }
  // Prompt + generated tokens of a live request, or nullptr.
  const std::vector<int32_t>* tokens(int64_t request_id) const;

  int32_t n_engines() const { return static_cast<int32_t>(engines_.size()); }
  int32_t n_in_flight() const;
  int32_t n_running() const;
  int32_t n_waiting() const;
  bool has_work() const;
  // Longest prompt + output a request may reach.
  int32_t max_total_tokens() const { return engines_.front().policy->max_total_tokens(); }
  SchedulerStats stats() const;  // summed over engines
  const KvCacheManager& kv() const { return kv_; }
  // No cached prefix is reused any more (a stage's KV contents were lost).
  void drop_prefix_cache() { kv_.drop_prefix_cache(); }

  // KV invariants, and that the sequences holding KV are exactly the running
  // ones of all engines. Throws Errc::internal.
  void check_invariants() const;

 private:
  struct Engine {
    std::unique_ptr<SchedulerPolicy> policy;
    std::optional<StepPlan> plan;  // the step in flight
  };

  // Under KV pressure, preempts the globally most expendable running
  // sequences (lowest priority, most recently admitted: SchedulerPolicy's
  // rule, applied across engines) until every running sequence can take
  // one more token. False when the next victim sits in a step in flight:
  // `engine` then waits for that step rather than preempting one of its own
  // older sequences (which is how engines sharing a pool would thrash).
  bool make_room(int32_t engine, SchedulingRound& round);
  // Whether the engine, having only batch requests waiting, must not admit
  // now because interactive requests wait on other engines (a policy admits
  // interactive work first; this keeps that true across engines).
  bool batch_must_wait(int32_t engine) const;
  // KV blocks the running sequences of the other engines need for their
  // next decode token (after the step they have in flight): what an
  // admission on `engine` must leave free, so that one engine's admissions
  // do not force another's running sequences out.
  int32_t growth_reserve(int32_t engine) const;
  void forget_finished(const std::vector<FinishedSeq>& finished);

  KvCacheManager kv_;
  int32_t chunk_;  // prompt tokens per sequence per step
  int32_t max_preemptions_;  // victims preempted this often are taken last
  std::vector<Engine> engines_;
  struct Info {
    Priority priority = Priority::interactive;
    uint64_t admitted = 0;  // admission order (re-admission after preemption included)
  };
  std::unordered_map<int64_t, int32_t> owner_;  // request -> engine
  std::unordered_map<int64_t, Info> info_;
  uint64_t admit_counter_ = 0;
};

}  // namespace troupe

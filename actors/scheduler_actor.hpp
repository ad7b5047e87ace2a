// The scheduler actor: a thin shell over EngineSet (N SchedulerPolicy virtual
// engines sharing one KvCacheManager). The KV-cache manager role lives here,
// as an object this actor owns and alone writes: admission, reservation,
// commit and free are then plain calls inside one actor, with no round trip
// per step and no second copy of the block tables to keep in step.
#pragma once

#include <memory>

#include <caf/fwd.hpp>

#include "actors/interfaces.hpp"
#include "memory/kv_cache_manager.hpp"
#include "telemetry/anomaly.hpp"

namespace troupe {

struct ActorMeter;  // actors/actor_meter.hpp

struct SchedulerActorOptions {
  SchedulerConfig scheduler;
  KvCacheOptions kv;
  // Virtual engines, each with at most one step in flight: as many as there
  // are executor stages keeps every stage busy.
  int32_t n_engines = 1;
  // Step-time excursions (the stages' forward time of a step, one baseline
  // per step size class) are reported here; null: not watched.
  std::shared_ptr<AnomalyMonitor> monitor;
  AnomalyOptions anomaly;
  // Tell the executor chain which requests ended (ForgetRequests), so that
  // remote stages' workers forget them. Off when every stage is in-process.
  bool forward_ended = false;
};

// Messages to the first stage carry this scheduler's steps; the last stage
// sends logits to `sampler` on the scheduler's behalf, so the SampledStep
// comes back here, is applied, then forwarded to `detokenizer` (followed by
// a RequestDone for each request that ended). `meter`, when given, records
// the actor's busy time and mailbox depth.
scheduler_actor spawn_scheduler(caf::actor_system& system, SchedulerActorOptions options,
                                executor_actor first_stage, sampler_actor sampler,
                                detokenizer_actor detokenizer, std::shared_ptr<ActorMeter> meter = nullptr);

}  // namespace troupe

// The detokenizer actor: the pipeline's only voice towards sinks. It turns
// each request's sampled tokens into whole-UTF-8 text pieces (one
// IncrementalDecoder per request), holds back text that may be the start of
// a stop string, ends a request whose text hits one (telling the scheduler
// to free it), and sends every request exactly one final event.
#pragma once

#include <memory>

#include <caf/fwd.hpp>

#include "actors/interfaces.hpp"
#include "telemetry/anomaly.hpp"
#include "tokenizer/tokenizer.hpp"

namespace troupe {

struct ActorMeter;  // actors/actor_meter.hpp

struct DetokenizerOptions {
  // Records the actor's busy time and mailbox depth (and its trace track).
  std::shared_ptr<ActorMeter> meter;
  // TTFT excursions (one baseline per prompt-length class) go here; null: not watched.
  std::shared_ptr<AnomalyMonitor> monitor;
  AnomalyOptions anomaly;
};

detokenizer_actor spawn_detokenizer(caf::actor_system& system, std::shared_ptr<const Tokenizer> tokenizer,
                                    DetokenizerOptions options = {});

}  // namespace troupe

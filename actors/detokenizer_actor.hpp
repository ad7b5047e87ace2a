// The detokenizer actor: the pipeline's only voice towards sinks. It turns
// each request's sampled tokens into whole-UTF-8 text pieces (one
// IncrementalDecoder per request), holds back text that may be the start of
// a stop string, ends a request whose text hits one (telling the scheduler
// to free it), and sends every request exactly one final event.
#pragma once

#include <memory>

#include <caf/fwd.hpp>

#include "actors/interfaces.hpp"
#include "tokenizer/tokenizer.hpp"

namespace troupe {

struct ActorMeter;  // actors/actor_meter.hpp

// `meter`, when given, records the actor's busy time and mailbox depth.
detokenizer_actor spawn_detokenizer(caf::actor_system& system, std::shared_ptr<const Tokenizer> tokenizer,
                                    std::shared_ptr<ActorMeter> meter = nullptr);

}  // namespace troupe

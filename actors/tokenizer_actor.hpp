// The tokenizer actor: text prompts in, token requests out. Runs detached
// (encoding a long prompt is CPU work that must not hold up the scheduled
// actors); a pipeline may run a pool of them round-robin.
#pragma once

#include <memory>

#include <caf/fwd.hpp>

#include "actors/interfaces.hpp"
#include "tokenizer/tokenizer.hpp"

namespace troupe {

struct ActorMeter;

// A text that cannot be encoded (invalid UTF-8) ends that request only: a
// RequestDone(error) goes to the detokenizer, which tells the request's sink.
// `meter`: optional load counters and trace track (actors/actor_meter.hpp).
tokenizer_actor spawn_tokenizer(caf::actor_system& system, std::shared_ptr<const Tokenizer> tokenizer,
                                scheduler_actor scheduler, detokenizer_actor detokenizer,
                                std::shared_ptr<ActorMeter> meter = nullptr);

}  // namespace troupe

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

detokenizer_actor spawn_detokenizer(caf::actor_system& system, std::shared_ptr<const Tokenizer> tokenizer);

}  // namespace troupe

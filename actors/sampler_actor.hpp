// The built-in sampler actor: one Sampler per request, built from its
// parameters when the request first appears (SeqOpen), fed the request's
// history for penalties; answers each step's logits with the chosen tokens,
// end of generation (EOS and other end-of-generation tokens, unless
// ignore_eos) and logprobs when asked. Maximum tokens and the context limit
// are the scheduler policy's to enforce, so they live in one place.
#pragma once

#include <memory>

#include <caf/fwd.hpp>

#include "actors/interfaces.hpp"
#include "tokenizer/tokenizer.hpp"

namespace troupe {

struct SamplerActorOptions {
  // Own thread, so sampling a large vocabulary does not hold up the
  // scheduler and detokenizer on CAF's shared threads.
  bool detached = true;
};

sampler_actor spawn_sampler(caf::actor_system& system, std::shared_ptr<const Tokenizer> tokenizer,
                            SamplerActorOptions options = {});

}  // namespace troupe

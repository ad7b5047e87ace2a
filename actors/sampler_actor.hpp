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

struct ActorMeter;

struct SamplerActorOptions {
  // Scheduled (false) by default: its reply then goes to the scheduler on
  // the same CAF thread, one thread hand-off less per step (measured: the
  // lower actor overhead on a busy 2-core machine). Detached gives it its
  // own thread, so that sampling a very large vocabulary for many rows does
  // not hold up the other light actors.
  bool detached = false;
  std::shared_ptr<ActorMeter> meter;  // optional load counters and trace track
};

sampler_actor spawn_sampler(caf::actor_system& system, std::shared_ptr<const Tokenizer> tokenizer,
                            SamplerActorOptions options = {});

}  // namespace troupe

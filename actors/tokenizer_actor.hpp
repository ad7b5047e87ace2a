// The tokenizer actor, the pipeline's front door: every request enters here,
// whatever its front end (HTTP, WebSocket, the C++ API, the CLI, the
// experiments). Runs detached (rendering a template or encoding a long
// prompt is CPU work that must hold up neither the scheduled actors nor a
// server's I/O threads); a pipeline may run a pool of them round-robin.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include <caf/fwd.hpp>

#include "actors/interfaces.hpp"
#include "tokenizer/chat_prompter.hpp"
#include "tokenizer/tokenizer.hpp"

namespace troupe {

struct ActorMeter;

struct TokenizerActorOptions {
  std::shared_ptr<const Tokenizer> tokenizer;
  std::shared_ptr<const ChatPrompter> prompter;
  ModelInfo model;  // context length, vocab size, BOS: the rules' facts
  std::shared_ptr<ActorMeter> meter;  // optional load counters and trace track (actors/actor_meter.hpp)
  // Requests refused here, added to PipelineStats::rejected; optional.
  std::shared_ptr<std::atomic<uint64_t>> refused;
  // A vision-language model's image encoder: requests with images go there
  // on their way to the scheduler. Null: the model reads text only
  // (model.image_tokens 0, so the reader refuses images).
  vision_actor vision;
};

// A request that breaks a rule (actors/request_rules.hpp), or whose text
// cannot be encoded or whose conversation the template refuses, ends there:
// a RequestDone(error) naming the field goes to the detokenizer, which tells
// the request's sink. No other request is touched.
tokenizer_actor spawn_tokenizer(caf::actor_system& system, TokenizerActorOptions options, scheduler_actor scheduler,
                                detokenizer_actor detokenizer);

}  // namespace troupe

// How a front-door actor (the tokenizer, the vision actor) ends a request it
// refuses: one RequestDone(error) for the detokenizer, naming the field at
// fault, counted in PipelineStats::rejected.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "actors/messages.hpp"

namespace troupe {

// `refused` (optional) counts it.
inline RequestDone refusal(RequestId id, Errc code, std::string message, std::string param,
                           std::atomic<uint64_t>* refused) {
  if (refused != nullptr) refused->fetch_add(1, std::memory_order_relaxed);
  return RequestDone{
      .id = id, .reason = EndReason::error, .code = code, .message = std::move(message), .param = std::move(param)};
}

}  // namespace troupe

// Names of request end reasons, as logs and the OpenAI-style API spell them;
// EngineRequest's constructors.
#include "actors/request_types.hpp"

namespace troupe {

const char* to_string(EndReason r) {
  switch (r) {
    case EndReason::stop: return "stop";
    case EndReason::length: return "length";
    case EndReason::cancelled: return "cancelled";
    case EndReason::error: return "error";
  }
  return "unknown";
}

}  // namespace troupe

namespace troupe {

EngineRequest EngineRequest::from_text(TextPrompt prompt, GenerateParams params) {
  EngineRequest r;
  r.kind = Kind::text;
  r.text = std::move(prompt);
  r.params = std::move(params);
  return r;
}

EngineRequest EngineRequest::from_pair(std::string first, std::string second, GenerateParams params) {
  EngineRequest r;
  r.kind = Kind::pair;
  r.text.text = std::move(first);
  r.pair_text = std::move(second);
  r.params = std::move(params);
  return r;
}

EngineRequest EngineRequest::from_chat(ChatPrompt prompt, GenerateParams params) {
  EngineRequest r;
  r.kind = Kind::chat;
  r.chat = std::move(prompt);
  r.params = std::move(params);
  return r;
}

EngineRequest EngineRequest::from_tokens(std::vector<int32_t> prompt, GenerateParams params) {
  EngineRequest r;
  r.kind = Kind::tokens;
  r.tokens = std::move(prompt);
  r.params = std::move(params);
  return r;
}

}  // namespace troupe

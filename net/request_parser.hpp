// Request bodies of the OpenAI-compatible API (/v1/completions,
// /v1/chat/completions) and of the WebSocket protocol, parsed into plain
// structs. Strict about what it knows (wrong types, missing fields and
// out-of-range values are an ApiError naming the field), silent about what
// it does not (unknown fields are ignored, as OpenAI's clients expect).
// No tokenizer and no model here: context-length checks come later (routes).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/request_types.hpp"

namespace troupe::net {

enum class Endpoint : uint8_t { completions, chat };

struct ChatMessage {
  std::string role;  // system, developer, user, assistant, tool
  std::string content;
};

struct RequestLimits {
  int32_t max_tokens = 4096;   // largest max_tokens a request may ask for
  int32_t max_n = 8;           // choices per request
  int32_t max_prompts = 16;    // prompts in one /v1/completions batch
  int32_t max_stop = 4;        // stop strings (OpenAI's limit)
  int32_t max_messages = 512;  // chat messages
};

struct ParsedRequest {
  Endpoint endpoint = Endpoint::completions;
  std::string model;  // empty over the WebSocket, where there is one model
  // completions: the prompts of a batch, as text or as token ids (exactly
  // one of the two is non-empty).
  std::vector<std::string> prompts;
  std::vector<std::vector<int32_t>> token_prompts;
  std::vector<ChatMessage> messages;  // chat
  std::optional<int32_t> max_tokens;  // absent: the endpoint's default
  int32_t n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;           // completions: the prompt precedes the text
  bool logprobs = false;       // report the chosen tokens' logprobs
  int32_t top_logprobs = 0;    // and this many alternatives
  std::optional<uint64_t> seed;
  // Sampling, stop strings, ignore_eos, priority; max_new_tokens and seed
  // are set later from max_tokens and seed.
  GenerateParams params;
};

// Throw ApiError (400, naming the field) for malformed bodies.
ParsedRequest parse_completion_request(std::string_view body, const RequestLimits& limits);
ParsedRequest parse_chat_request(std::string_view body, const RequestLimits& limits);

// A message a WebSocket client sends: {"type": "generate", "id": ..., then
// the fields of a chat ("messages") or completion ("prompt") request}, or
// {"type": "cancel", "id": ...}.
struct WsClientMessage {
  enum class Kind : uint8_t { generate, cancel } kind = Kind::generate;
  std::string id;         // the client's own id, 1..128 bytes
  ParsedRequest request;  // generate
};

// Throws ApiError; when the message had a usable "id" the error's param is
// the field at fault and `id_out` receives that id, so the error frame can
// name the request.
WsClientMessage parse_ws_message(std::string_view text, const RequestLimits& limits, std::string* id_out = nullptr);

}  // namespace troupe::net

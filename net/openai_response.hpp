// JSON bodies the server answers with, in the shapes OpenAI's API uses:
// text_completion and chat.completion bodies, their streamed chunks (each
// an SSE event), /v1/models, and the WebSocket protocol's frames. Plain
// strings out, so the transports and the tests need no JSON library.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/tool_calls.hpp"
#include "net/api_error.hpp"
#include "net/request_parser.hpp"

namespace troupe::net {

struct TokenAlternative {
  std::string token;           // the token's text, invalid UTF-8 repaired
  std::vector<uint8_t> bytes;  // the token's raw bytes
  float logprob = 0.0f;
};

// One generated token's logprob and the most likely alternatives.
struct TokenLogprobs {
  TokenAlternative chosen;
  std::vector<TokenAlternative> top;  // best first
  int32_t text_offset = 0;            // completions: where the token's text starts
  bool unscored = false;              // an echoed prompt's first token: null logprob and alternatives
};

struct Usage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
};

// What every body and chunk of one response repeats.
struct ResponseMeta {
  Endpoint endpoint = Endpoint::completions;
  std::string id;  // cmpl-... or chatcmpl-...
  int64_t created = 0;
  std::string model;
};

// A tool call as the API returns it: OpenAI's {"id", "type": "function",
// "function": {"name", "arguments"}}.
struct OutputToolCall {
  std::string id;  // call_...
  grammar::ToolCall call;
};

struct ChoiceOutput {
  int32_t index = 0;
  std::string text;           // chat: null content when empty and there are tool calls
  std::string reasoning;      // chat: the <think> block, as reasoning_content; empty: none
  std::vector<OutputToolCall> tool_calls;
  std::string finish_reason;  // stop, length, tool_calls
  bool with_logprobs = false;
  std::vector<TokenLogprobs> logprobs;
};

// A non-streamed response body.
std::string response_body(const ResponseMeta& meta, const std::vector<ChoiceOutput>& choices, Usage usage);

// One streamed chunk of one choice. role_first: chat's first chunk of a
// choice carries the role; finish_reason empty: not the last chunk;
// usage_null: the request asked for usage, so every chunk has "usage": null.
struct ChunkInput {
  int32_t index = 0;
  std::string_view text;
  std::string_view reasoning;  // chat: reasoning_content in the delta
  bool role_first = false;
  std::string_view finish_reason;
  const std::vector<OutputToolCall>* tool_calls = nullptr;  // chat: the calls, whole, in this chunk's delta
  bool with_logprobs = false;
  const std::vector<TokenLogprobs>* logprobs = nullptr;
  bool usage_null = false;
};
std::string chunk_json(const ResponseMeta& meta, const ChunkInput& in);
// The last chunk when stream_options.include_usage: no choices, the usage.
std::string usage_chunk_json(const ResponseMeta& meta, Usage usage);

// "data: <json>\n\n" and the terminating "data: [DONE]\n\n".
std::string sse_event(std::string_view json);
std::string sse_done();

// GET /v1/models and /v1/models/{id}.
std::string model_json(const std::string& id, int64_t created);
std::string models_list_json(const std::string& id, int64_t created);

// The WebSocket protocol's server frames (docs/api.md).
// images: whether the model reads images in chats (the chat page shows its attach button).
std::string ws_hello(const std::string& model, size_t max_message_bytes, int32_t max_requests, bool images = false);
std::string ws_token(const std::string& id, int32_t index, int32_t token, std::string_view text,
                     const TokenLogprobs* logprobs);
struct WsFinal {
  std::string id;
  std::string finish_reason;  // stop, length, cancelled, tool_calls
  std::string text;           // held-back text released at the end
  std::vector<OutputToolCall> tool_calls;  // chat with tools: the calls in the whole output
  Usage usage;
  double queue_seconds = 0;
  double first_token_seconds = 0;
  double total_seconds = 0;
};
std::string ws_final(const WsFinal& f);
// id empty: the error concerns the message as a whole (it had no usable id).
std::string ws_error(const std::string& id, const ApiError& e);

// Token text for logprob reports: the raw bytes, repaired into valid UTF-8.
TokenAlternative token_alternative(std::string bytes, float logprob);

}  // namespace troupe::net

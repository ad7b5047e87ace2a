// Request bodies of the OpenAI-compatible API (/v1/completions,
// /v1/chat/completions) and of the WebSocket protocol, parsed into plain
// structs. Strict about what it knows (wrong types, missing fields and
// out-of-range values are an ApiError naming the field), silent about what
// it does not (unknown fields are ignored, as OpenAI's clients expect).
// No tokenizer and no model here: the model's rules (context length, vocab
// range) are the engine's (actors/request_rules.hpp); the sampling ranges
// are check_sampling's, the one rule the sampler applies too.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/request_types.hpp"

namespace troupe::net {

enum class Endpoint : uint8_t { completions, chat };

struct RequestLimits {
  int32_t max_tokens = 4096;   // largest max_tokens a request may ask for
  int32_t max_n = 8;           // choices per request
  int32_t max_prompts = 16;    // prompts in one /v1/completions batch
  int32_t max_stop = 4;        // stop strings (OpenAI's limit)
  int32_t max_messages = 512;  // chat messages
};

// What a chat request lets the model do with its tools.
struct ToolChoice {
  enum class Mode : uint8_t {
    none,       // no tools, or "none": the output is text
    automatic,  // "auto" (the default with tools): calls the output makes are parsed out of it
    required,   // the output is one call or more
    function,   // the output is one call of `function`
  };
  Mode mode = Mode::none;
  std::string function;            // Mode::function
  // parallel_tool_calls: more than one call allowed; absent: yes for a
  // model its template teaches to call, no for others (see routes).
  std::optional<bool> parallel;
  std::vector<std::string> names;  // the tools' function names, in order

  bool forces() const { return mode == Mode::required || mode == Mode::function; }
};

struct ParsedRequest {
  Endpoint endpoint = Endpoint::completions;
  std::string model;  // empty over the WebSocket, where there is one model
  // completions: the prompts of a batch, as text or as token ids (exactly
  // one of the two is non-empty).
  std::vector<std::string> prompts;
  std::vector<std::vector<int32_t>> token_prompts;
  ChatPrompt chat;  // chat: messages (their other fields as JSON), tools, add_generation_prompt
  ToolChoice tool_choice;  // chat: tools, tool_choice, parallel_tool_calls
  std::optional<int32_t> max_tokens;  // absent: the endpoint's default
  int32_t n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;           // completions: the prompt precedes the text
  bool return_tokens_as_token_ids = false;  // logprob tokens as "token_id:N" (vLLM)
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

// POST /tokenize (vLLM's shape): {"prompt": "..."} or {"messages": [...],
// "add_generation_prompt": bool, "tools": [...]}, with "add_special_tokens"
// (text only, default true) and "return_token_strs"; "model" optional.
// POST /detokenize: {"tokens": [...]}.
struct TokenizeRequest {
  std::string model;  // empty: not given
  bool detokenize = false;
  EngineRequest prompt;  // text or chat; tokens for /detokenize
  bool return_token_strs = false;
};

TokenizeRequest parse_tokenize_request(std::string_view body, const RequestLimits& limits);
TokenizeRequest parse_detokenize_request(std::string_view body);

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

// Ollama's generation requests, POST /api/chat and /api/generate, read into
// the ParsedRequest the OpenAI routes run (net/request_parser.hpp): messages
// in Ollama's shape (tool_calls with object arguments, tool_name, thinking),
// its "options" (num_predict, temperature, ...) with Ollama's defaults,
// "format" ("json" or a schema), "think", and /api/generate's prompt under
// the chat template unless "raw". Apart from the replies
// (ollama_reply.hpp) so that the request fuzzer links them alone.
#pragma once

#include <string_view>

#include "net/request_parser.hpp"

namespace troupe::net {

struct OllamaGenerateRequest {
  // A chat (/api/chat, or /api/generate's prompt as the user's message), or
  // a completion of the prompt as it is (/api/generate with "raw").
  ParsedRequest request;
  // No messages, or an empty prompt: Ollama's call that loads the model
  // and generates nothing.
  bool load_only = false;
  // "think" was true or a level: the model must be one that thinks.
  bool think = false;
  bool logprobs = false;  // the reply carries "logprobs"
};

// Throw ApiError (400, naming the field as Ollama's clients write it:
// "messages[1].tool_calls[0].function.name", "options.temperature").
OllamaGenerateRequest parse_ollama_chat(std::string_view body, const RequestLimits& limits);
OllamaGenerateRequest parse_ollama_generate(std::string_view body, const RequestLimits& limits);

// Ollama's sampling defaults (its api.DefaultOptions), where a request's
// options leave them out: Ollama's clients count on them.
inline constexpr float kOllamaTemperature = 0.8f;
inline constexpr int32_t kOllamaTopK = 40;
inline constexpr float kOllamaTopP = 0.9f;
inline constexpr int32_t kOllamaRepeatLastN = 64;  // the penalties' window

}  // namespace troupe::net

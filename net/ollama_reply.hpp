// The replies of Ollama's /api/chat and /api/generate: a stream of JSON
// lines (application/x-ndjson, Ollama's default) or one JSON body when the
// request set "stream": false. Each line carries the model, created_at,
// the new text ("message" for chat, "response" for generate, "thinking"
// apart) and "done"; the last adds done_reason and Ollama's counters
// (nanoseconds). An error before the first line is a status and
// {"error": "..."}; after it, an {"error": "..."} line ends the stream.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "net/generation.hpp"
#include "net/http_types.hpp"

namespace troupe::net {

class ServerCore;

struct OllamaReplyOptions {
  bool chat = true;  // /api/chat's "message"; else /api/generate's "response"
  bool stream = true;
  bool logprobs = false;                        // each line carries its tokens' "logprobs"
  std::string model;                            // as the request named it (Ollama echoes the name asked for)
  std::chrono::steady_clock::time_point start;  // when the request came: total_duration
};

// Runs `spec` (one choice, already admitted) once started; cancelling it
// (the client went away) cancels the choice in the pipeline.
std::shared_ptr<AsyncReply> make_ollama_reply(ServerCore& core, JobSpec spec, OllamaReplyOptions options);

// The reply to a request with nothing to generate (no messages, an empty
// prompt): Ollama loads the model and answers done, done_reason "load".
std::string ollama_load_body(bool chat, const std::string& model);

}  // namespace troupe::net

// Ollama's API, for the clients written against it (LangChain's and
// LlamaIndex's Ollama embeddings, Open WebUI's and Continue's model
// lists): POST /api/embed and its older /api/embeddings, GET /api/tags and
// /api/version. Request fields, reply bodies and the error shape
// ({"error": "message"}) as Ollama's docs/api.md gives them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "net/api_error.hpp"
#include "net/engine_client.hpp"
#include "net/http_types.hpp"
#include "net/ollama_request.hpp"

namespace troupe::net {

// {"model", "embeddings": [[...]], "total_duration" (ns),
// "load_duration": 0, "prompt_eval_count"}.
std::string ollama_embed_body(const std::vector<std::vector<float>>& vectors, const std::string& model,
                              int64_t prompt_tokens, int64_t total_ns);
// {"embedding": [...]}: the legacy route's one vector.
std::string ollama_embedding_body(const std::vector<float>& vector);

// {"models": [{"name", "model", "modified_at", "size", "digest",
// "details"}]}: the one served model, loaded at `created` (unix seconds).
std::string ollama_tags_body(const ServedModel& served);
// {"version": "<Troupe's version>"}.
std::string ollama_version_body();

// The reply of an error in Ollama's shape: {"error": "message"}, the
// status kept (`openai` is the same error as ServerCore::error_reply wrote
// and counted it); advice naming truncate_prompt_tokens names Ollama's
// "truncate" instead.
HttpReply ollama_error_reply(HttpReply openai, const ApiError& e);

}  // namespace troupe::net

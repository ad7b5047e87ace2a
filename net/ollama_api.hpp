// Ollama's API, for the clients written against it (the ollama package,
// LangChain's and LlamaIndex's Ollama classes, Open WebUI, Continue): the
// bodies of POST /api/embed and its older /api/embeddings, GET /api/tags,
// POST /api/show, GET /api/ps and GET /api/version, and the error shape
// ({"error": "message"}), as Ollama's docs/api.md gives them. /api/chat's
// and /api/generate's are net/ollama_reply.hpp's.
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

// What Ollama lists of a model: its size on the host (weight_bytes), its
// digest, and "details" (format, family).
struct OllamaModelFacts {
  ServedModel served;
  int64_t weight_bytes = 0;
};

// {"models": [{"name", "model", "modified_at", "size", "digest",
// "details", "capabilities"}]}: the one served model, loaded at `created`.
std::string ollama_tags_body(const OllamaModelFacts& model);
// POST /api/show: {"details", "model_info" ("general.architecture",
// "<arch>.context_length", ...), "capabilities", "modified_at"}; no
// modelfile or template (Troupe renders the model's own Jinja template).
std::string ollama_show_body(const OllamaModelFacts& model);
// GET /api/ps: the served model as loaded: "size" (weights and KV pages),
// "size_vram" (the share of those on GPUs, by layers), "expires_at" (never:
// the server holds it for its life), "context_length".
std::string ollama_ps_body(const OllamaModelFacts& model, int64_t kv_bytes, const std::vector<StageHealth>& stages);

// Now, in RFC 3339 with nanoseconds in UTC, as Go's time.Time marshals
// Ollama's created_at.
std::string ollama_timestamp_now();
// {"version": "<Troupe's version>"}.
std::string ollama_version_body();

// The reply of an error in Ollama's shape: {"error": "message"}, the
// status kept (`openai` is the same error as ServerCore::error_reply wrote
// and counted it); advice naming truncate_prompt_tokens names Ollama's
// "truncate" instead.
HttpReply ollama_error_reply(HttpReply openai, const ApiError& e);

}  // namespace troupe::net

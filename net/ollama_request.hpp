// Ollama's embedding requests (POST /api/embed and the older
// /api/embeddings) and its model names, apart from the replies
// (ollama_api.hpp) so that the request fuzzer links them alone.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "net/embeddings_request.hpp"

namespace troupe::net {

// POST /api/embed {"model", "input": text or [texts], "truncate" (default
// true: cut to the context), "dimensions", "options", "keep_alive"}, or,
// legacy, /api/embeddings {"model", "prompt": text}. As an
// EmbeddingsRequest: /api/embed's vectors are L2-normalized whatever the
// model declares (Ollama's contract); the legacy route's are as the model
// makes them. "options" and "keep_alive" are checked and not used: the
// server's settings are fixed at start. Throws ApiError(400) naming the field.
EmbeddingsRequest parse_ollama_embed(std::string_view body, bool legacy, int32_t max_inputs);

// POST /api/show {"model"} (or the older "name"): the model asked about.
std::string parse_ollama_show(std::string_view body);

// Ollama names a model "name:tag", "latest" when no tag is given: the
// served id answers to itself and to "<id>:latest".
bool ollama_names_model(std::string_view asked, std::string_view served);

}  // namespace troupe::net

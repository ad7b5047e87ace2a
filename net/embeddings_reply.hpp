// The asynchronous reply of POST /v1/embeddings: each input is one engine
// request (an embedding request, EmbedParams) of an engine batch reply
// (engine_batch_reply.hpp); the reply is OpenAI's list once all are in, or
// the first input's error.
#pragma once

#include <memory>

#include "net/embeddings_request.hpp"
#include "net/engine_client.hpp"
#include "net/http_types.hpp"

namespace troupe::net {

class ServerCore;

// `slots`: the requests admitted for it (AdmissionControl), released when it
// ends; at most that many inputs run at once.
std::shared_ptr<AsyncReply> make_embeddings_reply(ServerCore& core, EmbeddingsRequest request, std::string model_id,
                                                  int32_t slots);

// One engine request per input of `request`, its errors naming `field`
// ("input", "input[2]" in a batch).
std::vector<EngineRequest> embedding_engine_requests(const EmbeddingsRequest& request, const std::string& field);

// The reply body: {"object": "list", "data": [{"object": "embedding",
// "index": i, "embedding": [...] or base64}], "model", "usage"}. Floats are
// written in their shortest exact form.
std::string embeddings_body(const std::vector<std::vector<float>>& vectors, bool base64, const std::string& model_id,
                            int64_t prompt_tokens);

}  // namespace troupe::net

// The asynchronous reply of a route whose answer takes several engine
// requests (/v1/embeddings' inputs, /v1/rerank's pairs or texts): each
// runs as its own request, at most `slots` of them in flight at once. Once
// all are in, `finish` writes the reply from their vectors (an embedding,
// or a cross-encoder's scores); the first failure is the reply instead,
// the others then cancelled.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/request_types.hpp"
#include "net/api_error.hpp"
#include "net/engine_client.hpp"
#include "net/http_types.hpp"

namespace troupe::net {

class ServerCore;

// vectors: [n_requests][width], in the order of `requests`; prompt_tokens:
// their prompts' tokens in all.
using BatchFinish = std::function<HttpReply(std::vector<std::vector<float>> vectors, int64_t prompt_tokens)>;

// The reply of a failure; empty: ServerCore::error_reply's (OpenAI's shape).
using BatchError = std::function<HttpReply(const ApiError& e)>;

// `slots`: the requests admitted for it (AdmissionControl), released when
// it ends. `route` names the requests in /metrics ("embeddings", "rerank").
std::shared_ptr<AsyncReply> make_engine_batch_reply(ServerCore& core, std::vector<EngineRequest> requests,
                                                    int32_t slots, std::string route, BatchFinish finish,
                                                    BatchError error = {});

}  // namespace troupe::net

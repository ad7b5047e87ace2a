// The asynchronous reply of POST /v1/rerank and /v1/score
// (score_request.hpp). A cross-encoder (ModelInfo::n_labels 1) reads each
// pair in one pass, its classifier's logit through the model's activation
// (a sigmoid unless it names Identity) being the score. An embedding model
// embeds each distinct text once, L2-normalized, and a pair's score is the
// cosine of its two vectors, as vLLM scores with embedding models.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/request_types.hpp"
#include "net/engine_client.hpp"
#include "net/http_types.hpp"
#include "net/score_request.hpp"

namespace troupe::net {

class ServerCore;

// Throws ApiError(400) when the model scores no pairs: a generating model,
// or a classifier of more than one label.
void check_scoring_model(const ModelInfo& model, const std::string& model_id);

// `slots`: the requests admitted for it, released when it ends.
std::shared_ptr<AsyncReply> make_score_reply(ServerCore& core, ScoreRequest request, const ModelInfo& model,
                                             std::string model_id, int32_t slots);

// A cross-encoder's score of its logit.
double relevance(float logit, bool sigmoid);

// The bodies. rerank: {"id", "model", "usage", "results": [{"index",
// "relevance_score", "document": {"text"}}]}, best first, top_n of them;
// score: {"id", "object": "list", "created", "model", "data": [{"index",
// "object": "score", "score"}], "usage"} in the pairs' order.
std::string rerank_body(const ScoreRequest& request, const std::vector<double>& scores, const std::string& id,
                        const std::string& model_id, int64_t prompt_tokens);
std::string score_body(const std::vector<double>& scores, const std::string& id, int64_t created,
                       const std::string& model_id, int64_t prompt_tokens);

}  // namespace troupe::net

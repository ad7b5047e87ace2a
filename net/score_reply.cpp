#include "net/score_reply.hpp"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <numeric>
#include <unordered_map>

#include "net/api_error.hpp"
#include "net/engine_batch_reply.hpp"
#include "net/json_body.hpp"
#include "net/routes.hpp"

namespace troupe::net {
namespace {

std::string pair_field(const ScoreRequest& r, size_t i) {
  return (r.rerank ? "documents[" : "text_2[") + std::to_string(i) + "]";
}

// The reply once the scores are known.
HttpReply scores_reply(const ScoreRequest& r, const std::vector<double>& scores, const std::string& model_id,
                       int64_t prompt_tokens) {
  if (r.rerank) return json_reply(200, rerank_body(r, scores, new_response_id("rerank-"), model_id, prompt_tokens));
  const auto created = static_cast<int64_t>(std::time(nullptr));
  return json_reply(200, score_body(scores, new_response_id("score-"), created, model_id, prompt_tokens));
}

// A cross-encoder: one pair request per pair, its first logit the score.
std::shared_ptr<AsyncReply> cross_encoder_reply(ServerCore& core, ScoreRequest r, const ModelInfo& model,
                                                std::string model_id, int32_t slots) {
  std::vector<EngineRequest> requests;
  for (size_t i = 0; i < r.size(); ++i) {
    EngineRequest e = EngineRequest::from_pair(r.first_of(i), r.second[i]);
    e.prompt_field = pair_field(r, i);
    e.params.embed = {.on = true, .truncate = r.truncate};
    requests.push_back(std::move(e));
  }
  const bool sigmoid = model.score_sigmoid;
  const char* route = r.rerank ? "rerank" : "score";
  return make_engine_batch_reply(core, std::move(requests), slots, route,
                                 [r = std::move(r), sigmoid, model_id = std::move(model_id)](
                                     std::vector<std::vector<float>> logits, int64_t prompt_tokens) {
                                   std::vector<double> scores;
                                   for (const std::vector<float>& l : logits)
                                     scores.push_back(relevance(l[0], sigmoid));
                                   return scores_reply(r, scores, model_id, prompt_tokens);
                                 });
}

// An embedding model: each distinct text embedded once (normalized), a
// pair scored by the dot product of its unit vectors.
std::shared_ptr<AsyncReply> bi_encoder_reply(ServerCore& core, ScoreRequest r, std::string model_id, int32_t slots) {
  std::vector<EngineRequest> requests;
  std::unordered_map<std::string, size_t> index;  // text -> its request
  auto add = [&](const std::string& text, const std::string& field) {
    if (index.contains(text)) return;
    index.emplace(text, requests.size());
    EngineRequest e = EngineRequest::from_text({.text = text, .add_special = true});
    e.prompt_field = field;
    e.params.embed = {.on = true, .normalize = 1, .truncate = r.truncate};
    requests.push_back(std::move(e));
  };
  for (size_t i = 0; i < r.first.size(); ++i) {
    add(r.first[i], r.rerank ? "query" : r.first.size() > 1 ? "text_1[" + std::to_string(i) + "]" : "text_1");
  }
  for (size_t i = 0; i < r.size(); ++i) add(r.second[i], pair_field(r, i));
  std::vector<std::pair<size_t, size_t>> pairs;  // the two requests of each pair
  for (size_t i = 0; i < r.size(); ++i) pairs.emplace_back(index.at(r.first_of(i)), index.at(r.second[i]));
  // Every slot admitted is given back at the end, however few texts were
  // distinct.
  const char* route = r.rerank ? "rerank" : "score";
  return make_engine_batch_reply(core, std::move(requests), slots, route,
                                 [r = std::move(r), pairs = std::move(pairs), model_id = std::move(model_id)](
                                     std::vector<std::vector<float>> vectors, int64_t prompt_tokens) {
                                   std::vector<double> scores;
                                   for (const auto& [a, b] : pairs) {
                                     const std::vector<float>& x = vectors[a];
                                     const std::vector<float>& y = vectors[b];
                                     double dot = 0.0;
                                     for (size_t k = 0; k < x.size() && k < y.size(); ++k)
                                       dot += static_cast<double>(x[k]) * y[k];
                                     scores.push_back(dot);
                                   }
                                   return scores_reply(r, scores, model_id, prompt_tokens);
                                 });
}

}  // namespace

void check_scoring_model(const ModelInfo& model, const std::string& model_id) {
  if (model.pooling == Pooling::none) {
    throw ApiError(
        400,
        "the model '" + model_id + "' generates text; scoring needs a cross-encoder (a reranker) or an embedding model",
        "model", "model_not_supported");
  }
  if (model.n_labels > 1) {
    throw ApiError(400,
                   "the model '" + model_id + "' is a classifier of " + std::to_string(model.n_labels) +
                       " labels; scoring needs a cross-encoder of one",
                   "model", "model_not_supported");
  }
}

double relevance(float logit, bool sigmoid) {
  return sigmoid ? 1.0 / (1.0 + std::exp(-static_cast<double>(logit))) : static_cast<double>(logit);
}

std::shared_ptr<AsyncReply> make_score_reply(ServerCore& core, ScoreRequest request, const ModelInfo& model,
                                             std::string model_id, int32_t slots) {
  if (model.n_labels > 0) return cross_encoder_reply(core, std::move(request), model, std::move(model_id), slots);
  return bi_encoder_reply(core, std::move(request), std::move(model_id), slots);
}

std::string rerank_body(const ScoreRequest& request, const std::vector<double>& scores, const std::string& id,
                        const std::string& model_id, int64_t prompt_tokens) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  if (request.top_n > 0 && order.size() > static_cast<size_t>(request.top_n)) {
    order.resize(static_cast<size_t>(request.top_n));
  }
  std::string out = R"({"id":)" + json_quoted(id) + R"(,"model":)" + json_quoted(model_id) + "," +
                    usage_json(prompt_tokens) + R"(,"results":[)";
  for (size_t k = 0; k < order.size(); ++k) {
    const size_t i = order[k];
    if (k > 0) out += ',';
    out += R"({"index":)" + std::to_string(i) + R"(,"relevance_score":)";
    append_number(out, scores[i]);
    if (request.return_documents) out += R"(,"document":{"text":)" + json_quoted(request.second[i]) + "}";
    out += '}';
  }
  return out + "]}";
}

std::string score_body(const std::vector<double>& scores, const std::string& id, int64_t created,
                       const std::string& model_id, int64_t prompt_tokens) {
  std::string out = R"({"id":)" + json_quoted(id) + R"(,"object":"list","created":)" + std::to_string(created) +
                    R"(,"model":)" + json_quoted(model_id) + R"(,"data":[)";
  for (size_t i = 0; i < scores.size(); ++i) {
    if (i > 0) out += ',';
    out += R"({"index":)" + std::to_string(i) + R"(,"object":"score","score":)";
    append_number(out, scores[i]);
    out += '}';
  }
  return out + "]," + usage_json(prompt_tokens) + "}";
}

}  // namespace troupe::net

// POST /v1/classify (vLLM's): a sequence classifier's labels for texts.
// Each input is one engine request (EngineRequest text or tokens, its
// output the classifier's logits); the reply gives each input's
// probabilities (a softmax over the labels; a sigmoid each for a
// multi-label classifier or a one-label one) and its most probable label.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "actors/request_types.hpp"
#include "net/engine_client.hpp"
#include "net/http_types.hpp"

namespace troupe::net {

class ServerCore;

struct ClassifyRequest {
  std::string model;  // empty: not given
  // The inputs, as text or as token ids (exactly one of the two is non-empty).
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> token_lists;
  bool add_special_tokens = true;
  int32_t truncate = 0;  // EmbedParams::truncate

  size_t size() const { return texts.empty() ? token_lists.size() : texts.size(); }
};

// Throws ApiError(400) naming the field at fault.
ClassifyRequest parse_classify_request(std::string_view body, int32_t max_inputs);

// Throws ApiError(400) naming `model` unless the model is a classifier.
void check_classifier(const ModelInfo& model, const std::string& model_id);

// A classifier's probabilities of its logits [n_labels].
std::vector<double> label_probs(const std::vector<float>& logits, const ModelInfo& model);

// {"id", "object": "list", "created", "model", "data": [{"index", "label",
// "probs", "num_classes"}], "usage"}.
std::string classify_body(const std::vector<std::vector<double>>& probs, const std::vector<std::string>& labels,
                          const std::string& id, int64_t created, const std::string& model_id, int64_t prompt_tokens);

// `slots`: the requests admitted for it, released when it ends.
std::shared_ptr<AsyncReply> make_classify_reply(ServerCore& core, ClassifyRequest request, const ModelInfo& model,
                                                std::string model_id, int32_t slots);

}  // namespace troupe::net

#include "net/classify_reply.hpp"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <limits>

#include "net/api_error.hpp"
#include "net/engine_batch_reply.hpp"
#include "net/json_body.hpp"
#include "net/request_field.hpp"
#include "net/routes.hpp"
#include "net/score_reply.hpp"

namespace troupe::net {
namespace {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

}  // namespace

ClassifyRequest parse_classify_request(std::string_view body, int32_t max_inputs) {
  const boost::json::object o = parse_object(body, "the request body");
  ClassifyRequest r;
  if (auto m = get_string(o, "model")) r.model = *m;
  read_prompts(o, "input", max_inputs, r.texts, r.token_lists);
  if (auto a = get_bool(o, "add_special_tokens")) r.add_special_tokens = *a;
  if (auto t = get_int(o, "truncate_prompt_tokens", -1, std::numeric_limits<int32_t>::max())) {
    if (*t == 0) out_of_range("truncate_prompt_tokens", "-1 (the context) or a positive number of tokens");
    r.truncate = static_cast<int32_t>(*t);
  }
  (void)get_string(o, "user");  // an end-user id: checked, not used
  return r;
}

void check_classifier(const ModelInfo& model, const std::string& model_id) {
  if (model.n_labels > 0) return;
  throw ApiError(400,
                 "the model '" + model_id + "' is not a sequence classifier (a *ForSequenceClassification checkpoint)",
                 "model", "model_not_supported");
}

std::vector<double> label_probs(const std::vector<float>& logits, const ModelInfo& model) {
  std::vector<double> p(logits.begin(), logits.end());
  if (p.size() == 1) {
    p[0] = relevance(logits[0], model.score_sigmoid);  // as /v1/rerank scores it
  } else if (model.multi_label) {
    for (double& x : p) x = sigmoid(x);
  } else {
    const double top = *std::max_element(p.begin(), p.end());
    double sum = 0.0;
    for (double& x : p) sum += (x = std::exp(x - top));
    for (double& x : p) x /= sum;
  }
  return p;
}

std::string classify_body(const std::vector<std::vector<double>>& probs, const std::vector<std::string>& labels,
                          const std::string& id, int64_t created, const std::string& model_id, int64_t prompt_tokens) {
  std::string out = R"({"id":)" + json_quoted(id) + R"(,"object":"list","created":)" + std::to_string(created) +
                    R"(,"model":)" + json_quoted(model_id) + R"(,"data":[)";
  for (size_t i = 0; i < probs.size(); ++i) {
    const std::vector<double>& p = probs[i];
    const auto best = static_cast<size_t>(std::max_element(p.begin(), p.end()) - p.begin());
    if (i > 0) out += ',';
    out += R"({"index":)" + std::to_string(i) + R"(,"label":)" +
           json_quoted(best < labels.size() ? labels[best] : "LABEL_" + std::to_string(best)) + R"(,"probs":[)";
    for (size_t k = 0; k < p.size(); ++k) {
      if (k > 0) out += ',';
      append_number(out, p[k]);
    }
    out += R"(],"num_classes":)" + std::to_string(p.size()) + "}";
  }
  return out + "]," + usage_json(prompt_tokens) + "}";
}

std::shared_ptr<AsyncReply> make_classify_reply(ServerCore& core, ClassifyRequest request, const ModelInfo& model,
                                                std::string model_id, int32_t slots) {
  std::vector<EngineRequest> requests;
  for (size_t i = 0; i < request.size(); ++i) {
    EngineRequest r =
        request.texts.empty()
            ? EngineRequest::from_tokens(request.token_lists[i])
            : EngineRequest::from_text({.text = request.texts[i], .add_special = request.add_special_tokens});
    r.prompt_field = request.size() > 1 ? "input[" + std::to_string(i) + "]" : "input";
    r.params.embed = {.on = true, .truncate = request.truncate};
    requests.push_back(std::move(r));
  }
  return make_engine_batch_reply(
      core, std::move(requests), slots, "classify",
      [model, model_id = std::move(model_id)](std::vector<std::vector<float>> logits, int64_t prompt_tokens) {
        std::vector<std::vector<double>> probs;
        for (const std::vector<float>& l : logits) probs.push_back(label_probs(l, model));
        const auto created = static_cast<int64_t>(std::time(nullptr));
        return json_reply(
            200, classify_body(probs, model.labels, new_response_id("classify-"), created, model_id, prompt_tokens));
      });
}

}  // namespace troupe::net

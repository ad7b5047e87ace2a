// A causal reranker in GGUF (pooling_type rank), as llama.cpp's converter
// writes Qwen3-Reranker: `cls.output` {n_embd, labels} over the last
// token's normed hidden state in place of the LM head, the label names in
// `<arch>.classifier.output_labels`, and the prompt of a (query, document)
// pair as the chat template named "rerank".
#include <string>

#include "core/error.hpp"
#include "model/gguf_model_impl.hpp"
#include "model/sequence_classifier.hpp"
#include "model/weight_store.hpp"

namespace troupe::gguf_load {

std::vector<std::string> GgufModel::classifier_labels(const std::string& p, const gguf::TensorInfo& out) const {
  if (out.shape.size() != 2 || out.shape[0] != config_.n_embd || out.shape[1] < 1) {
    fail("tensor 'cls.output.weight' must be {embedding_length, labels}");
  }
  const auto n = static_cast<size_t>(out.shape[1]);
  const std::vector<std::string>* names = file_.find_string_array(p + "classifier.output_labels");
  if (names != nullptr && names->size() != n) {
    fail(p + "classifier.output_labels names " + std::to_string(names->size()) + " labels for " + std::to_string(n) +
         " outputs");
  }
  if (names != nullptr) return *names;
  std::vector<std::string> labels;
  for (size_t i = 0; i < n; ++i) labels.push_back("LABEL_" + std::to_string(i));
  return labels;
}

void GgufModel::bind_causal_classifier(const std::string& p) {
  ModelConfig& c = config_;
  ModelWeights& w = weights_;
  const gguf::TensorInfo* out = file_.find_tensor("cls.output.weight");
  if (out == nullptr) fail("pooling_type rank needs a classifier, and the file has no 'cls.output.weight'");
  c.labels = classifier_labels(p, *out);
  const auto n_out = static_cast<int64_t>(c.labels.size());
  const Weight head = matrix("cls.output.weight", c.n_embd, n_out);
  const float* bias = file_.find_tensor("cls.output.bias") != nullptr ? vector("cls.output.bias", n_out) : nullptr;
  if ((c.arch == "qwen3" || c.arch == "qwen3vl") && n_out == 2) {
    // llama.cpp takes a softmax over Qwen3's two rows ("yes", "no") and
    // scores the first: softmax([a, b])[0] = sigmoid(a - b), one row.
    w.cls_out = token_score_row(head, 0, 1, store_);
    if (bias != nullptr) {
      float* b = store_.floats(1);
      b[0] = bias[0] - bias[1];
      bias = b;
    }
    c.labels.resize(1);
  } else {
    w.cls_out = head;
  }
  c.n_labels = static_cast<int32_t>(c.labels.size());
  w.cls_out_b = bias;
  w.output = Weight{};  // the classifier replaces the LM head
  c.rerank_template = file_.find_string("tokenizer.chat_template.rerank").value_or("");
}

}  // namespace troupe::gguf_load

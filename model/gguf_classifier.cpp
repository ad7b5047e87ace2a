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

void GgufModel::bind_causal_classifier(const std::string& p) {
  ModelConfig& c = config_;
  ModelWeights& w = weights_;
  const gguf::TensorInfo* out = file_.find_tensor("cls.output.weight");
  if (out == nullptr) fail("pooling_type rank needs a classifier, and the file has no 'cls.output.weight'");
  if (out->shape.size() != 2 || out->shape[0] != c.n_embd || out->shape[1] < 1) {
    fail("tensor 'cls.output.weight' must be {embedding_length, labels}");
  }
  const int64_t n_out = out->shape[1];
  const std::vector<std::string>* names = file_.find_string_array(p + "classifier.output_labels");
  if (names != nullptr && names->size() != static_cast<size_t>(n_out)) {
    fail(p + "classifier.output_labels names " + std::to_string(names->size()) + " labels for " +
         std::to_string(n_out) + " outputs");
  }
  const Weight head = matrix("cls.output.weight", c.n_embd, n_out);
  const float* bias = file_.find_tensor("cls.output.bias") != nullptr ? vector("cls.output.bias", n_out) : nullptr;
  if ((c.arch == "qwen3" || c.arch == "qwen3vl") && n_out == 2) {
    // llama.cpp takes a softmax over Qwen3's two rows ("yes", "no") and
    // scores the first: softmax([a, b])[0] = sigmoid(a - b), one row.
    w.cls_out = yes_no_row(head, 0, 1, store_);
    if (bias != nullptr) {
      float* b = store_.floats(1);
      b[0] = bias[0] - bias[1];
      bias = b;
    }
    c.n_labels = 1;
    c.labels = {names != nullptr ? (*names)[0] : "LABEL_0"};
  } else {
    w.cls_out = head;
    c.n_labels = static_cast<int32_t>(n_out);
    c.labels.assign(static_cast<size_t>(n_out), "");
    for (int64_t i = 0; i < n_out; ++i) {
      c.labels[static_cast<size_t>(i)] =
          names != nullptr ? (*names)[static_cast<size_t>(i)] : "LABEL_" + std::to_string(i);
    }
  }
  w.cls_out_b = bias;
  w.output = Weight{};  // the classifier replaces the LM head
  c.rerank_template = file_.find_string("tokenizer.chat_template.rerank").value_or("");
}

}  // namespace troupe::gguf_load

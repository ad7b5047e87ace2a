// Sequence classifiers' labels and the heads of causal models run as
// classifiers (model/sequence_classifier.hpp).
#include "model/sequence_classifier.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "kernels/backend.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"
#include "model/model.hpp"

namespace troupe {
namespace {

std::string lowered(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return s;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

const std::string_view kQwen3RerankTemplate =
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
    "provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n<Instruct>: Given a "
    "web search query, retrieve relevant passages that answer the query\n<Query>: {query}\n<Document>: "
    "{document}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";

void read_hf_labels(const HfConfig& cfg, ModelConfig& c) {
  int64_t n = cfg.get_int("num_labels", 0);
  const nlohmann::json* names = nullptr;
  if (cfg.has("id2label")) {
    names = &cfg.json()["id2label"];
    if (!names->is_object()) cfg.fail(Errc::bad_format, "id2label is not an object");
    n = static_cast<int64_t>(names->size());
  }
  if (n < 1 || n > 65536) {
    cfg.fail(Errc::bad_format, "a sequence classifier needs 1 to 65536 labels (id2label or num_labels)");
  }
  c.n_labels = static_cast<int32_t>(n);
  c.labels.assign(static_cast<size_t>(n), "");
  for (int64_t i = 0; i < n; ++i) {
    const std::string key = std::to_string(i);
    const bool named = names != nullptr && names->contains(key) && (*names)[key].is_string();
    if (names != nullptr && !named) cfg.fail(Errc::bad_format, "id2label has no name for label " + key);
    c.labels[static_cast<size_t>(i)] = named ? (*names)[key].get<std::string>() : "LABEL_" + key;
  }
  const std::string problem = cfg.get_string("problem_type", "");
  if (!problem.empty() && problem != "single_label_classification" && problem != "multi_label_classification" &&
      problem != "regression") {
    cfg.fail(Errc::unsupported, "problem_type '" + problem + "' is not supported");
  }
  c.multi_label = problem == "multi_label_classification";
}

bool names_sequence_classifier(const HfConfig& cfg) {
  for (const nlohmann::json& a : cfg.json()["architectures"]) {
    if (a.is_string() && a.get<std::string>().ends_with("ForSequenceClassification")) return true;
  }
  return false;
}

bool is_qwen3_reranker(const std::string& dir, const HfConfig& cfg) {
  namespace fs = std::filesystem;
  if (cfg.get_string("model_type", "") != "qwen3") return false;
  if (const fs::path readme = fs::path(dir) / "README.md"; fs::exists(readme)) {
    if (lowered(read_file(readme)).find("# qwen3-reranker") != std::string::npos) return true;
  }
  fs::path path(dir);
  if (path.filename().empty()) path = path.parent_path();
  for (const std::string& hint : {path.filename().string(), cfg.get_string("_name_or_path", "")}) {
    if (lowered(hint).find("qwen3-reranker") != std::string::npos) return true;
  }
  return false;
}

int32_t hf_token_id(const std::string& dir, std::string_view token) {
  const std::filesystem::path path = std::filesystem::path(dir) / "tokenizer.json";
  if (!std::filesystem::exists(path)) return -1;
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw Error(Errc::bad_format, path.string() + ": " + e.what());
  }
  const std::string key(token);
  if (doc.contains("model") && doc["model"].contains("vocab") && doc["model"]["vocab"].is_object()) {
    const nlohmann::json& vocab = doc["model"]["vocab"];
    if (auto it = vocab.find(key); it != vocab.end() && it->is_number_integer()) return it->get<int32_t>();
  }
  if (doc.contains("added_tokens") && doc["added_tokens"].is_array()) {
    for (const nlohmann::json& t : doc["added_tokens"]) {
      if (t.value("content", "") != key || !t.contains("id") || !t["id"].is_number_integer()) continue;
      return t["id"].get<int32_t>();
    }
  }
  return -1;
}

Weight token_score_row(const Weight& head, int64_t row, int64_t minus, WeightStore& store) {
  if (row < 0 || row >= head.n_out || minus < -1 || minus >= head.n_out) {
    throw Error(Errc::bad_format, "rows " + std::to_string(row) + " and " + std::to_string(minus) +
                                      " are not both rows of the " + std::to_string(head.n_out) + "-row head");
  }
  const int64_t n = head.n_in;
  const auto* base = static_cast<const uint8_t*>(head.data);
  const int64_t stride = row_bytes(head.type, n);
  float* out = store.floats(n);
  dequantize_row(head.type, base + row * stride, out, n);
  if (minus >= 0) {
    std::vector<float> other(static_cast<size_t>(n));
    dequantize_row(head.type, base + minus * stride, other.data(), n);
    for (int64_t i = 0; i < n; ++i) out[i] -= other[static_cast<size_t>(i)];
  }
  return Weight{.data = out, .type = DType::f32, .n_in = n, .n_out = 1};
}

void bind_token_classifier(const std::vector<std::string>& tokens, const std::vector<int32_t>& ids,
                           const std::string& what, ModelConfig& c, ModelWeights& w, WeightStore& store) {
  if (tokens.empty() || tokens.size() > 2 || ids.size() != tokens.size()) {
    throw Error(Errc::invalid_argument,
                what + ": classifier_from_token names one token or two, not " + std::to_string(tokens.size()));
  }
  if (!c.causal || c.n_labels > 0) {
    throw Error(Errc::invalid_argument,
                what + ": classifier_from_token makes a causal language model a reranker, and the model is " +
                    (c.causal ? "already a classifier" : "an encoder"));
  }
  if (w.output.data == nullptr) {
    throw Error(Errc::invalid_argument, what + ": classifier_from_token reads the LM head, and the model has none");
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (ids[i] < 0) {
      throw Error(Errc::invalid_argument,
                  what + ": classifier_from_token '" + tokens[i] + "' is not a token of the model's vocabulary");
    }
  }
  w.cls_out = token_score_row(w.output, ids.back(), tokens.size() == 2 ? ids[0] : -1, store);
  w.cls_out_b = nullptr;
  w.output = Weight{};  // the classifier replaces the LM head
  c.n_labels = 1;
  c.labels = {tokens.back()};
}

void apply_rerank_template(const ModelLoadOptions& options, const std::string& what, ModelConfig& c) {
  if (options.rerank_template.empty()) return;
  if (!c.causal || c.n_labels == 0) {
    throw Error(Errc::invalid_argument,
                what +
                    ": a rerank template is for a causal reranker (a Qwen3-Reranker, a *ForSequenceClassification "
                    "of a causal model, or classifier_from_token)");
  }
  if (options.rerank_template.find("{document}") == std::string::npos) {
    throw Error(Errc::invalid_argument, what + ": the rerank template has no {document}");
  }
  c.rerank_template = options.rerank_template;
}

bool bind_hf_causal_classifier(const std::string& dir, const HfConfig& cfg, HfWeights& src,
                               const ModelLoadOptions& options, ModelConfig& c, ModelWeights& w, WeightStore& store) {
  const std::vector<std::string>& tokens = options.classifier_from_token;
  if (c.causal && names_sequence_classifier(cfg)) {
    read_hf_labels(cfg, c);
    w.cls_out = src.matrix("score.weight", c.n_embd, c.n_labels);
    w.output = Weight{};  // the classifier replaces the LM head
  }
  const bool qwen3_reranker = c.causal && is_qwen3_reranker(dir, cfg);
  if (!tokens.empty()) {
    // Refused for an encoder or a classifier, naming which.
    std::vector<int32_t> ids;
    for (const std::string& t : tokens) ids.push_back(hf_token_id(dir, t));
    bind_token_classifier(tokens, ids, dir, c, w, store);
  } else if (qwen3_reranker && c.n_labels == 0) {
    // As released: p("yes") against "no" at the last token.
    const int32_t yes = hf_token_id(dir, "yes"), no = hf_token_id(dir, "no");
    if (yes < 0 || no < 0) {
      cfg.fail(Errc::bad_format, "a Qwen3-Reranker scores the tokens \"yes\" and \"no\", and " + dir +
                                     "/tokenizer.json has no such token");
    }
    if (w.output.data == nullptr) cfg.fail(Errc::bad_format, "a Qwen3-Reranker needs its LM head (lm_head.weight)");
    bind_token_classifier({"no", "yes"}, {no, yes}, dir, c, w, store);
  }
  if (qwen3_reranker && tokens.empty()) c.rerank_template = std::string(kQwen3RerankTemplate);
  // Refused unless the model is now a causal classifier.
  apply_rerank_template(options, dir, c);
  return c.causal && c.n_labels > 0;
}

}  // namespace troupe

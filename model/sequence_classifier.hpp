// Sequence classifiers (*ForSequenceClassification) and rerankers: the
// labels a checkpoint declares, and the heads of causal models run as
// classifiers. An encoder's head (BERT, RoBERTa) is bound by its
// architecture (arch_bert.cpp); these are the decoder ones:
// - a *ForSequenceClassification of a causal LM (Qwen3, Llama, Qwen2, ...):
//   its `score` matrix over the last token's normed hidden state (reward
//   models, moderation classifiers, the "-seq-cls" Qwen3-Reranker
//   conversions);
// - Qwen3-Reranker as released, a causal LM whose relevance is the
//   probability of "yes" against "no" at the prompt's last token:
//   softmax([no, yes])[yes] = sigmoid(lm_head[yes] - lm_head[no] . h), so
//   one row of difference is a one-label head with a sigmoid score.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace troupe {

class HfConfig;
class HfWeights;
class WeightStore;
struct ModelConfig;
struct ModelLoadOptions;
struct ModelWeights;
struct Weight;

// The prompt Qwen3-Reranker's model card gives a (query, document) pair,
// with the card's default instruction: {query} and {document} are replaced
// by the texts (the form llama.cpp's converter writes as the GGUF's
// `tokenizer.chat_template.rerank`).
extern const std::string_view kQwen3RerankTemplate;

// A classifier's labels: config.json's id2label ({"0": "negative", ...}),
// else num_labels of them named LABEL_<i>; problem_type. Throws
// Error(bad_format) for a count out of 1..65536 or an unnamed label.
void read_hf_labels(const HfConfig& cfg, ModelConfig& c);

// Whether config.json's architectures name a *ForSequenceClassification class.
bool names_sequence_classifier(const HfConfig& cfg);

// Whether the directory holds a Qwen3-Reranker (as released, or converted
// to a classifier): its README's "# Qwen3-Reranker" heading, or the name in
// the directory's or config.json's _name_or_path, as llama.cpp's converter
// tells.
bool is_qwen3_reranker(const std::string& dir, const HfConfig& cfg);

// A token's id in the directory's tokenizer.json (its model's vocab, then
// its added tokens); -1 when it has none. Throws Error(bad_format) for an
// unreadable file.
int32_t hf_token_id(const std::string& dir, std::string_view token);

// One f32 row [1, head.n_in] in the store: head[row] - head[minus], or
// head[row] alone for minus -1 (any weight type dequantize_row reads).
// Throws Error(bad_format) for a row outside the head.
Weight token_score_row(const Weight& head, int64_t row, int64_t minus, WeightStore& store);

// A causal LM made a one-label reranker from its LM head's rows of
// `tokens` (ModelLoadOptions' classifier_from_token, or Qwen3-Reranker's
// "no", "yes"): ids are the tokens' ids (-1: not in the vocabulary), one or
// two. The head is one f32 row: head[ids[0]] for one, head[ids[1]] -
// head[ids[0]] for two; the label is the last token; the LM head is
// dropped. Throws Error(invalid_argument) naming `what` for a count other
// than 1 or 2, an unknown token, or a model that is already a classifier,
// an encoder, or has no LM head.
void bind_token_classifier(const std::vector<std::string>& tokens, const std::vector<int32_t>& ids,
                           const std::string& what, ModelConfig& c, ModelWeights& w, WeightStore& store);

// Sets c.rerank_template to the load options' template where one is given,
// after checking it holds {document}; throws Error(invalid_argument) naming
// `what` for one that does not, or for a template given to a model that is
// not a causal classifier.
void apply_rerank_template(const ModelLoadOptions& options, const std::string& what, ModelConfig& c);

// Binds the head of a causal model loaded from dir as a classifier, after
// its architecture has loaded the layers: `score.weight` [n_labels, n_embd]
// for a *ForSequenceClassification, the "yes" - "no" row of the LM head for
// a released Qwen3-Reranker, the rows the options' classifier_from_token
// names. Sets n_labels, labels and rerank_template (Qwen3-Reranker's, or
// the options'). Returns whether the model is now a causal classifier;
// options that do not apply (tokens for an encoder or a classifier, a
// template for a model that is no causal reranker) throw, naming why.
bool bind_hf_causal_classifier(const std::string& dir, const HfConfig& cfg, HfWeights& src,
                               const ModelLoadOptions& options, ModelConfig& c, ModelWeights& w, WeightStore& store);

}  // namespace troupe

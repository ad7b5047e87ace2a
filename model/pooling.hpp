// Embedding models: how a sequence's final hidden states become one vector
// (the pooling a model declares: sentence-transformers modules, GGUF's
// pooling_type), and the pooler that folds a sequence's rows into it as the
// rows arrive, chunk by chunk.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace troupe {

// none: the model generates (its rows are logits). last: the final token's
// hidden state (Qwen3-Embedding, gte-Qwen2, e5-mistral: causal models, whose
// last token has seen the whole input). mean: the average over every token.
// cls: the first token's ([CLS]) hidden state, for encoders (bge, gte),
// whose first token has seen the whole input too.
enum class Pooling : uint8_t { none, last, mean, cls };

const char* to_string(Pooling p);
// "last", "mean", "cls" (and "none"); nullopt for anything else.
std::optional<Pooling> parse_pooling(std::string_view name);

// What an embedding model declares of itself.
struct EmbeddingSpec {
  Pooling pooling = Pooling::none;
  bool normalize = true;  // L2-normalized vectors (sentence-transformers' Normalize module)
  // A cross-encoder's score: its classifier's logit through a sigmoid
  // (sentence-transformers' CrossEncoder default for one label), or as it
  // is (its activation_fn Identity).
  bool score_sigmoid = true;
};

// The sentence-transformers files of a Hugging Face directory (modules.json,
// the Pooling module's config.json, a Normalize module): pooling none when
// the directory has no modules.json. Throws Error(unsupported) for modules
// or poolings Troupe does not run (Dense projections, max or weighted-mean
// pooling, pooling without the prompt), Error(bad_format) for unreadable
// files. Whether the model can pool so (CLS needs an encoder) is checked
// where the model is known (check_model_pooling). A CrossEncoder's
// directory (a Transformer module alone, its config_sentence_transformers.json
// naming model_type CrossEncoder) gives pooling none and its activation_fn.
EmbeddingSpec read_sentence_transformers(const std::string& dir);

// GGUF's `<arch>.pooling_type` (llama.cpp's enum: 0 none, 1 mean, 2 cls,
// 3 last, 4 rank). Throws Error(unsupported) for rank (a reranker's; the
// BERT loader reads it with the classifier head), Error(bad_format) for
// other values.
Pooling gguf_pooling(uint32_t pooling_type, const std::string& file);

// Throws Error(unsupported) naming `what` when a model cannot pool so: CLS
// pooling of a causal model (its first token has seen only itself).
void check_model_pooling(Pooling pooling, bool causal, const std::string& what);

// Folds one sequence's final hidden rows [n_embd] into its embedding. Rows
// come in position order; a row at position 0 starts over (a sequence
// preempted and recomputed sends its rows again).
class EmbeddingPooler {
 public:
  // dims: the leading dimensions kept (Matryoshka truncation, OpenAI's
  // `dimensions`), 0: all; normalized after truncation.
  EmbeddingPooler(Pooling pooling, bool normalize, int32_t dims, int32_t n_prompt);

  // The row of the token at `pos`. True once the prompt's last position is in:
  // result() is then the embedding.
  bool add(std::span<const float> row, int32_t pos);
  std::vector<float> result() const;

 private:
  Pooling pooling_;
  bool normalize_;
  int32_t dims_;
  int32_t n_prompt_;
  int32_t n_rows_ = 0;
  std::vector<double> sum_;  // [n_embd] mean pooling's running sum (double: thousands of rows)
  std::vector<float> kept_;  // [n_embd] the row last or CLS pooling keeps
};

}  // namespace troupe

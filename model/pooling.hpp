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
enum class Pooling : uint8_t { none, last, mean };

const char* to_string(Pooling p);
// "last", "mean" (and "none"); nullopt for anything else.
std::optional<Pooling> parse_pooling(std::string_view name);

// What an embedding model declares of itself.
struct EmbeddingSpec {
  Pooling pooling = Pooling::none;
  bool normalize = true;  // L2-normalized vectors (sentence-transformers' Normalize module)
};

// The sentence-transformers files of a Hugging Face directory (modules.json,
// the Pooling module's config.json, a Normalize module): pooling none when
// the directory has no modules.json. Throws Error(unsupported) for modules
// or poolings Troupe does not run (Dense projections, CLS or max pooling,
// pooling without the prompt), Error(bad_format) for unreadable files.
EmbeddingSpec read_sentence_transformers(const std::string& dir);

// GGUF's `<arch>.pooling_type` (llama.cpp's enum: 0 none, 1 mean, 2 cls,
// 3 last, 4 rank). Throws Error(unsupported) for cls and rank, which need
// an encoder or a classifier head, Error(bad_format) for other values.
Pooling gguf_pooling(uint32_t pooling_type, const std::string& file);

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
  std::vector<float> last_;  // [n_embd] last pooling's row
};

}  // namespace troupe

// A loaded model: hyperparameters, host weights (used in place from the
// memory-mapped file: the persistent weight pool), and the tokenizer data the
// file carries. Immutable once loaded, so stages and actors share it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "model/model_config.hpp"
#include "tokenizer/vocab.hpp"

namespace troupe {

struct LayerWeights {
  const float* attn_norm = nullptr;  // [n_embd]
  const float* attn_norm_b = nullptr;  // [n_embd] (LayerNorm models)
  Weight wq;                         // [q_dim, n_embd]
  Weight wk;                         // [kv_dim, n_embd]
  Weight wv;                         // [kv_dim, n_embd]
  Weight wo;                         // [n_embd, q_dim]
  const float* bq = nullptr;         // [q_dim] (Qwen2 QKV bias)
  const float* bk = nullptr;         // [kv_dim]
  const float* bv = nullptr;         // [kv_dim]
  const float* ffn_norm = nullptr;   // [n_embd]
  Weight w_gate;                     // [n_ff, n_embd]
  Weight w_up;                       // [n_ff, n_embd]
  Weight w_down;                     // [n_embd, n_ff]
};

struct ModelWeights {
  Weight tok_embd;                      // [n_vocab, n_embd]
  const float* output_norm = nullptr;   // [n_embd]
  Weight output;                        // [n_vocab, n_embd] (== tok_embd when tied)
  std::vector<LayerWeights> layers;     // [n_layer]
};

class Model {
 public:
  virtual ~Model() = default;
  // Loads a GGUF file. Throws Error naming the file and the problem.
  static std::shared_ptr<const Model> load(const std::string& path);

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const VocabData& vocab() const { return vocab_; }
  const std::string& chat_template() const { return chat_template_; }
  const std::string& path() const { return path_; }
  // Bytes of weights one decode step reads (for roofline figures).
  int64_t weight_bytes() const { return weight_bytes_; }

 protected:
  ModelConfig config_;
  ModelWeights weights_;
  VocabData vocab_;
  std::string chat_template_;
  std::string path_;
  int64_t weight_bytes_ = 0;
};

}  // namespace troupe

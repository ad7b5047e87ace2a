// GGUF "nomic-bert" files (llama.cpp's converter of NomicBertModel:
// nomic-embed-text v1 and v1.5, the files Ollama's nomic-embed-text serves):
// the encoder of model/arch_nomic_bert.cpp under llama.cpp's names. The
// fused Wqkv is attn_qkv, fc11 ffn_up, fc12 ffn_gate, fc2 ffn_down; norm1
// and norm2 attn_output_norm and layer_output_norm. The converter writes
// the trained context (2048), not n_positions, and BERT's WordPiece
// vocabulary. "nomic-bert-moe" (v2's experts) is another architecture and
// is refused by name with the others.
#include <optional>
#include <string>

#include "model/gguf_model_impl.hpp"
#include "model/gguf_vocab.hpp"
#include "model/model_loaders.hpp"

namespace troupe::gguf_load {

void GgufModel::bind_nomic_bert(const ModelLoadOptions& options) {
  const std::string p = "nomic-bert.";
  ModelConfig& c = config_;
  read_encoder_sizes(p);
  c.arch = "nomic-bert";
  c.n_rot = c.head_dim;
  c.rope_layout = kernels::RopeLayout::neox;
  c.rope_theta = file_.get_f32(p + "rope.freq_base");
  if (!(c.rope_theta > 0.0f)) fail("rope.freq_base must be positive");
  const std::optional<uint32_t> pooling = bind_encoder_embeddings(p);
  const int64_t e = c.n_embd;
  ModelWeights& w = weights_;
  w.layers.assign(static_cast<size_t>(c.n_layer), LayerWeights{});
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    const Weight qkv = matrix(b + "attn_qkv.weight", e, 3 * e);  // rows: q, then k, then v
    l.wq = weight_rows(qkv, 0, e);
    l.wk = weight_rows(qkv, e, e);
    l.wv = weight_rows(qkv, 2 * e, e);
    l.wo = matrix(b + "attn_output.weight", e, e);
    l.attn_norm = vector(b + "attn_output_norm.weight", e);
    l.attn_norm_b = vector(b + "attn_output_norm.bias", e);
    l.w_up = matrix(b + "ffn_up.weight", e, c.n_ff);
    l.w_gate = matrix(b + "ffn_gate.weight", e, c.n_ff);
    l.w_down = matrix(b + "ffn_down.weight", c.n_ff, e);
    l.ffn_norm = vector(b + "layer_output_norm.weight", e);
    l.ffn_norm_b = vector(b + "layer_output_norm.bias", e);
    for (const char* bias : {"attn_qkv.bias", "attn_output.bias", "ffn_up.bias", "ffn_down.bias"}) {
      if (file_.find_tensor(b + bias) != nullptr) fail("tensor '" + b + bias + "': biases are not supported");
    }
  }
  bind_bert_classifier(pooling.has_value() && *pooling == kRankPooling);
  finish_encoder(options);
  if (vocab_.model != "bert" && vocab_.model != "t5") {
    fail("tokenizer.ggml.model '" + vocab_.model +
         "' for a nomic-bert model is not supported; supported: bert (WordPiece), t5 (XLM-RoBERTa's Unigram)");
  }
}

}  // namespace troupe::gguf_load

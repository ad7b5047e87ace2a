// GGUF "modern-bert" files (llama.cpp's converter of ModernBertModel and
// ModernBertForSequenceClassification): the encoder of
// model/arch_modernbert.cpp under llama.cpp's names. The fused Wqkv is
// attn_qkv and Wi is ffn_up (the GELU's input rows, then the gate's); the
// first layer has no attn_norm; the local layers' window is
// attention.sliding_window (ModernBERT's local_attention) and their RoPE
// base rope.freq_base_swa. A classifier holds cls (dense), cls.norm and
// cls.output. The vocabulary is byte-level BPE with [CLS] and [SEP] as BOS
// and EOS.
#include <optional>
#include <string>

#include "model/gguf_model_impl.hpp"
#include "model/gguf_vocab.hpp"
#include "model/model_loaders.hpp"
#include "model/pooling.hpp"
#include "model/sequence_classifier.hpp"
#include "model/weight_store.hpp"

namespace troupe::gguf_load {

void GgufModel::bind_modernbert(const ModelLoadOptions& options) {
  const std::string p = "modern-bert.";
  ModelConfig& c = config_;
  read_encoder_sizes(p);
  c.arch = "modernbert";
  c.n_rot = c.head_dim;
  c.rope_layout = kernels::RopeLayout::neox;
  c.rope_theta = file_.get_f32(p + "rope.freq_base");
  c.rope_local_theta = file_.find_f32(p + "rope.freq_base_swa").value_or(10000.0f);
  if (!(c.rope_theta > 0.0f) || !(c.rope_local_theta > 0.0f)) fail("the RoPE bases must be positive");
  const std::string act = file_.find_string(p + "hidden_activation").value_or("gelu");
  if (act != "gelu" && act != "silu") fail("hidden_activation '" + act + "' is not one of gelu, silu");
  c.glu_silu = act == "silu";
  // Layer i is global when i % pattern == 0; a local layer's token sees
  // local_attention / 2 positions either side (model/arch_modernbert.cpp).
  const uint32_t pattern = file_.find_u32(p + "attention.sliding_window_pattern").value_or(3);
  const uint32_t local = file_.get_u32(p + "attention.sliding_window");
  if (pattern == 0 || local < 2 || local > (1u << 30)) fail("sliding_window and its pattern are out of range");
  c.local_layers.assign(static_cast<size_t>(c.n_layer), 0);
  for (int64_t il = 0; il < c.n_layer; ++il) c.local_layers[static_cast<size_t>(il)] = il % pattern != 0;
  c.sliding_window = static_cast<int32_t>(local / 2 + 1);
  if (const std::optional<uint32_t> pooling = file_.find_u32(p + "pooling_type")) {
    c.embedding.pooling = gguf_pooling(*pooling, file_.path());
  }

  const gguf::TensorInfo& embd = file_.tensor("token_embd.weight");
  if (embd.shape.size() != 2) fail("tensor 'token_embd.weight' must have 2 dimensions");
  c.n_vocab = embd.shape[1];
  const int64_t e = c.n_embd;
  ModelWeights& w = weights_;
  w.tok_embd = matrix("token_embd.weight", e, c.n_vocab);
  w.embd_norm = vector("token_embd_norm.weight", e);
  w.embd_norm_b = vector("token_embd_norm.bias", e, /*required=*/false);
  w.layers.assign(static_cast<size_t>(c.n_layer), LayerWeights{});
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    if (il > 0) {
      l.attn_norm = vector(b + "attn_norm.weight", e);
      l.attn_norm_b = vector(b + "attn_norm.bias", e, /*required=*/false);
    }
    const Weight qkv = matrix(b + "attn_qkv.weight", e, 3 * e);
    l.wq = weight_rows(qkv, 0, e);
    l.wk = weight_rows(qkv, e, e);
    l.wv = weight_rows(qkv, 2 * e, e);
    l.wo = matrix(b + "attn_output.weight", e, e);
    l.ffn_norm = vector(b + "ffn_norm.weight", e);
    l.ffn_norm_b = vector(b + "ffn_norm.bias", e, /*required=*/false);
    const Weight up = matrix(b + "ffn_up.weight", e, 2 * c.n_ff);
    l.w_gate = weight_rows(up, 0, c.n_ff);
    l.w_up = weight_rows(up, c.n_ff, c.n_ff);
    l.w_down = matrix(b + "ffn_down.weight", c.n_ff, e);
    for (const char* bias : {"attn_qkv.bias", "attn_output.bias", "ffn_up.bias", "ffn_down.bias"}) {
      if (file_.find_tensor(b + bias) != nullptr) fail("tensor '" + b + bias + "': biases are not supported");
    }
  }
  w.output_norm = vector("output_norm.weight", e);
  w.output_norm_b = vector("output_norm.bias", e, /*required=*/false);

  // The classifier over the [CLS] row: dense, GELU, LayerNorm, then the labels.
  if (const gguf::TensorInfo* out = file_.find_tensor("cls.output.weight")) {
    constexpr uint32_t kCls = 2;  // llama.cpp's LLAMA_POOLING_TYPE_CLS
    if (file_.find_u32(p + "classifier.pooling_type").value_or(kCls) != kCls) {
      // Mean pooling runs from the HF directory (classifier_pooling "mean");
      // no GGUF of one has been checked against transformers here.
      fail("classifier.pooling_type other than cls (2) is not supported in a GGUF; the HF directory runs it");
    }
    c.labels = classifier_labels(p, *out);
    c.n_labels = static_cast<int32_t>(c.labels.size());
    c.cls_act = ModelConfig::ClassifierAct::gelu_norm;
    w.cls_dense = matrix("cls.weight", e, e);
    w.cls_dense_b = vector("cls.bias", e, /*required=*/false);
    w.cls_norm = vector("cls.norm.weight", e);
    w.cls_norm_b = vector("cls.norm.bias", e, /*required=*/false);
    w.cls_out = matrix("cls.output.weight", e, c.n_labels);
    w.cls_out_b = vector("cls.output.bias", c.n_labels, /*required=*/false);
  }
  finish_encoder(options);
  if (vocab_.model != "gpt2") {
    fail("tokenizer.ggml.model '" + vocab_.model + "' for a modern-bert model is not supported; supported: gpt2");
  }
}

}  // namespace troupe::gguf_load

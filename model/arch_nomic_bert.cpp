// NomicBERT (NomicBertModel, NomicBertForSequenceClassification): the
// encoder of nomic-embed-text v1 and v1.5. BERT's post-LN blocks
// (x = LayerNorm(x + attention(x)), x = LayerNorm(x + mlp(x))) and its
// token-type row and embedding LayerNorm, with rotary positions (rotate-half)
// in place of a position table, a fused Wqkv, a SwiGLU MLP (fc11 the up
// projection, fc12 the gate: fc2(silu(fc12 x) * fc11 x)) and no biases but
// the LayerNorms'.
//
// Two config spellings name the same network: nomic's own (GPT-2's n_embd,
// n_layer, n_head, n_inner, rotary_emb_base, max_trained_positions, read by
// its remote code; the files users download) and transformers' (hidden_size,
// rope_parameters ...). transformers saves the tensors under nomic's names.
// The classifier is BERT's: pooler dense + tanh over [CLS], then the labels.
#include <string>
#include <string_view>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"
#include "model/model_loaders.hpp"
#include "model/sequence_classifier.hpp"

namespace troupe {
namespace {

// nomic's config.json: what its remote code would compute differently from
// the network above is refused by the key that says so.
void read_nomic_spelling(const HfConfig& cfg, ModelConfig& c) {
  read_gpt2_sizes(cfg, c);
  // v1 and v1.5 say n_positions 8192 but are trained for 2048 (llama.cpp
  // serves 2048 too); past it their remote code would scale RoPE.
  c.n_ctx_train = cfg.get_int("max_trained_positions", cfg.get_int("n_positions", 2048));
  if (c.n_ctx_train <= 0) cfg.fail(Errc::bad_format, "max_trained_positions must be positive");
  c.rope_theta = static_cast<float>(cfg.get_float("rotary_emb_base", 10000.0));
  if (!(c.rope_theta > 0.0f)) cfg.fail(Errc::bad_format, "rotary_emb_base must be positive");
  c.n_rot = c.head_dim;

  const std::string act = cfg.get_string("activation_function", "swiglu");
  if (act != "swiglu") {
    cfg.fail(Errc::unsupported, "activation_function '" + act + "' is not supported; supported: swiglu");
  }
  if (cfg.get_int("moe_every_n_layers", 0) != 0) {
    cfg.fail(Errc::unsupported, "moe_every_n_layers (nomic-embed-text-v2-moe's experts) is not supported");
  }
  for (const char* key : {"prenorm", "causal", "qkv_proj_bias", "mlp_fc1_bias", "mlp_fc2_bias", "use_rms_norm",
                          "parallel_block", "rotary_emb_interleaved"}) {
    if (cfg.get_bool(key, false)) cfg.fail(Errc::unsupported, std::string(key) + " true is not supported");
  }
  if (cfg.get_float("rotary_emb_fraction", 1.0) != 1.0) {
    cfg.fail(Errc::unsupported, "rotary_emb_fraction other than 1.0 is not supported");
  }
  for (const char* key : {"rotary_scaling_factor", "rotary_emb_scale_base"}) {
    if (cfg.has(key)) cfg.fail(Errc::unsupported, std::string(key) + " (a scaled RoPE) is not supported");
  }
}

// transformers' NomicBertConfig: BERT's size names, rope_parameters (a base
// of 1000 where none is written), the MLP's activation in hidden_act.
void read_transformers_spelling(const HfConfig& cfg, ModelConfig& c) {
  read_encoder_sizes(cfg, c);
  if (cfg.has("head_dim") && cfg.get_int("head_dim") != c.head_dim) {
    cfg.fail(Errc::unsupported, "head_dim other than hidden_size / num_attention_heads is not supported");
  }
  c.norm_eps = static_cast<float>(cfg.get_float("layer_norm_eps", 1e-12));
  read_rope_config(cfg, c);
  if (!cfg.has("rope_parameters") && !cfg.has("rope_theta")) c.rope_theta = 1000.0f;
  const std::string act = cfg.get_string("hidden_act", "silu");
  if (act != "silu") cfg.fail(Errc::unsupported, "hidden_act '" + act + "' is not supported; supported: silu");
}

void read_nomic_bert_config(const HfConfig& cfg, ModelConfig& c) {
  c.arch = "nomic-bert";
  c.causal = false;
  c.tied_output = false;
  if (cfg.has("n_embd")) {
    read_nomic_spelling(cfg, c);
  } else {
    read_transformers_spelling(cfg, c);
  }
  c.rope_layout = kernels::RopeLayout::neox;
  c.n_token_types = static_cast<int32_t>(cfg.get_int("type_vocab_size", 2));
  if (c.n_token_types < 1) cfg.fail(Errc::bad_format, "type_vocab_size must be at least 1");
  check_config(cfg, c);
}

void load_nomic_bert(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  read_nomic_bert_config(cfg, c);
  const int64_t e = c.n_embd;
  // The task classes nest the encoder under "nomic_bert.".
  const std::string p = src.has("nomic_bert.embeddings.word_embeddings.weight") ? "nomic_bert." : "";
  w.tok_embd = src.matrix(p + "embeddings.word_embeddings.weight", e, c.n_vocab);
  w.type_embd = src.vector_rows(p + "embeddings.token_type_embeddings.weight", c.n_token_types, e);
  w.embd_norm = src.vector(p + "emb_ln.weight", e);
  w.embd_norm_b = src.vector(p + "emb_ln.bias", e);
  w.layers.assign(static_cast<size_t>(c.n_layer), LayerWeights{});
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string b = p + "encoder.layers." + std::to_string(il) + ".";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    const Weight qkv = src.matrix(b + "attn.Wqkv.weight", e, 3 * e);  // rows: q, then k, then v
    l.wq = weight_rows(qkv, 0, e);
    l.wk = weight_rows(qkv, e, e);
    l.wv = weight_rows(qkv, 2 * e, e);
    l.wo = src.matrix(b + "attn.out_proj.weight", e, e);
    l.attn_norm = src.vector(b + "norm1.weight", e);
    l.attn_norm_b = src.vector(b + "norm1.bias", e);
    l.w_up = src.matrix(b + "mlp.fc11.weight", e, c.n_ff);
    l.w_gate = src.matrix(b + "mlp.fc12.weight", e, c.n_ff);
    l.w_down = src.matrix(b + "mlp.fc2.weight", c.n_ff, e);
    l.ffn_norm = src.vector(b + "norm2.weight", e);
    l.ffn_norm_b = src.vector(b + "norm2.bias", e);
  }
  if (!names_sequence_classifier(cfg)) return;
  read_hf_labels(cfg, c);
  w.cls_dense = src.matrix(p + "pooler.dense.weight", e, e);
  w.cls_dense_b = src.vector(p + "pooler.dense.bias", e);
  w.cls_out = src.matrix("classifier.weight", e, c.n_labels);
  w.cls_out_b = src.vector("classifier.bias", c.n_labels);
}

void nomic_bert_layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::post_layer_norm_attention_block(ctx, il, kv, x);
  layers::post_layer_norm_swiglu_block(ctx, il, x);
}

}  // namespace

const Architecture arch::nomic_bert{.name = "nomic-bert",
                                    .hf_class = "NomicBertModel",
                                    .hf_class_also = "NomicBertForSequenceClassification",
                                    .load_hf = load_nomic_bert,
                                    .embed = layers::embed_encoder_tokens,
                                    .layer = nomic_bert_layer,
                                    .output_norm = layers::no_output_norm};

}  // namespace troupe

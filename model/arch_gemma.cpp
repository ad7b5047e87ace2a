// Gemma 2 and Gemma 3 (Gemma2ForCausalLM, Gemma3ForCausalLM, and GGUF
// "gemma2" / "gemma3" files). Gemma 3 against Llama: token embeddings times sqrt(hidden_size);
// RMSNorms that scale by (1 + w), on both sides of attention and of the MLP
// (the "sandwich"); per-head q/k RMSNorms; a GeGLU MLP with the tanh GELU;
// QK^T scaled by query_pre_attn_scalar^-0.5; and two kinds of layers: local
// ones (sliding_window, RoPE base 10000, unscaled) and, every sixth in the
// published models, global ones (full attention, rope_theta and its linear
// scaling). Checkpoints store w for (1 + w); GGUF files store 1 + w.
// Gemma 3 4B-27B are published as Gemma3ForConditionalGeneration: the same
// text model under language_model.model.*, its config in "text_config";
// this loads that text model (the vision tower is not read).
// Gemma 2 is the same layer without q/k norms, with one RoPE for both kinds
// of layers (every other one local), and with soft-capping of the attention
// scores and of the logits (c * tanh(x / c)).
#include <cmath>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"

namespace troupe {
namespace {

using Json = nlohmann::json;

// The text model's config and tensor prefix: the file itself, or for a
// multimodal checkpoint its "text_config" (tie_word_embeddings may sit at the
// top level there).
struct TextModel {
  HfConfig cfg;
  std::string prefix;  // of the decoder's tensors: "model." or "language_model.model."
  std::string head;    // the untied output projection
};

TextModel text_model(const HfConfig& cfg) {
  if (!cfg.has("text_config")) return {cfg, "model.", "lm_head.weight"};
  Json text = cfg.json()["text_config"];
  if (!text.is_object()) cfg.fail(Errc::bad_format, "'text_config' is not an object");
  if (!text.contains("tie_word_embeddings") && cfg.has("tie_word_embeddings")) {
    text["tie_word_embeddings"] = cfg.json()["tie_word_embeddings"];
  }
  return {HfConfig(std::move(text), cfg.path() + " (text_config)"), "language_model.model.",
          "language_model.lm_head.weight"};
}

// Soft-capping of the attention scores and of the logits: null or absent
// is off (Gemma 3), Gemma 2 sets both.
float read_softcap(const HfConfig& cfg, const char* key) {
  const double cap = cfg.get_float(key, 0.0);
  if (!(cap >= 0.0) || !std::isfinite(cap)) cfg.fail(Errc::bad_format, std::string(key) + " must be positive");
  return static_cast<float>(cap);
}

void load_gemma(const HfConfig& file_cfg, HfWeights& src, ModelConfig& c, ModelWeights& w, int version) {
  const TextModel tm = version == 3 ? text_model(file_cfg) : TextModel{file_cfg, "model.", "lm_head.weight"};
  const HfConfig& cfg = tm.cfg;
  c.arch = version == 3 ? "gemma3" : "gemma2";
  read_decoder_sizes(cfg, c);
  c.tied_output = cfg.get_bool("tie_word_embeddings", true);  // Gemma3TextConfig's default
  const std::string act = cfg.get_string("hidden_activation", cfg.get_string("hidden_act", "gelu_pytorch_tanh"));
  if (act != "gelu_pytorch_tanh") {
    cfg.fail(Errc::unsupported, "hidden_activation '" + act + "' is not supported; supported: gelu_pytorch_tanh");
  }
  c.attn_softcap = read_softcap(cfg, "attn_logit_softcapping");
  c.final_softcap = read_softcap(cfg, "final_logit_softcapping");
  if (cfg.get_bool("use_bidirectional_attention", false)) {
    cfg.fail(Errc::unsupported, "use_bidirectional_attention is not supported");
  }
  if (cfg.get_bool("attention_bias", false)) cfg.fail(Errc::unsupported, "attention_bias is not supported");
  read_layer_kinds(cfg, c, version == 3 ? 6 : 2);
  if (version == 3) {
    read_layer_kind_rope(cfg, c, cfg.get_float("rope_local_base_freq", 10000.0));
  } else {
    // One rotary embedding for both kinds of layers: the local ones take the
    // same base, and a scaling (which ModelConfig keeps for global layers
    // only) is refused.
    read_rope_config(cfg, c);
    if (c.rope_freq_scale != 1.0f || !c.rope_freq_factors.empty()) {
      cfg.fail(Errc::unsupported, "Gemma 2 with RoPE scaling is not supported");
    }
    c.rope_local_theta = c.rope_theta;
  }
  const double scalar = cfg.get_float("query_pre_attn_scalar", static_cast<double>(c.head_dim));
  if (!(scalar > 0.0)) cfg.fail(Errc::bad_format, "query_pre_attn_scalar must be positive");
  c.attn_scale = static_cast<float>(std::pow(scalar, -0.5));
  c.embed_scale = static_cast<float>(std::sqrt(static_cast<double>(c.n_embd)));
  check_config(cfg, c);

  w.tok_embd = src.matrix(tm.prefix + "embed_tokens.weight", c.n_embd, c.n_vocab);
  w.output_norm = src.vector_plus_one(tm.prefix + "norm.weight", c.n_embd);
  w.output = c.tied_output ? w.tok_embd : src.matrix(tm.head, c.n_embd, c.n_vocab);
  w.layers.assign(static_cast<size_t>(c.n_layer), LayerWeights{});
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string p = tm.prefix + "layers." + std::to_string(il) + ".";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    l.attn_norm = src.vector_plus_one(p + "input_layernorm.weight", c.n_embd);
    l.wq = src.matrix(p + "self_attn.q_proj.weight", c.n_embd, c.q_dim());
    l.wk = src.matrix(p + "self_attn.k_proj.weight", c.n_embd, c.kv_dim());
    l.wv = src.matrix(p + "self_attn.v_proj.weight", c.n_embd, c.kv_dim());
    l.wo = src.matrix(p + "self_attn.o_proj.weight", c.q_dim(), c.n_embd);
    if (version == 3) {
      l.q_norm = src.vector_plus_one(p + "self_attn.q_norm.weight", c.head_dim);
      l.k_norm = src.vector_plus_one(p + "self_attn.k_norm.weight", c.head_dim);
    }
    l.attn_post_norm = src.vector_plus_one(p + "post_attention_layernorm.weight", c.n_embd);
    l.ffn_norm = src.vector_plus_one(p + "pre_feedforward_layernorm.weight", c.n_embd);
    l.ffn_post_norm = src.vector_plus_one(p + "post_feedforward_layernorm.weight", c.n_embd);
    l.w_gate = src.matrix(p + "mlp.gate_proj.weight", c.n_embd, c.n_ff);
    l.w_up = src.matrix(p + "mlp.up_proj.weight", c.n_embd, c.n_ff);
    l.w_down = src.matrix(p + "mlp.down_proj.weight", c.n_ff, c.n_embd);
  }
}

void load_gemma2(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  load_gemma(cfg, src, c, w, 2);
}

void load_gemma3(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  load_gemma(cfg, src, c, w, 3);
}

void gemma_layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  // The layer's window, RoPE, q/k norms (Gemma 3) and score cap (Gemma 2).
  layers::sandwich_attention_block(ctx, il, kv, x);
  layers::sandwich_geglu_block(ctx, il, x);
}

}  // namespace

const Architecture arch::gemma2{.name = "gemma2",
                                .hf_class = "Gemma2ForCausalLM",
                                .load_hf = load_gemma2,
                                .embed = layers::embed_tokens,
                                .layer = gemma_layer,
                                .output_norm = arch::rms_output_norm};

const Architecture arch::gemma3{.name = "gemma3",
                                .hf_class = "Gemma3ForCausalLM",
                                .hf_class_also = "Gemma3ForConditionalGeneration",
                                .load_hf = load_gemma3,
                                .embed = layers::embed_tokens,
                                .layer = gemma_layer,
                                .output_norm = arch::rms_output_norm};

}  // namespace troupe

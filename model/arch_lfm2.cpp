// LFM2 (Lfm2ForCausalLM, and GGUF "lfm2" files: LFM2-350M, -700M, -1.2B,
// -2.6B, LFM2.5 and their fine-tunes; Lfm2MoeForCausalLM and GGUF "lfm2moe":
// LFM2-8B-A1B): a hybrid of short-convolution layers (most of
// them) and grouped-query attention layers with per-head q/k RMSNorms, each
// followed by a SwiGLU FFN, pre-norm throughout. A conv layer is
// x += out_proj(C * conv(B * x)), B, C and x from one in_proj, conv a
// depthwise causal convolution of conv_L_cache taps (layers_conv.cpp).
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"

namespace troupe {
namespace {

using Json = nlohmann::json;

// The FFN width as Lfm2MLP derives it: with block_auto_adjust_ff_dim, 2/3 of
// the configured width, times block_ffn_dim_multiplier, rounded up to a
// multiple of block_multiple_of.
int64_t lfm2_ffn_width(const HfConfig& cfg) {
  // Published configs name it block_ff_dim; transformers reads that first.
  int64_t ff = cfg.has("block_ff_dim") ? cfg.get_int("block_ff_dim") : cfg.get_int("intermediate_size");
  if (!cfg.get_bool("block_auto_adjust_ff_dim", true)) return ff;
  ff = 2 * ff / 3;
  if (cfg.has("block_ffn_dim_multiplier") && !cfg.json()["block_ffn_dim_multiplier"].is_null()) {
    const int64_t multiple = cfg.get_int("block_multiple_of", 256);
    if (multiple <= 0) cfg.fail(Errc::bad_format, "block_multiple_of must be positive");
    ff = static_cast<int64_t>(cfg.get_float("block_ffn_dim_multiplier") * static_cast<double>(ff));
    ff = multiple * ((ff + multiple - 1) / multiple);
  }
  return ff;
}

// layer_types ("conv" / "full_attention"), else full_attn_idxs, else every
// layer attends (as Lfm2Config fills them in).
void read_lfm2_layers(const HfConfig& cfg, ModelConfig& c) {
  c.conv_layers.assign(static_cast<size_t>(c.n_layer), 0);
  if (cfg.has("layer_types") && !cfg.json()["layer_types"].is_null()) {
    const std::vector<std::string> types = read_layer_types(cfg, c.n_layer, {"conv", "full_attention"});
    for (size_t i = 0; i < types.size(); ++i) c.conv_layers[i] = types[i] == "conv" ? 1 : 0;
  } else if (cfg.has("full_attn_idxs") && !cfg.json()["full_attn_idxs"].is_null()) {
    const Json& idxs = cfg.json()["full_attn_idxs"];
    if (!idxs.is_array()) cfg.fail(Errc::bad_format, "full_attn_idxs must be a list of layer indices");
    c.conv_layers.assign(static_cast<size_t>(c.n_layer), 1);
    for (const Json& i : idxs) {
      if (!i.is_number_integer() || i.get<int64_t>() < 0 || i.get<int64_t>() >= c.n_layer) {
        cfg.fail(Errc::bad_format, "full_attn_idxs holds an index outside [0, num_hidden_layers)");
      }
      c.conv_layers[static_cast<size_t>(i.get<int64_t>())] = 0;
    }
  }
}

// What LFM2 and LFM2-MoE share: the sizes, norms and RoPE, the layer kinds
// and the convolution's taps (c.n_ff is left to the caller).
void read_lfm2_config(const HfConfig& cfg, ModelConfig& c) {
  c.n_vocab = cfg.get_int("vocab_size");
  c.n_embd = cfg.get_int("hidden_size");
  c.n_layer = cfg.get_int("num_hidden_layers");
  c.n_head = cfg.get_int("num_attention_heads");
  c.n_head_kv = cfg.get_int("num_key_value_heads", c.n_head);
  if (c.n_head <= 0 || c.n_embd % c.n_head != 0) {
    cfg.fail(Errc::bad_format, "hidden_size must be a positive multiple of num_attention_heads");
  }
  c.head_dim = cfg.get_int("head_dim", c.n_embd / c.n_head);
  c.norm_eps = static_cast<float>(cfg.get_float("norm_eps", 1e-5));
  c.n_ctx_train = cfg.get_int("max_position_embeddings", 0);
  // Published configs say tie_embedding; transformers reads it first.
  c.tied_output = cfg.get_bool("tie_embedding", cfg.get_bool("tie_word_embeddings", true));
  read_rope_config(cfg, c);
  const bool theta_given = cfg.has("rope_theta") ||
                           (cfg.has("rope_parameters") && cfg.json()["rope_parameters"].is_object() &&
                            cfg.json()["rope_parameters"].contains("rope_theta"));
  if (!theta_given) c.rope_theta = 1000000.0f;  // Lfm2Config's default
  check_config(cfg, c);
  read_lfm2_layers(cfg, c);
  c.conv_kernel = cfg.get_int("conv_L_cache", 3);
  if (c.conv_kernel < 1 || c.conv_kernel > 64) cfg.fail(Errc::bad_format, "conv_L_cache must be in [1, 64]");
}

// The ends of the model and each layer's operator: model.embedding_norm is
// the final norm, despite its name.
void bind_lfm2_operators(const HfConfig& cfg, HfWeights& src, const ModelConfig& c, ModelWeights& w) {
  const int64_t e = c.n_embd;
  const bool conv_bias = cfg.get_bool("conv_bias", false);
  w.tok_embd = src.matrix("model.embed_tokens.weight", e, c.n_vocab);
  w.output_norm = src.vector("model.embedding_norm.weight", e);
  w.output = c.tied_output ? w.tok_embd : src.matrix("lm_head.weight", e, c.n_vocab);
  w.layers.assign(static_cast<size_t>(c.n_layer), LayerWeights{});
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + ".";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    l.attn_norm = src.vector(p + "operator_norm.weight", e);
    l.ffn_norm = src.vector(p + "ffn_norm.weight", e);
    if (c.is_conv(il)) {
      l.conv_in = src.matrix(p + "conv.in_proj.weight", e, 3 * e);
      const safetensors::TensorInfo& k = src.expect(p + "conv.conv.weight", {e, 1, c.conv_kernel});
      l.conv_w = store_f32(src.store(), *k.type, k.data, e * c.conv_kernel);  // [n_embd, taps]
      l.wo = src.matrix(p + "conv.out_proj.weight", e, e);
      if (conv_bias) {
        l.conv_in_b = src.vector(p + "conv.in_proj.bias", 3 * e);
        l.conv_b = src.vector(p + "conv.conv.bias", e);
        l.bo = src.vector(p + "conv.out_proj.bias", e);
      }
    } else {
      l.wq = src.matrix(p + "self_attn.q_proj.weight", e, c.q_dim());
      l.wk = src.matrix(p + "self_attn.k_proj.weight", e, c.kv_dim());
      l.wv = src.matrix(p + "self_attn.v_proj.weight", e, c.kv_dim());
      l.wo = src.matrix(p + "self_attn.out_proj.weight", c.q_dim(), e);
      l.q_norm = src.vector(p + "self_attn.q_layernorm.weight", c.head_dim);
      l.k_norm = src.vector(p + "self_attn.k_layernorm.weight", c.head_dim);
    }
  }
}

void load_lfm2(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "lfm2";
  c.n_ff = lfm2_ffn_width(cfg);  // bounded with the other sizes by check_config
  read_lfm2_config(cfg, c);
  bind_lfm2_operators(cfg, src, c, w);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + ".feed_forward.";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    l.w_gate = src.matrix(p + "w1.weight", c.n_embd, c.n_ff);
    l.w_up = src.matrix(p + "w3.weight", c.n_embd, c.n_ff);
    l.w_down = src.matrix(p + "w2.weight", c.n_ff, c.n_embd);
  }
}

// LFM2-MoE (LFM2-8B-A1B): the first num_dense_layers have a dense FFN of
// intermediate_size, the others experts of moe_intermediate_size, routed by
// sigmoid scores chosen with expert_bias (use_expert_bias), renormalized
// (norm_topk_prob, over the sum + 1e-6) and scaled by routed_scaling_factor.
void load_lfm2_moe(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "lfm2moe";
  c.n_ff = cfg.get_int("moe_intermediate_size");  // bounded with the other sizes by check_config
  read_lfm2_config(cfg, c);
  c.n_ff_dense = cfg.get_int("intermediate_size");
  c.n_expert = cfg.get_int("num_experts");
  c.n_expert_used = cfg.get_int("num_experts_per_tok");
  const int64_t n_dense = cfg.get_int("num_dense_layers", 2);
  constexpr int64_t kMaxDenseWidth = int64_t{1} << 20, kMaxExperts = int64_t{1} << 16;
  if (c.n_ff_dense <= 0 || c.n_ff_dense > kMaxDenseWidth || c.n_expert <= 0 || c.n_expert > kMaxExperts ||
      c.n_expert_used <= 0 || c.n_expert_used > c.n_expert || n_dense < 0 || n_dense > c.n_layer) {
    cfg.fail(Errc::bad_format, "moe_intermediate_size, intermediate_size, num_experts, num_experts_per_tok (at most "
                               "num_experts) and num_dense_layers (at most num_hidden_layers) are out of range");
  }
  c.expert_router = ModelConfig::ExpertRouter::deepseek_sigmoid;
  c.expert_weights_norm = cfg.get_bool("norm_topk_prob", true);
  c.expert_weights_norm_eps = 1e-6f;
  c.expert_weights_scale = static_cast<float>(cfg.get_float("routed_scaling_factor", 1.0));
  if (!(c.expert_weights_scale > 0.0f)) cfg.fail(Errc::bad_format, "routed_scaling_factor must be positive");
  const bool use_bias = cfg.get_bool("use_expert_bias", true);
  bind_lfm2_operators(cfg, src, c, w);
  bind_experts(src, c, {.block = "feed_forward.", .gate = "w1", .up = "w3", .down = "w2"}, w, n_dense);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + ".feed_forward.";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    if (il >= n_dense) {
      if (use_bias) l.expert_score_bias = src.vector(p + "expert_bias", c.n_expert);  // host: the routing reads it there
      continue;
    }
    l.w_gate = src.matrix(p + "w1.weight", c.n_embd, c.n_ff_dense);
    l.w_up = src.matrix(p + "w3.weight", c.n_embd, c.n_ff_dense);
    l.w_down = src.matrix(p + "w2.weight", c.n_ff_dense, c.n_embd);
  }
}

void lfm2_layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  if (ctx.config.is_conv(il)) {
    layers::short_conv_block(ctx, il, kv, x);
  } else {
    layers::attention_block(ctx, il, kv, x, layers::Norm::rms, /*rope=*/true);
  }
  layers::dense_or_moe_block(ctx, il, x);  // LFM2's dense FFN, or LFM2-MoE's experts where the layer has them
}

}  // namespace

const Architecture arch::lfm2{.name = "lfm2",
                              .hf_class = "Lfm2ForCausalLM",
                              .load_hf = load_lfm2,
                              .embed = layers::embed_tokens,
                              .layer = lfm2_layer,
                              .output_norm = arch::rms_output_norm};
const Architecture arch::lfm2moe{.name = "lfm2moe",
                                 .hf_class = "Lfm2MoeForCausalLM",
                                 .load_hf = load_lfm2_moe,
                                 .embed = layers::embed_tokens,
                                 .layer = lfm2_layer,
                                 .output_norm = arch::rms_output_norm};

}  // namespace troupe

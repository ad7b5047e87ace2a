// Granite (GraniteForCausalLM, and GGUF "granite" files: IBM Granite 3.x
// dense models): the Llama layer with four scalars from the config: token
// embeddings times embedding_multiplier, QK^T times attention_multiplier
// (not 1/sqrt(head_dim)), each block's output times residual_multiplier
// before the residual add, and the logits divided by logits_scaling.
// GraniteMoE (GraniteMoeForCausalLM, and GGUF "granitemoe" files: Granite
// 3.x 1B-A400M and 3B-A800M) is the same layer with Mixtral's experts
// (softmax over the top k router logits), stored fused in nn.Linear's layout
// (block_sparse_moe.input_linear [experts, 2 ffn, hidden], gate then up, and
// output_linear), or under transformers 5's names for the same.
// Granite 4.0-H (GraniteMoeHybridForCausalLM, and GGUF "granitehybrid"
// files: Granite 4.0-H-Micro, -Tiny, -Small): Mamba-2 layers
// (layers_mamba.cpp, a state per sequence) with an attention layer every
// few, without RoPE unless position_embedding_type says "rope", each layer's
// FFN GraniteMoE's experts beside an ungated shared MLP (or the shared MLP
// alone), and Granite's scales.
#include <cmath>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"
#include "model/model_loaders.hpp"

namespace troupe {
namespace {

using Json = nlohmann::json;

float positive(const HfConfig& cfg, const char* key, double fallback) {
  const double v = cfg.get_float(key, fallback);
  if (!(v > 0.0)) cfg.fail(Errc::bad_format, std::string(key) + " must be positive");
  return static_cast<float>(v);
}

void read_scales(const HfConfig& cfg, ModelConfig& c) {
  c.embed_scale = positive(cfg, "embedding_multiplier", 1.0);
  c.residual_scale = positive(cfg, "residual_multiplier", 1.0);
  c.attn_scale = positive(cfg, "attention_multiplier", 1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  c.logit_scale = positive(cfg, "logits_scaling", 1.0);
}

void load_granite(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "granite";
  read_llama_config(cfg, c);
  check_config(cfg, c);
  read_scales(cfg, c);
  const bool bias = cfg.get_bool("attention_bias", false);
  bind_llama_weights(src, c, {.qkv_bias = bias, .o_bias = bias}, w);
}

// GraniteMoE's router and fused experts under block_sparse_moe. (p): the
// published names (router.layer, input_linear, output_linear) or transformers 5's.
void bind_granite_experts(HfWeights& src, const std::string& p, const ModelConfig& c, LayerWeights& l) {
  const bool published = src.has(p + "input_linear.weight");
  l.ffn_router = src.matrix(p + (published ? "router.layer.weight" : "router.weight"), c.n_embd, c.n_expert);
  bind_fused_experts(src, c, p + (published ? "input_linear.weight" : "experts.gate_up_proj"),
                     p + (published ? "output_linear.weight" : "experts.down_proj"), /*interleaved=*/false, l);
}

void load_granite_moe(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "granitemoe";
  read_llama_config(cfg, c);
  c.n_expert = cfg.get_int("num_local_experts");
  c.n_expert_used = cfg.get_int("num_experts_per_tok");
  if (c.n_expert <= 0 || c.n_expert > (int64_t{1} << 16) || c.n_expert_used <= 0 || c.n_expert_used > c.n_expert) {
    cfg.fail(Errc::bad_format, "num_experts_per_tok must be in 1..num_local_experts");
  }
  check_config(cfg, c);
  read_scales(cfg, c);
  const bool bias = cfg.get_bool("attention_bias", false);
  bind_llama_weights(src, c, {.qkv_bias = bias, .o_bias = bias, .dense_ffn = false}, w);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    bind_granite_experts(src, "model.layers." + std::to_string(il) + ".block_sparse_moe.", c,
                         w.layers[static_cast<size_t>(il)]);
  }
}

// time_step_limit clamps dt in transformers' chunked scan only (its decode
// step does not); every published config leaves it at (0, inf), written
// [0.0, {"__float__": "Infinity"}] by transformers 5. Other limits are refused.
void check_time_step_limit(const HfConfig& cfg) {
  if (!cfg.has("time_step_limit") || cfg.json()["time_step_limit"].is_null()) return;
  const Json& l = cfg.json()["time_step_limit"];
  auto infinite = [](const Json& v) {
    if (v.is_object() && v.contains("__float__") && v["__float__"].is_string()) {
      return v["__float__"].get<std::string>() == "Infinity";
    }
    return v.is_number() && v.get<double>() > 1e30;
  };
  if (!l.is_array() || l.size() != 2 || !l[0].is_number() || l[0].get<double>() != 0.0 || !infinite(l[1])) {
    cfg.fail(Errc::unsupported, "time_step_limit other than (0, inf) is not supported");
  }
}

// Mamba-2's shape (mamba_* keys, as GraniteMoeHybridConfig reads them) and
// which layers are Mamba-2 (layer_types: "mamba" / "attention", or
// transformers 5's "linear_attention" / "full_attention"; absent: all).
void read_mamba2(const HfConfig& cfg, ModelConfig& c) {
  c.recurrent_kind = ModelConfig::RecurrentKind::mamba2;
  const int64_t inner = cfg.get_int("mamba_expand", 2) * c.n_embd;
  c.ssm_heads = cfg.get_int("mamba_n_heads", 128);
  c.ssm_groups = cfg.get_int("mamba_n_groups", 1);
  c.ssm_state = cfg.get_int("mamba_d_state", 256);
  c.conv_kernel = cfg.get_int("mamba_d_conv", 4);
  if (c.ssm_heads <= 0 || inner <= 0 || inner % c.ssm_heads != 0) {
    cfg.fail(Errc::bad_format, "mamba_n_heads must divide mamba_expand * hidden_size");
  }
  const Json& dh = cfg.has("mamba_d_head") ? cfg.json()["mamba_d_head"] : Json("auto");
  c.ssm_head_dim = dh.is_string() && dh.get<std::string>() == "auto" ? inner / c.ssm_heads
                   : dh.is_number_integer()                         ? dh.get<int64_t>()
                                                                    : 0;
  if (c.ssm_head_dim * c.ssm_heads != inner || c.ssm_head_dim > 1024) {
    cfg.fail(Errc::bad_format, "mamba_d_head times mamba_n_heads must be mamba_expand * hidden_size (heads of at most "
                               "1024)");
  }
  if (c.ssm_groups <= 0 || c.ssm_heads % c.ssm_groups != 0) {
    cfg.fail(Errc::bad_format, "mamba_n_groups must divide mamba_n_heads");
  }
  if (c.ssm_state <= 0 || c.ssm_state > 4096) cfg.fail(Errc::bad_format, "mamba_d_state must be in [1, 4096]");
  if (c.conv_kernel < 1 || c.conv_kernel > 16) cfg.fail(Errc::bad_format, "mamba_d_conv must be in [1, 16]");
  if (cfg.get_bool("mamba_proj_bias", false)) cfg.fail(Errc::unsupported, "mamba_proj_bias is not supported");
  check_time_step_limit(cfg);
  c.recurrent_layers.assign(static_cast<size_t>(c.n_layer), 1);
  const std::vector<std::string> types =
      read_layer_types(cfg, c.n_layer, {"mamba", "attention", "linear_attention", "full_attention"});
  for (size_t i = 0; i < types.size(); ++i) {
    c.recurrent_layers[i] = types[i] == "mamba" || types[i] == "linear_attention" ? 1 : 0;
  }
}

void bind_mamba2(HfWeights& src, const std::string& p, const ModelConfig& c, bool conv_bias, LayerWeights& l) {
  const kernels::Mamba2Shape g = c.mamba2_shape();
  const int64_t h = g.n_heads;
  l.ssm_in = src.matrix(p + "in_proj.weight", c.n_embd, g.proj_width());
  const safetensors::TensorInfo& k = src.expect(p + "conv1d.weight", {g.conv_dim(), 1, g.taps});
  l.ssm_conv = store_f32(src.store(), *k.type, k.data, g.conv_dim() * g.taps);
  if (conv_bias) l.ssm_conv_b = src.vector(p + "conv1d.bias", g.conv_dim());
  l.ssm_dt_bias = src.vector(p + "dt_bias", h);
  const float* a_log = src.vector(p + "A_log", h);
  float* a = src.store().floats(h);
  for (int64_t i = 0; i < h; ++i) a[i] = -std::exp(a_log[i]);
  l.ssm_a = a;
  l.ssm_d = src.vector(p + "D", h);
  l.ssm_norm = src.vector(p + "norm.weight", g.inner());
  l.wo = src.matrix(p + "out_proj.weight", g.inner(), c.n_embd);
}

void load_hybrid(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "granitehybrid";
  read_llama_config(cfg, c);  // intermediate_size: the experts' width
  // RoPE only where position_embedding_type says so (Granite 4.0-H: none).
  const bool rope = cfg.has("position_embedding_type") && cfg.json()["position_embedding_type"].is_string() &&
                    cfg.json()["position_embedding_type"].get<std::string>() == "rope";
  if (!rope) c.nope_layers.assign(static_cast<size_t>(c.n_layer), 1);
  check_config(cfg, c);
  read_scales(cfg, c);
  read_mamba2(cfg, c);
  c.n_expert = cfg.get_int("num_local_experts", 0);
  const int64_t shared = cfg.get_int("shared_intermediate_size");
  if (shared <= 0) cfg.fail(Errc::bad_format, "shared_intermediate_size must be positive");
  if (c.n_expert > 0) {
    c.n_expert_used = cfg.get_int("num_experts_per_tok");
    if (c.n_expert > (int64_t{1} << 16) || c.n_expert_used <= 0 || c.n_expert_used > c.n_expert) {
      cfg.fail(Errc::bad_format, "num_experts_per_tok must be in 1..num_local_experts");
    }
    c.n_ff_shared = shared;
  } else {
    c.n_ff = shared;  // the shared MLP is the layer's FFN
  }
  const bool bias = cfg.get_bool("attention_bias", false);
  const bool conv_bias = cfg.get_bool("mamba_conv_bias", true);
  bind_model_ends(src, c, w);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + ".";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    l.attn_norm = src.vector(p + "input_layernorm.weight", c.n_embd);
    l.ffn_norm = src.vector(p + "post_attention_layernorm.weight", c.n_embd);
    if (c.is_recurrent(il)) {
      bind_mamba2(src, p + "mamba.", c, conv_bias, l);
    } else {
      l.wq = src.matrix(p + "self_attn.q_proj.weight", c.n_embd, c.q_dim());
      l.wk = src.matrix(p + "self_attn.k_proj.weight", c.n_embd, c.kv_dim());
      l.wv = src.matrix(p + "self_attn.v_proj.weight", c.n_embd, c.kv_dim());
      l.wo = src.matrix(p + "self_attn.o_proj.weight", c.q_dim(), c.n_embd);
      if (bias) {
        l.bq = src.vector(p + "self_attn.q_proj.bias", c.q_dim());
        l.bk = src.vector(p + "self_attn.k_proj.bias", c.kv_dim());
        l.bv = src.vector(p + "self_attn.v_proj.bias", c.kv_dim());
        l.bo = src.vector(p + "self_attn.o_proj.bias", c.n_embd);
      }
    }
    // The shared MLP: input_linear holds gate rows, then up rows.
    const Weight gate_up = src.matrix(p + "shared_mlp.input_linear.weight", c.n_embd, 2 * shared);
    ExpertWeights mlp{.w_gate = weight_rows(gate_up, 0, shared),
                      .w_up = weight_rows(gate_up, shared, shared),
                      .w_down = src.matrix(p + "shared_mlp.output_linear.weight", shared, c.n_embd)};
    if (c.n_expert == 0) {
      l.w_gate = mlp.w_gate;
      l.w_up = mlp.w_up;
      l.w_down = mlp.w_down;
      continue;
    }
    l.shared = mlp;  // ungated: weight 1 beside the routed experts
    bind_granite_experts(src, p + "block_sparse_moe.", c, l);
  }
}

void granite_layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::attention_block(ctx, il, kv, x, layers::Norm::rms, /*rope=*/true);  // the scales travel in config
  layers::dense_or_moe_block(ctx, il, x);                                     // GraniteMoE's experts
}

void granite_hybrid_layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  if (ctx.config.is_recurrent(il)) {
    layers::mamba2_block(ctx, il, kv, x);
  } else {
    layers::attention_block(ctx, il, kv, x, layers::Norm::rms, ctx.config.ropes(il));
  }
  layers::dense_or_moe_block(ctx, il, x);  // experts and the shared MLP, or the MLP alone
}

}  // namespace

const Architecture arch::granite{.name = "granite",
                                 .hf_class = "GraniteForCausalLM",
                                 .load_hf = load_granite,
                                 .embed = layers::embed_tokens,
                                 .layer = granite_layer,
                                 .output_norm = arch::rms_output_norm};  // divides by logit_scale
const Architecture arch::granitehybrid{.name = "granitehybrid",
                                       .hf_class = "GraniteMoeHybridForCausalLM",
                                       .load_hf = load_hybrid,
                                       .embed = layers::embed_tokens,
                                       .layer = granite_hybrid_layer,
                                       .output_norm = arch::rms_output_norm};
const Architecture arch::granitemoe{.name = "granitemoe",
                                    .hf_class = "GraniteMoeForCausalLM",
                                    .load_hf = load_granite_moe,
                                    .embed = layers::embed_tokens,
                                    .layer = granite_layer,
                                    .output_norm = arch::rms_output_norm};

}  // namespace troupe

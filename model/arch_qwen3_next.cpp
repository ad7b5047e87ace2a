// Qwen3-Next (Qwen3NextForCausalLM: Qwen3-Next-80B-A3B) and Qwen3.5
// (Qwen3_5ForCausalLM, Qwen3_5ForConditionalGeneration: Qwen3.5-0.8B to
// 27B; Qwen3_5MoeForCausalLM, Qwen3_5MoeForConditionalGeneration:
// Qwen3.5-35B-A3B and up), and their GGUF files ("qwen3next", "qwen35",
// "qwen35moe"): hybrids whose layers are mostly Gated DeltaNet linear
// attention (layers_gdn.cpp, a fixed state per sequence) with a gated
// full-attention layer every few (q_proj gives each head a query and a gate:
// o_proj(attention * sigmoid(gate))), q/k RMSNorms per head, partial RoPE,
// and a SwiGLU FFN or Qwen2-MoE's experts with a sigmoid-gated shared
// expert. Every RMSNorm but the DeltaNet's own scales by 1 + w (stored so
// at load). The multimodal checkpoints keep the text model under
// model.language_model.*; its multimodal RoPE gives a text token's three
// position axes one value, which makes it this RoPE (as Qwen3-VL's).
#include <cmath>
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

// The sizes, RoPE, layer kinds and DeltaNet shape all four classes share.
void read_hybrid_config(const HfConfig& given, ModelConfig& c) {
  // Qwen3NextConfig rotates a quarter of each head unless told otherwise.
  Json j = given.json();
  const bool in_params = j.contains("rope_parameters") && j["rope_parameters"].is_object() &&
                         j["rope_parameters"].contains("partial_rotary_factor");
  if (!in_params && !j.contains("partial_rotary_factor")) j["partial_rotary_factor"] = 0.25;
  // Qwen3.5-MoE has no dense FFN width; read_moe sets the experts'.
  if (!j.contains("intermediate_size") && j.contains("moe_intermediate_size")) {
    j["intermediate_size"] = j["moe_intermediate_size"];
  }
  const HfConfig cfg(std::move(j), given.path());
  read_llama_config(cfg, c);
  if (cfg.get_bool("attention_bias", false)) cfg.fail(Errc::unsupported, "attention_bias is not supported");
  c.attn_output_gate = true;
  c.conv_kernel = cfg.get_int("linear_conv_kernel_dim", 4);
  c.gdn_k_heads = cfg.get_int("linear_num_key_heads", 16);
  c.gdn_v_heads = cfg.get_int("linear_num_value_heads", 32);
  c.gdn_k_dim = cfg.get_int("linear_key_head_dim", 128);
  c.gdn_v_dim = cfg.get_int("linear_value_head_dim", 128);
  if (c.gdn_k_heads <= 0 || c.gdn_v_heads <= 0 || c.gdn_v_heads % c.gdn_k_heads != 0) {
    cfg.fail(Errc::bad_format, "linear_num_value_heads must be a positive multiple of linear_num_key_heads");
  }
  if (c.gdn_k_dim <= 0 || c.gdn_k_dim > 512 || c.gdn_v_dim <= 0 || c.gdn_v_dim > 4096) {
    cfg.fail(Errc::bad_format, "linear_key_head_dim must be in [1, 512] and linear_value_head_dim in [1, 4096]");
  }
  if (c.conv_kernel < 1 || c.conv_kernel > 16) cfg.fail(Errc::bad_format, "linear_conv_kernel_dim must be in [1, 16]");
  c.recurrent_layers.assign(static_cast<size_t>(c.n_layer), 0);
  const std::vector<std::string> types = read_layer_types(cfg, c.n_layer, {"linear_attention", "full_attention"});
  if (!types.empty()) {
    for (size_t i = 0; i < types.size(); ++i) c.recurrent_layers[i] = types[i] == "linear_attention" ? 1 : 0;
  } else {
    const int64_t interval = cfg.get_int("full_attention_interval", 4);
    if (interval < 1) cfg.fail(Errc::bad_format, "full_attention_interval must be positive");
    for (int64_t i = 0; i < c.n_layer; ++i) c.recurrent_layers[static_cast<size_t>(i)] = (i + 1) % interval != 0;
  }
  check_config(cfg, c);
}

// The experts of Qwen3-Next and Qwen3.5-MoE. Dense layers among them
// (mlp_only_layers, decoder_sparse_step) use intermediate_size.
void read_moe(const HfConfig& cfg, ModelConfig& c, std::vector<uint8_t>& is_moe) {
  c.n_ff_dense = cfg.has("intermediate_size") ? cfg.get_int("intermediate_size") : 0;
  c.n_ff = cfg.get_int("moe_intermediate_size");
  c.n_expert = cfg.get_int("num_experts");
  c.n_expert_used = cfg.get_int("num_experts_per_tok");
  if (c.n_expert <= 0 || c.n_expert_used <= 0 || c.n_expert_used > c.n_expert) {
    cfg.fail(Errc::bad_format, "num_experts_per_tok must be in 1..num_experts");
  }
  c.n_ff_shared = cfg.get_int("shared_expert_intermediate_size");
  if (c.n_ff_shared <= 0) cfg.fail(Errc::bad_format, "shared_expert_intermediate_size must be positive");
  c.expert_weights_norm = cfg.get_bool("norm_topk_prob", true);
  const int64_t step = cfg.get_int("decoder_sparse_step", 1);
  if (step < 1) cfg.fail(Errc::bad_format, "decoder_sparse_step must be positive");
  is_moe.assign(static_cast<size_t>(c.n_layer), 0);
  for (int64_t il = 0; il < c.n_layer; ++il) is_moe[static_cast<size_t>(il)] = (il + 1) % step == 0;
  if (cfg.has("mlp_only_layers") && cfg.json()["mlp_only_layers"].is_array()) {
    for (const Json& i : cfg.json()["mlp_only_layers"]) {
      if (!i.is_number_integer() || i.get<int64_t>() < 0 || i.get<int64_t>() >= c.n_layer) {
        cfg.fail(Errc::bad_format, "mlp_only_layers holds an index outside [0, num_hidden_layers)");
      }
      is_moe[static_cast<size_t>(i.get<int64_t>())] = 0;
    }
  }
  for (uint8_t m : is_moe) {
    if (m == 0 && c.n_ff_dense <= 0) cfg.fail(Errc::bad_format, "dense layers need intermediate_size");
  }
}

// q_proj [n_head * 2 head_dim, n_embd] holds each head's query rows, then
// its gate rows: split into wq and wq_gate.
void bind_gated_q(HfWeights& src, const std::string& name, const ModelConfig& c, LayerWeights& l) {
  const Weight q = src.matrix(name, c.n_embd, 2 * c.q_dim());
  std::vector<RowRun> query, gate;
  for (int64_t h = 0; h < c.n_head; ++h) {
    query.push_back({.first = 2 * h * c.head_dim, .count = c.head_dim});
    gate.push_back({.first = (2 * h + 1) * c.head_dim, .count = c.head_dim});
  }
  l.wq = gather_rows(src.store(), q, query);
  l.wq_gate = gather_rows(src.store(), q, gate);
}

// Qwen3-Next fuses the DeltaNet's input projections by key-head group:
// in_proj_qkvz rows are, per group, q (k_dim), k (k_dim), then v and z
// (v_dim for each of the group's value heads); in_proj_ba, per group, b and
// a (one per value head). Regrouped into Qwen3.5's separate projections.
void bind_fused_gdn_inputs(HfWeights& src, const std::string& p, const ModelConfig& c, LayerWeights& l) {
  const int64_t nk = c.gdn_k_heads, dk = c.gdn_k_dim;
  const int64_t per_k = c.gdn_v_heads / nk, vg = per_k * c.gdn_v_dim;  // value rows per group
  const int64_t group = 2 * dk + 2 * vg;
  const Weight qkvz = src.matrix(p + "in_proj_qkvz.weight", c.n_embd, nk * group);
  std::vector<RowRun> qkv, z;
  for (int64_t g = 0; g < nk; ++g) qkv.push_back({.first = g * group, .count = dk});
  for (int64_t g = 0; g < nk; ++g) qkv.push_back({.first = g * group + dk, .count = dk});
  for (int64_t g = 0; g < nk; ++g) qkv.push_back({.first = g * group + 2 * dk, .count = vg});
  for (int64_t g = 0; g < nk; ++g) z.push_back({.first = g * group + 2 * dk + vg, .count = vg});
  l.gdn_qkv = gather_rows(src.store(), qkvz, qkv);
  l.gdn_z = gather_rows(src.store(), qkvz, z);
  const Weight ba = src.matrix(p + "in_proj_ba.weight", c.n_embd, 2 * c.gdn_v_heads);
  std::vector<RowRun> b, a;
  for (int64_t g = 0; g < nk; ++g) {
    b.push_back({.first = g * 2 * per_k, .count = per_k});
    a.push_back({.first = g * 2 * per_k + per_k, .count = per_k});
  }
  l.gdn_b = gather_rows(src.store(), ba, b);
  l.gdn_a = gather_rows(src.store(), ba, a);
}

void bind_gdn(HfWeights& src, const std::string& p, const ModelConfig& c, bool fused, LayerWeights& l) {
  const int64_t e = c.n_embd, hv = c.gdn_v_heads;
  if (fused) {
    bind_fused_gdn_inputs(src, p, c, l);
  } else {
    l.gdn_qkv = src.matrix(p + "in_proj_qkv.weight", e, c.gdn_conv_dim());
    l.gdn_z = src.matrix(p + "in_proj_z.weight", e, c.gdn_value_dim());
    l.gdn_b = src.matrix(p + "in_proj_b.weight", e, hv);
    l.gdn_a = src.matrix(p + "in_proj_a.weight", e, hv);
  }
  const safetensors::TensorInfo& k = src.expect(p + "conv1d.weight", {c.gdn_conv_dim(), 1, c.conv_kernel});
  l.gdn_conv = store_f32(src.store(), *k.type, k.data, c.gdn_conv_dim() * c.conv_kernel);
  l.gdn_dt_bias = src.vector(p + "dt_bias", hv);
  const float* a_log = src.vector(p + "A_log", hv);
  float* decay = src.store().floats(hv);
  for (int64_t h = 0; h < hv; ++h) decay[h] = -std::exp(a_log[h]);
  l.gdn_decay = decay;
  l.gdn_norm = src.vector(p + "norm.weight", c.gdn_v_dim);
  l.wo = src.matrix(p + "out_proj.weight", c.gdn_value_dim(), e);
}

constexpr ExpertTensorNames kQwen3NextExperts{
    .block = "mlp.", .gate = "gate_proj", .up = "up_proj", .down = "down_proj"};

// Everything but the experts: ends, norms, attention or DeltaNet per layer,
// and the dense MLPs of the layers is_moe leaves out (empty: all dense).
void bind_hybrid(HfWeights& src, const ModelConfig& c, bool fused_gdn, const std::vector<uint8_t>& is_moe,
                 ModelWeights& w) {
  bind_model_ends(src, c, w);
  w.output_norm = src.vector_plus_one("model.norm.weight", c.n_embd);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + ".";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    l.attn_norm = src.vector_plus_one(p + "input_layernorm.weight", c.n_embd);
    l.ffn_norm = src.vector_plus_one(p + "post_attention_layernorm.weight", c.n_embd);
    if (c.is_recurrent(il)) {
      bind_gdn(src, p + "linear_attn.", c, fused_gdn, l);
    } else {
      bind_gated_q(src, p + "self_attn.q_proj.weight", c, l);
      l.wk = src.matrix(p + "self_attn.k_proj.weight", c.n_embd, c.kv_dim());
      l.wv = src.matrix(p + "self_attn.v_proj.weight", c.n_embd, c.kv_dim());
      l.wo = src.matrix(p + "self_attn.o_proj.weight", c.q_dim(), c.n_embd);
      l.q_norm = src.vector_plus_one(p + "self_attn.q_norm.weight", c.head_dim);
      l.k_norm = src.vector_plus_one(p + "self_attn.k_norm.weight", c.head_dim);
    }
    if (is_moe.empty() || is_moe[static_cast<size_t>(il)] == 0) {
      const int64_t ff = is_moe.empty() ? c.n_ff : c.n_ff_dense;
      l.w_gate = src.matrix(p + "mlp.gate_proj.weight", c.n_embd, ff);
      l.w_up = src.matrix(p + "mlp.up_proj.weight", c.n_embd, ff);
      l.w_down = src.matrix(p + "mlp.down_proj.weight", ff, c.n_embd);
    }
  }
}

// The routed experts and the gated shared expert of the MoE layers, which
// follow any dense ones (bind_experts binds from the first MoE layer on).
void bind_moe(const HfConfig& cfg, HfWeights& src, const ModelConfig& c, const std::vector<uint8_t>& is_moe,
              ModelWeights& w) {
  int64_t first = 0;
  while (first < c.n_layer && is_moe[static_cast<size_t>(first)] == 0) ++first;
  for (int64_t il = first; il < c.n_layer; ++il) {
    if (is_moe[static_cast<size_t>(il)] == 0) {
      cfg.fail(Errc::unsupported,
               "a dense layer after the first MoE qwen3_next_layer (mlp_only_layers, decoder_sparse_step) "
               "is not supported");
    }
  }
  if (first == c.n_layer) return;
  bind_experts(src, c, kQwen3NextExperts, w, first);
  for (int64_t il = first; il < c.n_layer; ++il) {
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    const std::string p = "model.layers." + std::to_string(il) + ".mlp.shared_expert";
    l.shared.w_gate = src.matrix(p + ".gate_proj.weight", c.n_embd, c.n_ff_shared);
    l.shared.w_up = src.matrix(p + ".up_proj.weight", c.n_embd, c.n_ff_shared);
    l.shared.w_down = src.matrix(p + ".down_proj.weight", c.n_ff_shared, c.n_embd);
    l.shared_gate = src.matrix(p + "_gate.weight", c.n_embd, 1);
  }
}

void load_qwen3next(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "qwen3next";
  read_hybrid_config(cfg, c);
  std::vector<uint8_t> is_moe;
  read_moe(cfg, c, is_moe);
  bind_hybrid(src, c, /*fused_gdn=*/true, is_moe, w);
  bind_moe(cfg, src, c, is_moe, w);
}

void load_qwen35(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "qwen35";
  read_hybrid_config(cfg, c);
  bind_hybrid(src, c, /*fused_gdn=*/false, {}, w);
}

void load_qwen35moe(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "qwen35moe";
  read_hybrid_config(cfg, c);
  std::vector<uint8_t> is_moe;
  read_moe(cfg, c, is_moe);
  bind_hybrid(src, c, /*fused_gdn=*/false, is_moe, w);
  bind_moe(cfg, src, c, is_moe, w);
}

// The text model of a multimodal checkpoint (text_config, model.language_model.*).
template <void (*Load)(const HfConfig&, HfWeights&, ModelConfig&, ModelWeights&)>
void load_multimodal(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  src.rename_prefix("model.", "model.language_model.");
  Load(text_config_of(cfg), src, c, w);
  src.rename_prefix("", "");
}

void qwen3_next_layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  if (ctx.config.is_recurrent(il)) {
    layers::gated_delta_block(ctx, il, kv, x);
  } else {
    layers::attention_block(ctx, il, kv, x, layers::Norm::rms, /*rope=*/true);  // q/k norms, output gate
  }
  layers::dense_or_moe_block(ctx, il, x);  // and the shared expert
}

}  // namespace

const Architecture arch::qwen3next{.name = "qwen3next",
                                   .hf_class = "Qwen3NextForCausalLM",
                                   .load_hf = load_qwen3next,
                                   .embed = layers::embed_tokens,
                                   .layer = qwen3_next_layer,
                                   .output_norm = arch::rms_output_norm};
const Architecture arch::qwen35{.name = "qwen35",
                                .hf_class = "Qwen3_5ForCausalLM",
                                .load_hf = load_qwen35,
                                .embed = layers::embed_tokens,
                                .layer = qwen3_next_layer,
                                .output_norm = arch::rms_output_norm};
const Architecture arch::qwen35moe{.name = "qwen35moe",
                                   .hf_class = "Qwen3_5MoeForCausalLM",
                                   .load_hf = load_qwen35moe,
                                   .embed = layers::embed_tokens,
                                   .layer = qwen3_next_layer,
                                   .output_norm = arch::rms_output_norm};
// Found by class only: the models they load are "qwen35" and "qwen35moe".
const Architecture arch::qwen35_multimodal{.name = "qwen3.5-multimodal",
                                           .hf_class = "Qwen3_5ForConditionalGeneration",
                                           .load_hf = load_multimodal<load_qwen35>,
                                           .embed = layers::embed_tokens,
                                           .layer = qwen3_next_layer,
                                           .output_norm = arch::rms_output_norm};
const Architecture arch::qwen35moe_multimodal{.name = "qwen3.5-moe-multimodal",
                                              .hf_class = "Qwen3_5MoeForConditionalGeneration",
                                              .load_hf = load_multimodal<load_qwen35moe>,
                                              .embed = layers::embed_tokens,
                                              .layer = qwen3_next_layer,
                                              .output_norm = arch::rms_output_norm};

}  // namespace troupe

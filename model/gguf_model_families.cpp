// The GGUF readers of the architecture families that need more than the
// general reading in gguf_model.cpp: experts and their routing, latent
// attention, local layers, YaRN, Gemma's, Phi-3's and Granite's settings,
// LFM2's short convolutions, Apertus's xIELU.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/error.hpp"
#include "model/gguf_model_impl.hpp"
#include "model/rope_scaling.hpp"

namespace troupe::gguf_load {

// What llama.cpp reads or assumes for "gpt-oss": a sliding window on every
// other layer (layer 0 first) with the same RoPE as the others, the softmax
// over the chosen experts' logits, and the experts' clamped SwiGLU with
// alpha 1.702 and limit 7 (the files carry neither).
void GgufModel::read_gpt_oss(const std::string& p) {
  ModelConfig& c = config_;
  c.sliding_window = read_sliding_window(p);
  if (c.sliding_window <= 0) fail("attention.sliding_window is missing or 0");
  c.local_layers.assign(static_cast<size_t>(c.n_layer), 0);
  for (int64_t il = 0; il < c.n_layer; il += 2) c.local_layers[static_cast<size_t>(il)] = 1;
  c.local_layers_share_rope = true;
  c.expert_weights_norm = true;
  c.expert_swiglu_alpha = 1.702f;
  c.expert_swiglu_limit = 7.0f;
}

// The routing of "glm4moe" and "deepseek2" files as llama.cpp reads it:
// expert_gating_func (1 softmax, 2 sigmoid; default_gating when absent),
// expert_weights_norm, expert_weights_scale, the groups where the file has
// them, the shared experts (expert_shared_count of the experts' width), and
// the leading dense layers with their width (feed_forward_length).
void GgufModel::read_deepseek_routing(const std::string& p, uint32_t default_gating) {
  ModelConfig& c = config_;
  const uint32_t gating = file_.find_u32(p + "expert_gating_func").value_or(default_gating);
  if (gating != 1 && gating != 2) {
    throw Error(Errc::unsupported, file_.path() + ": expert_gating_func " + std::to_string(gating) +
                                       " is not supported (1, softmax, and 2, sigmoid, are)");
  }
  c.expert_router = gating == 2 ? ModelConfig::ExpertRouter::deepseek_sigmoid
                                : ModelConfig::ExpertRouter::deepseek_softmax;
  c.expert_weights_norm = file_.find_bool(p + "expert_weights_norm").value_or(false);
  c.expert_weights_scale = file_.find_f32(p + "expert_weights_scale").value_or(1.0f);
  if (!(c.expert_weights_scale > 0.0f) || !std::isfinite(c.expert_weights_scale)) {
    fail("expert_weights_scale must be positive");
  }
  c.n_expert_groups = file_.find_u32(p + "expert_group_count").value_or(1);
  c.n_expert_groups_used = file_.find_u32(p + "expert_group_used_count").value_or(1);
  if (c.n_expert_groups <= 0 || c.n_expert % c.n_expert_groups != 0 || c.n_expert_groups_used <= 0 ||
      c.n_expert_groups_used > c.n_expert_groups ||
      (c.n_expert_groups > 1 && c.n_expert / c.n_expert_groups < 2) ||
      c.n_expert_groups_used * (c.n_expert / c.n_expert_groups) < c.n_expert_used) {
    fail("expert_group_count and expert_group_used_count do not divide the experts");
  }
  c.n_ff_shared = static_cast<int64_t>(file_.find_u32(p + "expert_shared_count").value_or(0)) * c.n_ff;
  const uint32_t n_dense = file_.find_u32(p + "leading_dense_block_count").value_or(0);
  if (n_dense > c.n_layer) fail("leading_dense_block_count is more than block_count");
  c.n_ff_dense = n_dense > 0 ? file_.get_u32(p + "feed_forward_length") : 0;
  if (n_dense > 0 && c.n_ff_dense <= 0) fail("feed_forward_length must be positive");
}

// A glm4moe layer past the attention projections: the norm before the FFN
// (named post_attention_norm), then a dense FFN in the leading layers, else
// the router, its correction bias (exp_probs_b), the experts and the shared
// ones.
void GgufModel::bind_glm4moe_layer(const std::string& b, int64_t il, LayerWeights& l) const {
  l.ffn_norm = vector(b + "post_attention_norm.weight", config_.n_embd);
  bind_deepseek_layer_ffn(b, il, l);
}

// The FFN of a glm4moe, deepseek2 or ernie4_5-moe layer: dense (of
// n_ff_dense) where the file's leading_dense_block_count and
// interleave_moe_layer_step say so, else the experts, their correction bias
// (exp_probs_b: {n_expert}, or {n_expert, 1} as ERNIE's converter writes it;
// required where the routing always has one) and the shared experts.
void GgufModel::bind_deepseek_layer_ffn(const std::string& b, int64_t il, LayerWeights& l) const {
  const ModelConfig& c = config_;
  const std::string p = file_.get_string("general.architecture") + ".";  // the file's keys, whatever runs it
  const int64_t lead = file_.find_u32(p + "leading_dense_block_count").value_or(0);
  const int64_t step = std::max<int64_t>(1, file_.find_u32(p + "interleave_moe_layer_step").value_or(1));
  if (il < lead || (il + 1) % step != 0) {
    l.w_gate = matrix(b + "ffn_gate.weight", c.n_embd, c.n_ff_dense);
    l.w_up = matrix(b + "ffn_up.weight", c.n_embd, c.n_ff_dense);
    l.w_down = matrix(b + "ffn_down.weight", c.n_ff_dense, c.n_embd);
    return;
  }
  bind_experts(b, l);
  const std::string bias = b + "exp_probs_b.bias";
  if (const gguf::TensorInfo* t = file_.find_tensor(bias)) {
    const int64_t n1 = t->shape.size() == 2 ? t->shape[1] : 1;
    if (t->shape.empty() || t->shape.size() > 2 || t->shape[0] != c.n_expert || n1 != 1 || t->type != DType::f32) {
      fail("tensor '" + bias + "' must be f32 {" + std::to_string(c.n_expert) + "} or {" +
           std::to_string(c.n_expert) + ", 1}");
    }
    l.expert_score_bias = static_cast<const float*>(t->data);
  } else if (p != "deepseek2.") {  // V2 files route by the softmax alone
    fail("missing tensor '" + bias + "'");
  }
  if (c.n_ff_shared > 0) {
    l.shared.w_gate = matrix(b + "ffn_gate_shexp.weight", c.n_embd, c.n_ff_shared);
    l.shared.w_up = matrix(b + "ffn_up_shexp.weight", c.n_embd, c.n_ff_shared);
    l.shared.w_down = matrix(b + "ffn_down_shexp.weight", c.n_ff_shared, c.n_embd);
  }
}

// What llama.cpp reads for "ernie4_5-moe": experts on every
// interleave_moe_layer_step-th layer from leading_dense_block_count on
// (dense ones of feed_forward_length elsewhere), routed by a softmax whose
// top k are chosen with exp_probs_b and renormalized.
void GgufModel::read_ernie_moe(const std::string& p) {
  ModelConfig& c = config_;
  c.expert_router = ModelConfig::ExpertRouter::deepseek_softmax;
  c.expert_weights_norm = true;
  c.n_ff_dense = file_.get_u32(p + "feed_forward_length");
  if (c.n_ff_dense <= 0) fail("feed_forward_length must be positive");
  if (file_.find_u32(p + "interleave_moe_layer_step").value_or(1) == 0) fail("interleave_moe_layer_step is 0");
  // The converter writes expert_shared_feed_forward_length divided by the
  // key/value heads; the tensors say the width.
  const gguf::TensorInfo* shexp = nullptr;
  for (int64_t il = 0; il < c.n_layer && shexp == nullptr; ++il) {
    shexp = file_.find_tensor("blk." + std::to_string(il) + ".ffn_gate_shexp.weight");
  }
  if (shexp != nullptr) {
    if (shexp->shape.size() != 2) fail("tensor '" + shexp->name + "' must have 2 dimensions");
    c.n_ff_shared = shexp->shape[1];
  }
}


// DeepSeek's latent attention as llama.cpp's converter writes it: the ranks,
// each head's key (key_length_mla: nope + rope) and value
// (value_length_mla) widths, rope.dimension_count, and head_count_kv 1
// (its absorbed form; here every head has its own key and value). YaRN's
// score scale comes from yarn_log_multiplier, written as 0.1 mscale_all_dim;
// the RoPE itself is unscaled in magnitude (mscale = mscale_all_dim, as
// llama.cpp assumes).
void GgufModel::read_deepseek2_attention(const std::string& p) {
  ModelConfig& c = config_;
  c.mla_q_rank = file_.find_u32(p + "attention.q_lora_rank").value_or(0);
  c.mla_kv_rank = file_.get_u32(p + "attention.kv_lora_rank");
  c.mla_rope_dim = file_.get_u32(p + "rope.dimension_count");
  const int64_t key = file_.get_u32(p + "attention.key_length_mla");
  c.mla_v_dim = file_.get_u32(p + "attention.value_length_mla");
  c.mla_nope_dim = key - c.mla_rope_dim;
  if (c.mla_kv_rank <= 0 || c.mla_rope_dim <= 0 || c.mla_rope_dim % 2 != 0 || c.mla_nope_dim <= 0 ||
      c.mla_v_dim <= 0 || c.mla_v_dim > key) {
    fail("the latent attention's ranks and widths are out of range");
  }
  c.head_dim = key;
  c.n_head_kv = c.n_head;
}

// The scores' YaRN scale of a "deepseek2" file (yarn_log_multiplier is
// 0.1 mscale_all_dim); the RoPE magnitude stays 1.
void GgufModel::read_deepseek2_score_scale(const std::string& p) {
  ModelConfig& c = config_;
  double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  const float log_mul = file_.find_f32(p + "rope.scaling.yarn_log_multiplier").value_or(0.0f);
  if (log_mul != 0.0f && file_.find_string(p + "rope.scaling.type").value_or("") == "yarn") {
    const double m = yarn_mscale(file_.get_f32(p + "rope.scaling.factor"), log_mul / 0.1);
    scale *= m * m;
  }
  c.rope_mscale = 1.0f;
  c.attn_scale = static_cast<float>(scale);
}

// The latent attention's matrices. attn_kv_b where the file has it; else
// kv_b is put back from attn_k_b ({nope, rank, head}: each head's key part,
// transposed) and attn_v_b ({rank, v, head}), as f32 rows.
void GgufModel::bind_deepseek2_attention(const std::string& b, LayerWeights& l) {
  const ModelConfig& c = config_;
  if (c.mla_q_rank > 0) {
    l.wq_a = matrix(b + "attn_q_a.weight", c.n_embd, c.mla_q_rank);
    l.q_a_norm = vector(b + "attn_q_a_norm.weight", c.mla_q_rank);
    l.wq = matrix(b + "attn_q_b.weight", c.mla_q_rank, c.q_dim());
  } else {
    l.wq = matrix(b + "attn_q.weight", c.n_embd, c.q_dim());
  }
  l.wkv_a = matrix(b + "attn_kv_a_mqa.weight", c.n_embd, c.mla_kv_rank + c.mla_rope_dim);
  l.kv_a_norm = vector(b + "attn_kv_a_norm.weight", c.mla_kv_rank);
  l.wo = matrix(b + "attn_output.weight", c.n_head * c.mla_v_dim, c.n_embd);
  const int64_t rank = c.mla_kv_rank, nope = c.mla_nope_dim, v = c.mla_v_dim, h = c.n_head;
  if (file_.find_tensor(b + "attn_kv_b.weight") != nullptr) {
    l.wkv_b = matrix(b + "attn_kv_b.weight", rank, h * (nope + v));
    return;
  }
  const gguf::TensorInfo& kb = file_.tensor(b + "attn_k_b.weight");
  const gguf::TensorInfo& vb = file_.tensor(b + "attn_v_b.weight");
  file_.expect_shape(kb, {nope, rank, h});
  file_.expect_shape(vb, {rank, v, h});
  float* out = store_.floats(h * (nope + v) * rank);  // [h, nope + v, rank]
  std::vector<float> row(static_cast<size_t>(std::max(nope, rank)));
  const int64_t kb_row = row_bytes(kb.type, nope), vb_row = row_bytes(vb.type, rank);
  for (int64_t hd = 0; hd < h; ++hd) {
    float* head = out + hd * (nope + v) * rank;
    for (int64_t r = 0; r < rank; ++r) {  // k_b's row r of head hd: kv_b's column r of the key rows
      dequantize_row(kb.type, static_cast<const uint8_t*>(kb.data) + (hd * rank + r) * kb_row, row.data(), nope);
      for (int64_t d = 0; d < nope; ++d) head[d * rank + r] = row[static_cast<size_t>(d)];
    }
    for (int64_t d = 0; d < v; ++d) {
      dequantize_row(vb.type, static_cast<const uint8_t*>(vb.data) + (hd * v + d) * vb_row, head + (nope + d) * rank,
                     rank);
    }
  }
  l.wkv_b = Weight{.data = out, .type = DType::f32, .n_in = rank, .n_out = h * (nope + v)};
}

// gpt-oss's layer past the attention projections: the output bias, the
// sinks, the norm before the experts (named post_attention_norm), and the
// router's and experts' biases ({n_ff, n_expert} and {n_embd, n_expert}).
void GgufModel::bind_gpt_oss_layer(const std::string& b, LayerWeights& l) const {
  const ModelConfig& c = config_;
  l.bo = vector(b + "attn_output.bias", c.n_embd);
  l.attn_sinks = vector(b + "attn_sinks.weight", c.n_head);
  l.ffn_norm = vector(b + "post_attention_norm.weight", c.n_embd);
  bind_experts(b, l);
  l.ffn_router_b = vector(b + "ffn_gate_inp.bias", c.n_expert);
  auto biases = [&](const std::string& name, int64_t n) {
    const gguf::TensorInfo& t = file_.tensor(name);
    file_.expect_shape(t, {n, c.n_expert});
    if (t.type != DType::f32) fail("tensor '" + name + "' is " + std::string(dtype_name(t.type)) + ", expected f32");
    return static_cast<const float*>(t.data);
  };
  const float* bg = biases(b + "ffn_gate_exps.bias", c.n_ff);
  const float* bu = biases(b + "ffn_up_exps.bias", c.n_ff);
  const float* bd = biases(b + "ffn_down_exps.bias", c.n_embd);
  for (int64_t e = 0; e < c.n_expert; ++e) {
    ExpertWeights& ex = l.experts[static_cast<size_t>(e)];
    ex.b_gate = bg + e * c.n_ff;
    ex.b_up = bu + e * c.n_ff;
    ex.b_down = bd + e * c.n_embd;
  }
}

// What llama.cpp reads or assumes for "gemma3": local layers when the file
// names a sliding window (the pattern key, else every sixth layer global),
// their RoPE base (freq_base_swa, else 10000), embeddings times sqrt(n_embd),
// and the score scale by model size: the files carry no
// query_pre_attn_scalar, and Gemma 3 27B (62 layers) is the one whose scalar
// (n_embd / n_head) is not head_dim. The norms are stored as 1 + w already.
// "gemma2": every other layer local (window 4096 when the key is absent),
// one RoPE base for both kinds, 27B is the 46-layer one, and soft-capping of
// the scores and logits (50 and 30 when the keys are absent).
void GgufModel::read_gemma(const std::string& p, bool gemma2) {
  ModelConfig& c = config_;
  c.attn_softcap = file_.find_f32(p + "attn_logit_softcapping").value_or(gemma2 ? 50.0f : 0.0f);
  c.final_softcap = file_.find_f32(p + "final_logit_softcapping").value_or(gemma2 ? 30.0f : 0.0f);
  if (!(c.attn_softcap >= 0.0f) || !std::isfinite(c.attn_softcap) || !(c.final_softcap >= 0.0f) ||
      !std::isfinite(c.final_softcap)) {
    fail("attn_logit_softcapping and final_logit_softcapping must be finite and >= 0");
  }
  c.sliding_window = read_sliding_window(p);
  if (gemma2 && file_.find_u32(p + "attention.sliding_window") == std::nullopt) c.sliding_window = 4096;
  if (c.sliding_window > 0) {
    read_local_layers(p, gemma2 ? 2 : 6);
  }
  c.rope_local_theta = file_.find_f32(p + "rope.freq_base_swa").value_or(gemma2 ? c.rope_theta : 10000.0f);
  if (!(c.rope_local_theta > 0.0f)) fail("rope.freq_base_swa must be positive");
  if (gemma2 && c.rope_freq_scale != 1.0f) fail("Gemma 2 with RoPE scaling is not supported");
  const int64_t scalar = c.n_layer == (gemma2 ? 46 : 62) ? c.n_embd / c.n_head : c.head_dim;
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(scalar));
  c.embed_scale = std::sqrt(static_cast<float>(c.n_embd));
}

// YaRN as llama.cpp reads it: the factor, the original context (the
// trained one when absent), beta_fast / beta_slow, yarn_ext_factor (1) and
// an attention factor of 0.1 ln(factor) + 1 (over 0.1 m ln(factor) + 1 with
// m = yarn_log_multiplier, DeepSeek's mscale_all_dim, when the file has it)
// times rope.scaling.attn_factor. Needs n_rot and rope_theta.
void GgufModel::read_yarn(const std::string& p) {
  ModelConfig& c = config_;
  YarnParams y;
  y.factor = file_.get_f32(p + "rope.scaling.factor");
  if (!(y.factor > 0.0) || !std::isfinite(y.factor)) fail("rope.scaling.factor must be positive");
  y.original_ctx = file_.find_u32(p + "rope.scaling.original_context_length")
                       .value_or(file_.find_u32(p + "context_length").value_or(0));
  if (!(y.original_ctx > 0.0)) fail("yarn needs rope.scaling.original_context_length");
  y.beta_fast = file_.find_f32(p + "rope.scaling.yarn_beta_fast").value_or(32.0f);
  y.beta_slow = file_.find_f32(p + "rope.scaling.yarn_beta_slow").value_or(1.0f);
  y.ext_factor = file_.find_f32(p + "rope.scaling.yarn_ext_factor").value_or(1.0f);
  if (!(y.beta_fast > 0.0) || !(y.beta_slow > 0.0) || !(y.ext_factor >= 0.0 && y.ext_factor <= 1.0)) {
    fail("yarn_beta_fast and yarn_beta_slow must be positive and yarn_ext_factor in [0, 1]");
  }
  c.rope_freq_factors = yarn_freq_factors(c.n_rot, c.rope_theta, y);
  const double log_mul = file_.find_f32(p + "rope.scaling.yarn_log_multiplier").value_or(0.0f);
  double mscale = 1.0;
  if (y.ext_factor != 0.0) {
    mscale = log_mul != 0.0 ? yarn_mscale(y.factor) / yarn_mscale(y.factor, log_mul) : yarn_mscale(y.factor);
  }
  mscale *= file_.find_f32(p + "rope.scaling.attn_factor").value_or(1.0f);
  if (!(mscale > 0.0) || !std::isfinite(mscale)) fail("rope.scaling.attn_factor must be positive");
  c.rope_mscale = static_cast<float>(mscale);
}

// Which layers are local, from attention.sliding_window_pattern: a bool per
// layer (true: local), or a period (every pattern-th layer global, 0: all
// local; default_pattern when absent), as llama.cpp reads it.
void GgufModel::read_local_layers(const std::string& p, uint32_t default_pattern) {
  ModelConfig& c = config_;
  const std::string key = p + "attention.sliding_window_pattern";
  c.local_layers.assign(static_cast<size_t>(c.n_layer), 1);
  if (const gguf::Value* v = file_.find(key); v != nullptr && std::holds_alternative<gguf::Array>(*v)) {
    const std::vector<bool> local = *file_.find_bool_array(key);
    if (static_cast<int64_t>(local.size()) != c.n_layer) {
      fail("attention.sliding_window_pattern lists " + std::to_string(local.size()) + " layers, the model has " +
           std::to_string(c.n_layer));
    }
    for (int64_t il = 0; il < c.n_layer; ++il) c.local_layers[static_cast<size_t>(il)] = local[static_cast<size_t>(il)];
    return;
  }
  const uint32_t pattern = file_.find_u32(key).value_or(default_pattern);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    c.local_layers[static_cast<size_t>(il)] = pattern == 0 || il % pattern < pattern - 1;
  }
}

// attention.sliding_window, 0 when absent.
int32_t GgufModel::read_sliding_window(const std::string& p) const {
  const uint32_t window = file_.find_u32(p + "attention.sliding_window").value_or(0);
  if (window > INT32_MAX) fail("attention.sliding_window is out of range");
  return static_cast<int32_t>(window);
}

// Phi-3's window, which transformers applies (llama.cpp reads the key and
// turns the window off), and LongRoPE as llama.cpp's converter writes it:
// both factor tensors, the original context and the attention factor.
void GgufModel::read_phi3(const std::string& p) {
  ModelConfig& c = config_;
  c.sliding_window = read_sliding_window(p);
  const float* long_factors = vector("rope_factors_long.weight", c.n_rot / 2, /*required=*/false);
  const float* short_factors = vector("rope_factors_short.weight", c.n_rot / 2, /*required=*/false);
  if (long_factors == nullptr && short_factors == nullptr) return;
  if (long_factors == nullptr || short_factors == nullptr) {
    fail("LongRoPE needs both rope_factors_long.weight and rope_factors_short.weight");
  }
  c.rope_long_factors.assign(long_factors, long_factors + c.n_rot / 2);
  c.rope_short_factors.assign(short_factors, short_factors + c.n_rot / 2);
  c.rope_orig_ctx = file_.get_u32(p + "rope.scaling.original_context_length");
  if (c.rope_orig_ctx <= 0) fail("rope.scaling.original_context_length must be positive");
  c.rope_mscale = file_.find_f32(p + "rope.scaling.attn_factor").value_or(1.0f);
  if (!(c.rope_mscale > 0.0f) || !std::isfinite(c.rope_mscale)) fail("rope.scaling.attn_factor must be positive");
  for (const std::vector<float>* f : {&c.rope_long_factors, &c.rope_short_factors}) {
    for (const float v : *f) {
      if (!(v > 0.0f) || !std::isfinite(v)) fail("LongRoPE factors must be positive");
    }
  }
}

// Granite's scales, as llama.cpp reads them: logit_scale required, the
// others optional.
void GgufModel::read_granite(const std::string& p) {
  ModelConfig& c = config_;
  auto scale = [&](const std::string& key, std::optional<float> v, float absent) {
    if (v && !(*v > 0.0f)) fail(key + " must be positive");
    return v.value_or(absent);
  };
  c.embed_scale = scale("embedding_scale", file_.find_f32(p + "embedding_scale"), 1.0f);
  c.residual_scale = scale("residual_scale", file_.find_f32(p + "residual_scale"), 1.0f);
  c.attn_scale = scale("attention.scale", file_.find_f32(p + "attention.scale"), 0.0f);  // 0: 1/sqrt(head_dim)
  c.logit_scale = scale("logit_scale", file_.get_f32(p + "logit_scale"), 1.0f);
}

std::vector<uint8_t> GgufModel::read_kv_head_counts(const std::string& p) {
  ModelConfig& c = config_;
  const std::string key = p + "attention.head_count_kv";
  const gguf::Value* v = file_.find(key);
  c.n_head_kv = c.n_head;
  std::vector<uint8_t> none;
  if (v != nullptr && std::holds_alternative<gguf::Array>(*v)) {
    const std::vector<int32_t> per_layer = file_.get_i32_array(key);
    if (static_cast<int64_t>(per_layer.size()) < c.n_layer) fail(key + " lists fewer values than block_count");
    none.assign(static_cast<size_t>(c.n_layer), 0);
    int64_t kv = 0;
    for (int64_t il = 0; il < c.n_layer; ++il) {
      const int32_t n = per_layer[static_cast<size_t>(il)];
      if (n < 0) fail(key + " holds a negative head count");
      if (n == 0) {
        none[static_cast<size_t>(il)] = 1;
      } else if (kv != 0 && n != kv) {
        throw Error(Errc::unsupported, file_.path() + ": attention layers with different kv head counts (" +
                                           std::to_string(kv) + ", " + std::to_string(n) + ") are not supported");
      } else {
        kv = n;
      }
    }
    if (kv > 0) c.n_head_kv = kv;
  } else if (v != nullptr) {
    c.n_head_kv = file_.get_u32(key);
  }
  return none;
}

// LFM2: attention.head_count_kv lists each layer's kv heads, 0 for a
// short-convolution layer, as llama.cpp's converter writes it.
void GgufModel::read_lfm2_layers(const std::string& p) {
  ModelConfig& c = config_;
  c.conv_layers = read_kv_head_counts(p);
  c.conv_kernel = file_.get_u32(p + "shortconv.l_cache");
  if (c.conv_kernel < 1 || c.conv_kernel > 64) fail("shortconv.l_cache must be in 1..64");
}

// Apertus's xIELU parameters: one trained value per layer in each of
// xielu.alpha_p / alpha_n / beta / eps (llama.cpp's converter writes them
// without the architecture's prefix; a single value stands for every
// layer), made the effective ones as Backend::xielu takes them.
void GgufModel::read_xielu() {
  const ModelConfig& c = config_;
  auto per_layer = [&](const char* key) {
    const std::string k = std::string("xielu.") + key;
    const gguf::Value* v = file_.find(k);
    if (v == nullptr) fail("missing required key '" + k + "'");
    std::vector<float> out;
    if (std::holds_alternative<gguf::Array>(*v)) {
      out = file_.get_f32_array(k);
    } else {
      out.assign(static_cast<size_t>(c.n_layer), file_.get_f32(k));
    }
    if (static_cast<int64_t>(out.size()) < c.n_layer) fail(k + " lists fewer values than block_count");
    return out;
  };
  const std::vector<float> alpha_p = per_layer("alpha_p"), alpha_n = per_layer("alpha_n"), beta = per_layer("beta"),
                           eps = per_layer("eps");
  auto softplus = [](float x) { return static_cast<float>(std::log1p(std::exp(static_cast<double>(x)))); };
  for (int64_t il = 0; il < c.n_layer; ++il) {
    LayerWeights::Xielu& x = weights_.layers[static_cast<size_t>(il)].xielu;
    const auto i = static_cast<size_t>(il);
    x.beta = beta[i];
    x.eps = eps[i];
    x.alpha_p = softplus(alpha_p[i]);
    x.alpha_n = beta[i] + softplus(alpha_n[i]);
  }
}

// An lfm2 / lfm2moe layer past its operator norm: the short convolution or
// attention with per-head q/k norms, then the FFN: dense (of n_ff in lfm2,
// of n_ff_dense in lfm2moe's leading layers) or the experts.
void GgufModel::bind_lfm2_layer(const std::string& b, int64_t il, LayerWeights& l) {
  const ModelConfig& c = config_;
  if (c.is_conv(il)) {
    l.conv_in = matrix(b + "shortconv.in_proj.weight", c.n_embd, 3 * c.n_embd);
    l.wo = matrix(b + "shortconv.out_proj.weight", c.n_embd, c.n_embd);
    l.conv_w = conv_taps(b + "shortconv.conv.weight", c.conv_kernel, c.n_embd);
  } else {
    l.wq = matrix(b + "attn_q.weight", c.n_embd, c.q_dim());
    l.wk = matrix(b + "attn_k.weight", c.n_embd, c.kv_dim());
    l.wv = matrix(b + "attn_v.weight", c.n_embd, c.kv_dim());
    l.wo = matrix(b + "attn_output.weight", c.q_dim(), c.n_embd);
    l.q_norm = vector(b + "attn_q_norm.weight", c.head_dim);
    l.k_norm = vector(b + "attn_k_norm.weight", c.head_dim);
  }
  l.ffn_norm = vector(b + "ffn_norm.weight", c.n_embd);
  if (c.n_expert > 0) {
    bind_deepseek_layer_ffn(b, il, l);
    return;
  }
  l.w_gate = matrix(b + "ffn_gate.weight", c.n_embd, c.n_ff);
  l.w_up = matrix(b + "ffn_up.weight", c.n_embd, c.n_ff);
  l.w_down = matrix(b + "ffn_down.weight", c.n_ff, c.n_embd);
}

}  // namespace troupe::gguf_load

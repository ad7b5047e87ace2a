// GGUF files of models with recurrent layers (llama.cpp's converter).
// "qwen3next", "qwen35" and "qwen35moe" (Qwen3-Next and Qwen3.5): the Gated
// DeltaNet layers' shape and tensors, and the gated attention layers beside
// them (model/arch_qwen3_next.cpp runs both).
// The converter stores the RMSNorms as 1 + w already, A_log as -exp(A_log),
// and Qwen3-Next's fused in_proj_qkvz as attn_qkv (every q, every k, every
// v) and attn_gate (z); Qwen3.5's value heads it reorders from grouped by
// key head to tiled (ModelConfig::gdn_v_tiled).
// "granitehybrid" (Granite 4.0-H): Mamba-2 layers (0 kv heads in
// attention.head_count_kv), the ssm.* shape keys, ssm_in, ssm_conv1d (with
// bias), ssm_dt.bias, ssm_a (-exp(A_log)) and ssm_d as {1, heads}, ssm_norm
// as {inner / groups, groups}, ssm_out; attention without RoPE (the
// converter writes rope.scaling.finetuned false for every such file).
#include <string>
#include <vector>

#include "model/gguf_model_impl.hpp"
#include "model/weight_store.hpp"

namespace troupe::gguf_load {

// {taps, channels}: each channel's taps, oldest first (f32 from the
// converters; a 16-bit copy is widened).
const float* GgufModel::conv_taps(const std::string& name, int64_t taps, int64_t channels) {
  const gguf::TensorInfo& t = file_.tensor(name);
  file_.expect_shape(t, {taps, channels});
  if (t.type != DType::f32 && t.type != DType::f16 && t.type != DType::bf16) {
    fail("tensor '" + name + "' is " + std::string(dtype_name(t.type)) + ", expected f32, f16 or bf16");
  }
  return store_f32(store_, t.type, t.data, taps * channels);
}

void GgufModel::read_qwen_hybrid(const std::string& p) {
  ModelConfig& c = config_;
  c.attn_output_gate = true;
  c.conv_kernel = file_.get_u32(p + "ssm.conv_kernel");
  c.gdn_k_dim = file_.get_u32(p + "ssm.state_size");
  c.gdn_k_heads = file_.get_u32(p + "ssm.group_count");
  c.gdn_v_heads = file_.get_u32(p + "ssm.time_step_rank");
  const int64_t inner = file_.get_u32(p + "ssm.inner_size");
  if (c.conv_kernel < 1 || c.conv_kernel > 16) fail("ssm.conv_kernel must be in 1..16");
  if (c.gdn_k_heads <= 0 || c.gdn_v_heads <= 0 || c.gdn_v_heads % c.gdn_k_heads != 0) {
    fail("ssm.time_step_rank (value heads) must be a positive multiple of ssm.group_count (key heads)");
  }
  if (c.gdn_k_dim <= 0 || c.gdn_k_dim > 512) fail("ssm.state_size (key head width) must be in 1..512");
  if (inner <= 0 || inner % c.gdn_v_heads != 0 || inner / c.gdn_v_heads > 4096) {
    fail("ssm.inner_size must be value heads times a width of at most 4096");
  }
  c.gdn_v_dim = inner / c.gdn_v_heads;
  c.gdn_v_tiled = c.arch != "qwen3next" && c.gdn_v_heads != c.gdn_k_heads;
  c.recurrent_layers.assign(static_cast<size_t>(c.n_layer), 0);
  if (const auto kinds = file_.find_bool_array(p + "attention.recurrent_layers")) {
    // Multi-token-prediction layers past n_layer, if any, are listed too.
    if (static_cast<int64_t>(kinds->size()) < c.n_layer) {
      fail("attention.recurrent_layers lists fewer layers than block_count");
    }
    for (int64_t il = 0; il < c.n_layer; ++il) {
      c.recurrent_layers[static_cast<size_t>(il)] = (*kinds)[static_cast<size_t>(il)];
    }
  } else {
    const int64_t interval = file_.find_u32(p + "full_attention_interval").value_or(4);
    if (interval < 1) fail("full_attention_interval must be positive");
    for (int64_t il = 0; il < c.n_layer; ++il) c.recurrent_layers[static_cast<size_t>(il)] = (il + 1) % interval != 0;
  }
}

void GgufModel::bind_qwen_hybrid_layer(const std::string& b, int64_t il, LayerWeights& l) {
  const ModelConfig& c = config_;
  const int64_t e = c.n_embd, hv = c.gdn_v_heads;
  l.attn_norm = vector(b + "attn_norm.weight", e);
  l.ffn_norm = vector(b + "post_attention_norm.weight", e);  // the norm before the FFN
  if (c.is_recurrent(il)) {
    l.gdn_qkv = matrix(b + "attn_qkv.weight", e, c.gdn_conv_dim());
    l.gdn_z = matrix(b + "attn_gate.weight", e, c.gdn_value_dim());
    if (file_.find_tensor(b + "ssm_ba.weight") != nullptr) {
      // Qwen3-Next keeps in_proj_ba's rows: per key head, its value heads'
      // b, then their a.
      const Weight ba = matrix(b + "ssm_ba.weight", e, 2 * hv);
      const int64_t per_k = hv / c.gdn_k_heads;
      std::vector<RowRun> beta, alpha;
      for (int64_t g = 0; g < c.gdn_k_heads; ++g) {
        beta.push_back({.first = 2 * g * per_k, .count = per_k});
        alpha.push_back({.first = 2 * g * per_k + per_k, .count = per_k});
      }
      l.gdn_b = gather_rows(store_, ba, beta);
      l.gdn_a = gather_rows(store_, ba, alpha);
    } else {
      l.gdn_b = matrix(b + "ssm_beta.weight", e, hv);
      l.gdn_a = matrix(b + "ssm_alpha.weight", e, hv);
    }
    l.gdn_conv = conv_taps(b + "ssm_conv1d.weight", c.conv_kernel, c.gdn_conv_dim());
    l.gdn_decay = vector(b + "ssm_a", hv);
    l.gdn_dt_bias = vector(b + "ssm_dt.bias", hv);
    l.gdn_norm = vector(b + "ssm_norm.weight", c.gdn_v_dim);
    l.wo = matrix(b + "ssm_out.weight", c.gdn_value_dim(), e);
  } else {
    // attn_q: each head's query rows, then its gate rows.
    const Weight q = matrix(b + "attn_q.weight", e, 2 * c.q_dim());
    std::vector<RowRun> query, gate;
    for (int64_t h = 0; h < c.n_head; ++h) {
      query.push_back({.first = 2 * h * c.head_dim, .count = c.head_dim});
      gate.push_back({.first = (2 * h + 1) * c.head_dim, .count = c.head_dim});
    }
    l.wq = gather_rows(store_, q, query);
    l.wq_gate = gather_rows(store_, q, gate);
    l.wk = matrix(b + "attn_k.weight", e, c.kv_dim());
    l.wv = matrix(b + "attn_v.weight", e, c.kv_dim());
    l.wo = matrix(b + "attn_output.weight", c.q_dim(), e);
    l.q_norm = vector(b + "attn_q_norm.weight", c.head_dim);
    l.k_norm = vector(b + "attn_k_norm.weight", c.head_dim);
  }
  if (c.n_expert > 0) {
    bind_experts(b, l);
    bind_gated_shared_expert(b, l);
    return;
  }
  l.w_gate = matrix(b + "ffn_gate.weight", e, c.n_ff);
  l.w_up = matrix(b + "ffn_up.weight", e, c.n_ff);
  l.w_down = matrix(b + "ffn_down.weight", c.n_ff, e);
}

void GgufModel::read_granite_hybrid(const std::string& p) {
  ModelConfig& c = config_;
  if (c.recurrent_layers.empty()) fail("attention.head_count_kv must list each layer's kv heads (0: Mamba-2)");
  c.recurrent_kind = ModelConfig::RecurrentKind::mamba2;
  c.conv_kernel = file_.get_u32(p + "ssm.conv_kernel");
  c.ssm_state = file_.get_u32(p + "ssm.state_size");
  c.ssm_groups = file_.get_u32(p + "ssm.group_count");
  c.ssm_heads = file_.get_u32(p + "ssm.time_step_rank");
  const int64_t inner = file_.get_u32(p + "ssm.inner_size");
  if (c.conv_kernel < 1 || c.conv_kernel > 16) fail("ssm.conv_kernel must be in 1..16");
  if (c.ssm_heads <= 0 || inner % c.ssm_heads != 0 || inner / c.ssm_heads > 1024) {
    fail("ssm.inner_size must be ssm.time_step_rank heads of at most 1024");
  }
  c.ssm_head_dim = inner / c.ssm_heads;
  if (c.ssm_groups <= 0 || c.ssm_heads % c.ssm_groups != 0) fail("ssm.group_count must divide the heads");
  if (c.ssm_state <= 0 || c.ssm_state > 4096) fail("ssm.state_size must be in 1..4096");
  // llama.cpp ropes a granitehybrid file only when this says so (Bamba's).
  if (file_.find_bool(p + "rope.scaling.finetuned").value_or(true)) {
    throw Error(Errc::unsupported, file_.path() + ": RoPE in a granitehybrid file (rope.scaling.finetuned) is not "
                                                  "supported; Granite 4.0-H's attention has none");
  }
  c.nope_layers.assign(static_cast<size_t>(c.n_layer), 1);
  const int64_t shared = file_.get_u32(p + "expert_shared_feed_forward_length");
  if (shared <= 0) fail("expert_shared_feed_forward_length must be positive");
  if (c.n_expert > 0) {
    c.n_ff_shared = shared;
  } else {
    c.n_ff = shared;  // Granite 4.0-H-Micro: the shared MLP is the FFN
  }
}

void GgufModel::bind_granite_hybrid_layer(const std::string& b, int64_t il, LayerWeights& l) {
  const ModelConfig& c = config_;
  const int64_t e = c.n_embd;
  l.attn_norm = vector(b + "attn_norm.weight", e);
  l.ffn_norm = vector(b + "ffn_norm.weight", e);
  if (c.is_recurrent(il)) {
    const kernels::Mamba2Shape g = c.mamba2_shape();
    l.ssm_in = matrix(b + "ssm_in.weight", e, g.proj_width());
    l.ssm_conv = conv_taps(b + "ssm_conv1d.weight", g.taps, g.conv_dim());
    l.ssm_conv_b = vector(b + "ssm_conv1d.bias", g.conv_dim(), /*required=*/false);
    l.ssm_dt_bias = vector(b + "ssm_dt.bias", g.n_heads);
    l.ssm_a = f32_tensor(b + "ssm_a", {1, g.n_heads});
    l.ssm_d = f32_tensor(b + "ssm_d", {1, g.n_heads});
    // {inner / groups, groups}; llama.cpp's own writers drop a trailing
    // group count of 1.
    const std::string norm = b + "ssm_norm.weight";
    l.ssm_norm = g.n_groups == 1 && file_.tensor(norm).shape.size() == 1
                     ? f32_tensor(norm, {g.inner()})
                     : f32_tensor(norm, {g.inner() / g.n_groups, g.n_groups});
    l.wo = matrix(b + "ssm_out.weight", g.inner(), e);
  } else {
    l.wq = matrix(b + "attn_q.weight", e, c.q_dim());
    l.wk = matrix(b + "attn_k.weight", e, c.kv_dim());
    l.wv = matrix(b + "attn_v.weight", e, c.kv_dim());
    l.wo = matrix(b + "attn_output.weight", c.q_dim(), e);
  }
  if (c.n_expert > 0) {
    bind_experts(b, l);
    // The shared MLP beside the experts, ungated.
    l.shared.w_gate = matrix(b + "ffn_gate_shexp.weight", e, c.n_ff_shared);
    l.shared.w_up = matrix(b + "ffn_up_shexp.weight", e, c.n_ff_shared);
    l.shared.w_down = matrix(b + "ffn_down_shexp.weight", c.n_ff_shared, e);
    return;
  }
  l.w_gate = matrix(b + "ffn_gate.weight", e, c.n_ff);
  l.w_up = matrix(b + "ffn_up.weight", e, c.n_ff);
  l.w_down = matrix(b + "ffn_down.weight", c.n_ff, e);
}

}  // namespace troupe::gguf_load

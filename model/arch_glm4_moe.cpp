// GLM-4.5 (Glm4MoeForCausalLM, and GGUF "glm4moe" files: GLM-4.5, GLM-4.5-Air,
// GLM-4.6): Llama's pre-norm layer with biases on q, k and v, per-head q/k
// RMSNorms (use_qk_norm), RoPE on the first half of each head (in halves),
// the first first_k_dense_replace layers dense and the rest a mixture of
// experts routed as DeepSeek-V3 routes (ModelConfig::expert_sigmoid), plus
// an ungated shared expert. The multi-token-prediction layers past
// num_hidden_layers (num_nextn_predict_layers) are not read.
#include <cmath>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"

namespace troupe {
namespace {

void read_routing(const HfConfig& cfg, ModelConfig& c) {
  c.n_ff = cfg.get_int("moe_intermediate_size");
  c.n_expert = cfg.get_int("n_routed_experts");
  c.n_expert_used = cfg.get_int("num_experts_per_tok");
  if (c.n_ff <= 0 || c.n_expert <= 0 || c.n_expert_used <= 0 || c.n_expert_used > c.n_expert) {
    cfg.fail(Errc::bad_format, "moe_intermediate_size, n_routed_experts and num_experts_per_tok (at most "
                               "n_routed_experts) must be positive");
  }
  c.expert_sigmoid = true;
  c.expert_weights_norm = cfg.get_bool("norm_topk_prob", true);
  c.expert_weights_scale = static_cast<float>(cfg.get_float("routed_scaling_factor", 1.0));
  if (!(c.expert_weights_scale > 0.0f) || !std::isfinite(c.expert_weights_scale)) {
    cfg.fail(Errc::bad_format, "routed_scaling_factor must be positive");
  }
  c.n_expert_groups = cfg.get_int("n_group", 1);
  c.n_expert_groups_used = cfg.get_int("topk_group", 1);
  if (c.n_expert_groups <= 0 || c.n_expert % c.n_expert_groups != 0 || c.n_expert_groups_used <= 0 ||
      c.n_expert_groups_used > c.n_expert_groups ||
      (c.n_expert_groups > 1 && c.n_expert / c.n_expert_groups < 2) ||
      c.n_expert_groups_used * (c.n_expert / c.n_expert_groups) < c.n_expert_used) {
    cfg.fail(Errc::bad_format, "n_group must divide n_routed_experts into groups of 2 or more, and topk_group "
                               "(at most n_group) must keep num_experts_per_tok experts");
  }
  const int64_t n_shared = cfg.get_int("n_shared_experts", 1);
  if (n_shared < 0) cfg.fail(Errc::bad_format, "n_shared_experts must not be negative");
  c.n_ff_shared = n_shared * c.n_ff;
}

void load(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "glm4moe";
  read_llama_config(cfg, c);  // partial_rotary_factor (0.5) sets n_rot
  read_routing(cfg, c);
  check_config(cfg, c);
  const int64_t n_dense = cfg.get_int("first_k_dense_replace", 1);
  if (n_dense < 0 || n_dense > c.n_layer) cfg.fail(Errc::bad_format, "first_k_dense_replace is out of range");
  c.n_ff_dense = n_dense > 0 ? cfg.get_int("intermediate_size") : 0;
  const bool qkv_bias = cfg.get_bool("attention_bias", false);
  const bool qk_norm = cfg.get_bool("use_qk_norm", false);
  bind_llama_weights(src, c, {.qkv_bias = qkv_bias, .qk_norm = qk_norm, .dense_ffn = false}, w);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + ".mlp.";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    if (il < n_dense) {
      l.w_gate = src.matrix(p + "gate_proj.weight", c.n_embd, c.n_ff_dense);
      l.w_up = src.matrix(p + "up_proj.weight", c.n_embd, c.n_ff_dense);
      l.w_down = src.matrix(p + "down_proj.weight", c.n_ff_dense, c.n_embd);
      continue;
    }
    l.ffn_router = src.matrix(p + "gate.weight", c.n_embd, c.n_expert);
    l.expert_score_bias = src.vector(p + "gate.e_score_correction_bias", c.n_expert);
    l.experts.resize(static_cast<size_t>(c.n_expert));
    for (int64_t e = 0; e < c.n_expert; ++e) {
      const std::string x = p + "experts." + std::to_string(e) + ".";
      ExpertWeights& ex = l.experts[static_cast<size_t>(e)];
      ex.w_gate = src.matrix(x + "gate_proj.weight", c.n_embd, c.n_ff);
      ex.w_up = src.matrix(x + "up_proj.weight", c.n_embd, c.n_ff);
      ex.w_down = src.matrix(x + "down_proj.weight", c.n_ff, c.n_embd);
    }
    if (c.n_ff_shared > 0) {
      l.shared.w_gate = src.matrix(p + "shared_experts.gate_proj.weight", c.n_embd, c.n_ff_shared);
      l.shared.w_up = src.matrix(p + "shared_experts.up_proj.weight", c.n_embd, c.n_ff_shared);
      l.shared.w_down = src.matrix(p + "shared_experts.down_proj.weight", c.n_ff_shared, c.n_embd);
    }
  }
}

void layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::attention_block(ctx, il, kv, x, layers::Norm::rms, /*rope=*/true);  // q_norm, k_norm, biases
  if (ctx.weights.layers[static_cast<size_t>(il)].experts.empty()) {
    layers::swiglu_block(ctx, il, x);  // the first layers
  } else {
    layers::moe_block(ctx, il, x);  // and the shared expert
  }
}

}  // namespace

const Architecture arch::glm4moe{.name = "glm4moe",
                                 .hf_class = "Glm4MoeForCausalLM",
                                 .load_hf = load,
                                 .embed = layers::embed_tokens,
                                 .layer = layer,
                                 .output_norm = arch::rms_output_norm};

}  // namespace troupe

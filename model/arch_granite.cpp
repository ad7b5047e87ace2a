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
#include <cmath>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"

namespace troupe {
namespace {

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

void load(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "granite";
  read_llama_config(cfg, c);
  check_config(cfg, c);
  read_scales(cfg, c);
  const bool bias = cfg.get_bool("attention_bias", false);
  bind_llama_weights(src, c, {.qkv_bias = bias, .o_bias = bias}, w);
}

void load_moe(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
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
    const std::string p = "model.layers." + std::to_string(il) + ".block_sparse_moe.";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    const bool published = src.has(p + "input_linear.weight");
    l.ffn_router = src.matrix(p + (published ? "router.layer.weight" : "router.weight"), c.n_embd, c.n_expert);
    bind_fused_experts(src, c, p + (published ? "input_linear.weight" : "experts.gate_up_proj"),
                       p + (published ? "output_linear.weight" : "experts.down_proj"), /*interleaved=*/false, l);
  }
}

void layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::attention_block(ctx, il, kv, x, layers::Norm::rms, /*rope=*/true);  // the scales travel in config
  layers::dense_or_moe_block(ctx, il, x);                                     // GraniteMoE's experts
}

}  // namespace

const Architecture arch::granite{.name = "granite",
                                 .hf_class = "GraniteForCausalLM",
                                 .load_hf = load,
                                 .embed = layers::embed_tokens,
                                 .layer = layer,
                                 .output_norm = arch::rms_output_norm};  // divides by logit_scale
const Architecture arch::granitemoe{.name = "granitemoe",
                                    .hf_class = "GraniteMoeForCausalLM",
                                    .load_hf = load_moe,
                                    .embed = layers::embed_tokens,
                                    .layer = layer,
                                    .output_norm = arch::rms_output_norm};

}  // namespace troupe

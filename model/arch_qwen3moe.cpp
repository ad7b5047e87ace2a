// Qwen3-MoE (Qwen3MoeForCausalLM, and GGUF "qwen3moe" files: Qwen3-30B-A3B,
// Qwen3-235B-A22B): Qwen3's attention (per-head q/k RMSNorm) and, in every
// layer, a mixture of SwiGLU experts as Mixtral's, routed by a softmax over
// all experts whose top-k shares are renormalized when norm_topk_prob is set
// (as in every published Qwen3-MoE model).
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"

namespace troupe {
namespace {

void load(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "qwen3moe";
  read_llama_config(cfg, c);
  c.n_ff = cfg.get_int("moe_intermediate_size");
  // Published configs say num_experts; transformers 5 writes num_local_experts.
  c.n_expert = cfg.has("num_experts") ? cfg.get_int("num_experts") : cfg.get_int("num_local_experts");
  c.n_expert_used = cfg.get_int("num_experts_per_tok");
  if (c.n_expert <= 0 || c.n_expert_used <= 0 || c.n_expert_used > c.n_expert) {
    cfg.fail(Errc::bad_format, "num_experts_per_tok must be in 1..num_experts");
  }
  c.expert_weights_norm = cfg.get_bool("norm_topk_prob", false);  // transformers' default
  // Dense layers among the sparse ones (decoder_sparse_step > 1, or
  // mlp_only_layers) appear in no published model; refuse rather than guess.
  if (cfg.get_int("decoder_sparse_step", 1) != 1) {
    cfg.fail(Errc::unsupported, "decoder_sparse_step other than 1 (dense layers between MoE layers) is not supported");
  }
  if (cfg.has("mlp_only_layers") && !cfg.json()["mlp_only_layers"].empty()) {
    cfg.fail(Errc::unsupported, "mlp_only_layers (dense layers between MoE layers) is not supported");
  }
  if (cfg.get_bool("use_sliding_window", false)) {
    cfg.fail(Errc::unsupported, "use_sliding_window (per-layer sliding windows) is not supported");
  }
  check_config(cfg, c);
  const bool bias = cfg.get_bool("attention_bias", false);
  bind_llama_weights(src, c, {.qkv_bias = bias, .o_bias = bias, .qk_norm = true, .dense_ffn = false}, w);
  bind_experts(src, c, {.block = "mlp.", .gate = "gate_proj", .up = "up_proj", .down = "down_proj"}, w);
}

void layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::attention_block(ctx, il, kv, x, layers::Norm::rms, /*rope=*/true);  // applies q_norm, k_norm
  layers::moe_block(ctx, il, x);
}

}  // namespace

const Architecture arch::qwen3moe{.name = "qwen3moe",
                                  .hf_class = "Qwen3MoeForCausalLM",
                                  .load_hf = load,
                                  .embed = layers::embed_tokens,
                                  .layer = layer,
                                  .output_norm = arch::rms_output_norm};

}  // namespace troupe

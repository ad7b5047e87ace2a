// Qwen3-MoE (Qwen3MoeForCausalLM, and GGUF "qwen3moe" files: Qwen3-30B-A3B,
// Qwen3-235B-A22B): Qwen3's attention (per-head q/k RMSNorm) and, in every
// layer, a mixture of SwiGLU experts as Mixtral's, routed by a softmax over
// all experts whose top-k shares are renormalized when norm_topk_prob is set
// (as in every published Qwen3-MoE model).
// Qwen2-MoE (Qwen2MoeForCausalLM, GGUF "qwen2moe": Qwen1.5-MoE-A2.7B,
// Qwen2-57B-A14B): Qwen2's attention (q/k/v biases) and the same experts
// (norm_topk_prob off in the published models) plus a shared expert that
// every token runs, weighted by sigmoid(shared_expert_gate · x).
// Qwen3-VL-MoE (Qwen3VLMoeForConditionalGeneration, and GGUF "qwen3vlmoe"
// files: Qwen3-VL-30B-A3B, 235B-A22B) is the Qwen3-MoE text model under
// model.language_model.* (always renormalized, its experts fused in the
// checkpoint), loaded as qwen3moe as Qwen3-VL's is as qwen3 (arch_qwen3.cpp).
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"

namespace troupe {
namespace {

// The expert keys both generations spell alike.
void read_moe_config(const HfConfig& cfg, ModelConfig& c) {
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
}

constexpr ExpertTensorNames kQwenMoeExperts{.block = "mlp.", .gate = "gate_proj", .up = "up_proj", .down = "down_proj"};

void load_qwen3moe(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "qwen3moe";
  read_moe_config(cfg, c);
  const bool bias = cfg.get_bool("attention_bias", false);
  bind_llama_weights(src, c, {.qkv_bias = bias, .o_bias = bias, .qk_norm = true, .dense_ffn = false}, w);
  bind_experts(src, c, kQwenMoeExperts, w);
}

void load_qwen3vl_moe(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  src.rename_prefix("model.", "model.language_model.");
  load_qwen3moe(text_config_of(cfg), src, c, w);
  src.rename_prefix("", "");
  c.expert_weights_norm = true;  // its router renormalizes the top k, with no key to say so
}

void load_qwen2moe(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "qwen2moe";
  read_moe_config(cfg, c);
  c.n_ff_shared = cfg.get_int("shared_expert_intermediate_size");
  if (c.n_ff_shared <= 0) cfg.fail(Errc::bad_format, "shared_expert_intermediate_size must be positive");
  bind_llama_weights(src, c, {.qkv_bias = cfg.get_bool("qkv_bias", true), .dense_ffn = false}, w);
  bind_experts(src, c, kQwenMoeExperts, w);
  for (int64_t il = 0; il < c.n_layer; ++il) {
    const std::string p = "model.layers." + std::to_string(il) + ".mlp.shared_expert";
    LayerWeights& l = w.layers[static_cast<size_t>(il)];
    l.shared.w_gate = src.matrix(p + ".gate_proj.weight", c.n_embd, c.n_ff_shared);
    l.shared.w_up = src.matrix(p + ".up_proj.weight", c.n_embd, c.n_ff_shared);
    l.shared.w_down = src.matrix(p + ".down_proj.weight", c.n_ff_shared, c.n_embd);
    l.shared_gate = src.matrix(p + "_gate.weight", c.n_embd, 1);
  }
}

void qwen_moe_layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::attention_block(ctx, il, kv, x, layers::Norm::rms, /*rope=*/true);  // q_norm, k_norm, biases
  layers::moe_block(ctx, il, x);                                              // and the shared expert
}

}  // namespace

const Architecture arch::qwen2moe{.name = "qwen2moe",
                                  .hf_class = "Qwen2MoeForCausalLM",
                                  .load_hf = load_qwen2moe,
                                  .embed = layers::embed_tokens,
                                  .layer = qwen_moe_layer,
                                  .output_norm = arch::rms_output_norm};

const Architecture arch::qwen3moe{.name = "qwen3moe",
                                  .hf_class = "Qwen3MoeForCausalLM",
                                  .load_hf = load_qwen3moe,
                                  .embed = layers::embed_tokens,
                                  .layer = qwen_moe_layer,
                                  .output_norm = arch::rms_output_norm};
// Found by class only: the model it loads is "qwen3moe".
const Architecture arch::qwen3_vl_moe{.name = "qwen3-vl-moe",
                                      .hf_class = "Qwen3VLMoeForConditionalGeneration",
                                      .load_hf = load_qwen3vl_moe,
                                      .embed = layers::embed_tokens,
                                      .layer = qwen_moe_layer,
                                      .output_norm = arch::rms_output_norm};

}  // namespace troupe

// ERNIE 4.5 (Ernie4_5ForCausalLM: ERNIE-4.5-0.3B; Ernie4_5_MoeForCausalLM:
// ERNIE-4.5-21B-A3B, 300B-A47B; GGUF "ernie4_5" and "ernie4_5-moe"): the
// Llama layer with RoPE in adjacent pairs (GLM's interleaved rotation, no
// permutation in either format) and, in the MoE models, experts on every
// moe_layer_interval-th layer from moe_layer_start_index to
// moe_layer_end_index (dense layers elsewhere), routed by a softmax whose
// top k are chosen by score + e_score_correction_bias and renormalized,
// beside moe_num_shared_experts ungated shared experts.
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"

namespace troupe {
namespace {

void read_dense(const HfConfig& cfg, ModelConfig& c, const char* arch) {
  c.arch = arch;
  read_llama_config(cfg, c);
  c.rope_layout = kernels::RopeLayout::normal;
  if (cfg.get_bool("use_bias", false)) cfg.fail(Errc::unsupported, "use_bias is not supported");
}

void load_dense(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  read_dense(cfg, c, "ernie4_5");
  check_config(cfg, c);
  bind_llama_weights(src, c, {}, w);
}

// The spelling the published configs use (moe_num_experts, moe_k) or the
// one transformers 5 writes (num_experts, num_experts_per_tok).
int64_t int_either(const HfConfig& cfg, const char* a, const char* b) {
  return cfg.has(a) ? cfg.get_int(a) : cfg.get_int(b);
}

void load_ernie_moe(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  read_dense(cfg, c, "ernie4_5-moe");
  c.n_ff_dense = c.n_ff;
  c.n_ff = cfg.get_int("moe_intermediate_size");
  c.n_expert = int_either(cfg, "moe_num_experts", "num_experts");
  c.n_expert_used = int_either(cfg, "moe_k", "num_experts_per_tok");
  if (c.n_ff <= 0 || c.n_expert <= 0 || c.n_expert_used <= 0 || c.n_expert_used > c.n_expert) {
    cfg.fail(Errc::bad_format, "moe_intermediate_size, the expert count and moe_k (at most the experts) must be "
                               "positive");
  }
  c.expert_router = ModelConfig::ExpertRouter::deepseek_softmax;
  c.expert_weights_norm = true;
  const int64_t n_shared = cfg.get_int("moe_num_shared_experts", 0);
  if (n_shared < 0) cfg.fail(Errc::bad_format, "moe_num_shared_experts must not be negative");
  c.n_ff_shared = n_shared * c.n_ff;
  const int64_t start = cfg.get_int("moe_layer_start_index", 1);
  int64_t end = cfg.get_int("moe_layer_end_index", -1);
  if (end == -1) end = c.n_layer - 1;
  const int64_t interval = cfg.get_int("moe_layer_interval", 1);
  if (start < 0 || interval <= 0) cfg.fail(Errc::bad_format, "moe_layer_start_index and moe_layer_interval are out of range");
  check_config(cfg, c);
  bind_llama_weights(src, c, {.dense_ffn = false}, w);
  bind_deepseek_ffn(src, c,
                    {.is_moe = [&](int64_t il) { return (il + 1) % interval == 0 && il >= start && il <= end; },
                     .score_bias = "moe_statics.e_score_correction_bias",
                     .bias_row = true},
                    w);
}

void ernie_layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::attention_block(ctx, il, kv, x, layers::Norm::rms, /*rope=*/true);
  layers::dense_or_moe_block(ctx, il, x);  // dense first layers, then experts and the shared ones
}

}  // namespace

const Architecture arch::ernie4_5{.name = "ernie4_5",
                                  .hf_class = "Ernie4_5ForCausalLM",
                                  .load_hf = load_dense,
                                  .embed = layers::embed_tokens,
                                  .layer = ernie_layer,
                                  .output_norm = arch::rms_output_norm};

const Architecture arch::ernie4_5_moe{.name = "ernie4_5-moe",
                                      .hf_class = "Ernie4_5_MoeForCausalLM",
                                      .load_hf = load_ernie_moe,
                                      .embed = layers::embed_tokens,
                                      .layer = ernie_layer,
                                      .output_norm = arch::rms_output_norm};

}  // namespace troupe

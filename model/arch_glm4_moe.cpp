// GLM-4.5 (Glm4MoeForCausalLM, and GGUF "glm4moe" files: GLM-4.5, GLM-4.5-Air,
// GLM-4.6): Llama's pre-norm layer with biases on q, k and v, per-head q/k
// RMSNorms (use_qk_norm), RoPE on the first half of each head (in halves),
// the first first_k_dense_replace layers dense and the rest a mixture of
// experts routed as DeepSeek-V3 routes (ExpertRouter::deepseek_sigmoid), plus
// an ungated shared expert. The multi-token-prediction layers past
// num_hidden_layers (num_nextn_predict_layers) are not read.
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"

namespace troupe {
namespace {

void load_glm4_moe(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "glm4moe";
  read_llama_config(cfg, c);  // partial_rotary_factor (0.5) sets n_rot
  read_deepseek_moe_config(cfg, c, ModelConfig::ExpertRouter::deepseek_sigmoid);
  check_config(cfg, c);
  const int64_t n_dense = cfg.get_int("first_k_dense_replace", 1);
  if (n_dense < 0 || n_dense > c.n_layer) cfg.fail(Errc::bad_format, "first_k_dense_replace is out of range");
  c.n_ff_dense = n_dense > 0 ? cfg.get_int("intermediate_size") : 0;
  const bool qkv_bias = cfg.get_bool("attention_bias", false);
  const bool qk_norm = cfg.get_bool("use_qk_norm", false);
  bind_llama_weights(src, c, {.qkv_bias = qkv_bias, .qk_norm = qk_norm, .dense_ffn = false}, w);
  bind_deepseek_ffn(src, c, {.is_moe = [&](int64_t il) { return il >= n_dense; }, .score_bias = "gate.e_score_correction_bias"},
                    w);
}

void glm4_moe_layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::attention_block(ctx, il, kv, x, layers::Norm::rms, /*rope=*/true);  // q_norm, k_norm, biases
  layers::dense_or_moe_block(ctx, il, x);  // dense first layers, then experts and the shared ones
}

}  // namespace

const Architecture arch::glm4moe{.name = "glm4moe",
                                 .hf_class = "Glm4MoeForCausalLM",
                                 .load_hf = load_glm4_moe,
                                 .embed = layers::embed_tokens,
                                 .layer = glm4_moe_layer,
                                 .output_norm = arch::rms_output_norm};

}  // namespace troupe

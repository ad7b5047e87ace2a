// Llama (LlamaForCausalLM, and GGUF "llama" files: Llama 2/3, TinyLlama,
// SmolLM2): pre-norm decoder with RMSNorm, grouped-query attention with RoPE
// (optionally with biases: config attention_bias, and attention_out_bias for
// o_proj where it differs) and a SwiGLU FFN. Seed-OSS (SeedOssForCausalLM,
// and GGUF "seed_oss" files) is this layer with q/k/v biases.
#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"

namespace troupe {
namespace {

void load_llama(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "llama";
  read_llama_config(cfg, c);
  check_config(cfg, c);
  const bool bias = cfg.get_bool("attention_bias", false);
  bind_llama_weights(src, c, {.qkv_bias = bias, .o_bias = cfg.get_bool("attention_out_bias", bias)}, w);
}

void llama_layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::attention_block(ctx, il, kv, x, layers::Norm::rms, /*rope=*/true);
  layers::swiglu_block(ctx, il, x);
}

}  // namespace

const Architecture arch::llama{.name = "llama",
                               .hf_class = "LlamaForCausalLM",
                               .hf_class_also = "SeedOssForCausalLM",
                               .load_hf = load_llama,
                               .embed = layers::embed_tokens,
                               .layer = llama_layer,
                               .output_norm = arch::rms_output_norm};

}  // namespace troupe

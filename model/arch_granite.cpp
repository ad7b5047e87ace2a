// Granite (GraniteForCausalLM, and GGUF "granite" files: IBM Granite 3.x
// dense models): the Llama layer with four scalars from the config: token
// embeddings times embedding_multiplier, QK^T times attention_multiplier
// (not 1/sqrt(head_dim)), each block's output times residual_multiplier
// before the residual add, and the logits divided by logits_scaling.
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

void load(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "granite";
  read_llama_config(cfg, c);
  check_config(cfg, c);
  c.embed_scale = positive(cfg, "embedding_multiplier", 1.0);
  c.residual_scale = positive(cfg, "residual_multiplier", 1.0);
  c.attn_scale = positive(cfg, "attention_multiplier", 1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  c.logit_scale = positive(cfg, "logits_scaling", 1.0);
  const bool bias = cfg.get_bool("attention_bias", false);
  bind_llama_weights(src, c, {.qkv_bias = bias, .o_bias = bias}, w);
}

void layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::attention_block(ctx, il, kv, x, layers::Norm::rms, /*rope=*/true);  // the scales travel in config
  layers::swiglu_block(ctx, il, x);
}

}  // namespace

const Architecture arch::granite{.name = "granite",
                                 .hf_class = "GraniteForCausalLM",
                                 .load_hf = load,
                                 .embed = layers::embed_tokens,
                                 .layer = layer,
                                 .output_norm = arch::rms_output_norm};  // divides by logit_scale

}  // namespace troupe

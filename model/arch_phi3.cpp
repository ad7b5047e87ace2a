// Phi-3 (Phi3ForCausalLM, and GGUF "phi3" files: Phi-3-mini/medium,
// Phi-3.5-mini, Phi-4, Phi-4-mini): the Llama layer with Q, K and V in one
// projection (qkv_proj) and the FFN's gate and up in one (gate_up_proj, gate
// first), an optional sliding window, and RoPE over the first
// partial_rotary_factor of each head. LongRoPE (Phi-3.5, Phi-4-mini, the 128k
// variants) comes from the RoPE reader (hf_config.cpp).
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"

namespace troupe {
namespace {

void load_phi3(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "phi3";
  read_llama_config(cfg, c);
  check_config(cfg, c);
  const int64_t window = cfg.get_int("sliding_window", 0);  // null: full attention
  if (window < 0 || window > INT32_MAX) cfg.fail(Errc::bad_format, "sliding_window is out of range");
  c.sliding_window = static_cast<int32_t>(window);

  bind_llama_weights(src, c, {.fused = true}, w);
}

void phi3_layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::attention_block(ctx, il, kv, x, layers::Norm::rms, /*rope=*/true);  // the window travels in config
  layers::swiglu_block(ctx, il, x);
}

}  // namespace

const Architecture arch::phi3{.name = "phi3",
                              .hf_class = "Phi3ForCausalLM",
                              .load_hf = load_phi3,
                              .embed = layers::embed_tokens,
                              .layer = phi3_layer,
                              .output_norm = arch::rms_output_norm};

}  // namespace troupe

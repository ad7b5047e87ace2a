// Mistral (MistralForCausalLM): the Llama layer with sliding-window
// attention; each query sees only the last `sliding_window` positions.
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"

namespace troupe {
namespace {

void load(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "mistral";
  read_llama_config(cfg, c);
  check_config(cfg, c);
  const int64_t window = cfg.get_int("sliding_window", 0);  // null: full attention
  if (window < 0 || window > INT32_MAX) cfg.fail(Errc::bad_format, "sliding_window " + std::to_string(window) + " is out of range");
  c.sliding_window = static_cast<int32_t>(window);
  bind_llama_weights(src, c, {}, w);
}

void layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::attention_block(ctx, il, kv, x, layers::Norm::rms, /*rope=*/true);  // the window travels in config
  layers::swiglu_block(ctx, il, x);
}

}  // namespace

const Architecture arch::mistral{.name = "mistral",
                                 .hf_class = "MistralForCausalLM",
                                 .load_hf = load,
                                 .embed = layers::embed_tokens,
                                 .layer = layer,
                                 .output_norm = arch::rms_output_norm};

}  // namespace troupe

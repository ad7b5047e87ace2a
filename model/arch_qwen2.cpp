// Qwen2 (Qwen2ForCausalLM): the Llama layer with biases on the Q, K and V
// projections (not on the output projection).
#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"

namespace troupe {
namespace {

void load_qwen2(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "qwen2";
  read_llama_config(cfg, c);
  check_config(cfg, c);
  // Qwen2's optional per-layer sliding window (layers past max_window_layers)
  // is off in the published models; refuse it rather than ignore it.
  if (cfg.get_bool("use_sliding_window", false)) {
    cfg.fail(Errc::unsupported, "use_sliding_window (per-layer sliding windows) is not supported");
  }
  bind_llama_weights(src, c, {.qkv_bias = true}, w);
}

void qwen2_layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::attention_block(ctx, il, kv, x, layers::Norm::rms, /*rope=*/true);  // adds bq, bk, bv
  layers::swiglu_block(ctx, il, x);
}

}  // namespace

const Architecture arch::qwen2{.name = "qwen2",
                               .hf_class = "Qwen2ForCausalLM",
                               .load_hf = load_qwen2,
                               .embed = layers::embed_tokens,
                               .layer = qwen2_layer,
                               .output_norm = arch::rms_output_norm};

}  // namespace troupe

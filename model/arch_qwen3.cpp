// Qwen3 (Qwen3ForCausalLM): the Llama layer with an RMSNorm over each
// query and key head (weights [head_dim]) before RoPE, and a head_dim that
// need not be hidden_size / num_attention_heads.
// Qwen3-VL (Qwen3VLForConditionalGeneration, and GGUF "qwen3vl" files) is
// this text model under model.language_model.* beside a vision tower (not
// read). Its multimodal RoPE gives a text token's three position axes the
// same value, which makes it this RoPE: text prompts run as Qwen3.
#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"

namespace troupe {
namespace {

void load_qwen3(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "qwen3";
  read_llama_config(cfg, c);
  check_config(cfg, c);
  if (cfg.get_bool("use_sliding_window", false)) {
    cfg.fail(Errc::unsupported, "use_sliding_window (per-layer sliding windows) is not supported");
  }
  const bool bias = cfg.get_bool("attention_bias", false);
  bind_llama_weights(src, c, {.qkv_bias = bias, .o_bias = bias, .qk_norm = true}, w);
}

void load_vl(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  src.rename_prefix("model.", "model.language_model.");
  load_qwen3(text_config_of(cfg), src, c, w);
  src.rename_prefix("", "");
}

void qwen3_layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::attention_block(ctx, il, kv, x, layers::Norm::rms, /*rope=*/true);  // applies q_norm, k_norm
  layers::swiglu_block(ctx, il, x);
}

}  // namespace

const Architecture arch::qwen3{.name = "qwen3",
                               .hf_class = "Qwen3ForCausalLM",
                               .load_hf = load_qwen3,
                               .embed = layers::embed_tokens,
                               .layer = qwen3_layer,
                               .output_norm = arch::rms_output_norm};
// Found by class only: the model it loads is "qwen3".
const Architecture arch::qwen3_vl{.name = "qwen3-vl",
                                  .hf_class = "Qwen3VLForConditionalGeneration",
                                  .load_hf = load_vl,
                                  .embed = layers::embed_tokens,
                                  .layer = qwen3_layer,
                                  .output_norm = arch::rms_output_norm};

}  // namespace troupe

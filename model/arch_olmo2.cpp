// OLMo 2 (Olmo2ForCausalLM, and GGUF "olmo2" files: OLMo-2 1B-32B): the
// Llama layer with its norms moved after each block (x += norm(f(x)), no
// norm before) and RMSNorms over each token's whole q and k projections
// before RoPE. OLMo 3 (Olmo3ForCausalLM; GGUF "olmo2" files with a sliding
// window) is the same layer with local layers: a sliding window (three of
// every four in the published models) and plain RoPE at the global base,
// while the global layers keep the RoPE scaling (YaRN in the 32K models).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"

namespace troupe {
namespace {

bool is_olmo3(const HfConfig& cfg) {
  const nlohmann::json& names = cfg.json().contains("architectures") ? cfg.json()["architectures"] : nlohmann::json();
  return names.is_array() && !names.empty() && names[0] == "Olmo3ForCausalLM";
}

void load_olmo2(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "olmo2";
  if (is_olmo3(cfg)) {
    read_decoder_sizes(cfg, c);
    const std::string act = cfg.get_string("hidden_act", "silu");
    if (act != "silu") cfg.fail(Errc::unsupported, "hidden_act '" + act + "' is not supported; supported: silu");
    read_layer_kinds(cfg, c, 4);
    read_layer_kind_rope(cfg, c, std::nullopt);
  } else {
    read_llama_config(cfg, c);
    // Olmo2Config has no window: a file naming one is not what it says.
    if (cfg.has("sliding_window")) cfg.fail(Errc::unsupported, "sliding_window needs Olmo3ForCausalLM");
  }
  check_config(cfg, c);
  c.qk_norm_whole = true;
  if (cfg.get_bool("attention_bias", false)) cfg.fail(Errc::unsupported, "attention_bias is not supported");
  bind_post_norm_weights(src, c, w);
}

void olmo2_layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::post_norm_attention_block(ctx, il, kv, x);
  layers::post_norm_swiglu_block(ctx, il, x);
}

}  // namespace

const Architecture arch::olmo2{.name = "olmo2",
                               .hf_class = "Olmo2ForCausalLM",
                               .hf_class_also = "Olmo3ForCausalLM",
                               .load_hf = load_olmo2,
                               .embed = layers::embed_tokens,
                               .layer = olmo2_layer,
                               .output_norm = arch::rms_output_norm};

}  // namespace troupe

// EXAONE 4 (Exaone4ForCausalLM, and GGUF "exaone4" files: EXAONE-4.0-1.2B,
// EXAONE-4.0-32B): OLMo 2's post-norm layer (x += norm(f(x)), no norm
// before) with per-head q/k RMSNorms, and, where the config names a sliding
// window, local layers (three of every four in the 32B model) that rope as
// the model does (its llama3 scaling included) while the global layers
// attend without RoPE. Without a window every layer ropes (the 1.2B model).
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"

namespace troupe {
namespace {

// Which layers are local: layer_types, else sliding_window_pattern as an
// integer period or a string such as "LLLG" repeated from layer 0.
void read_exaone_layers(const HfConfig& cfg, ModelConfig& c) {
  if (!cfg.has("layer_types") && cfg.has("sliding_window_pattern") &&
      cfg.json()["sliding_window_pattern"].is_string()) {
    const std::string pattern = cfg.get_string("sliding_window_pattern", "");
    if (pattern.empty() || pattern.find_first_not_of("LG") != std::string::npos) {
      cfg.fail(Errc::bad_format, "sliding_window_pattern must be a string of L and G");
    }
    c.local_layers.assign(static_cast<size_t>(c.n_layer), 0);
    for (int64_t il = 0; il < c.n_layer; ++il) {
      c.local_layers[static_cast<size_t>(il)] = pattern[static_cast<size_t>(il) % pattern.size()] == 'L';
    }
    const int64_t window = cfg.get_int("sliding_window");
    if (window <= 0 || window > INT32_MAX) cfg.fail(Errc::bad_format, "sliding_window must be positive");
    c.sliding_window = static_cast<int32_t>(window);
  } else {
    read_layer_kinds(cfg, c, 4);
  }
  c.local_layers_share_rope = true;
  c.nope_layers.assign(static_cast<size_t>(c.n_layer), 0);
  for (int64_t il = 0; il < c.n_layer; ++il) c.nope_layers[static_cast<size_t>(il)] = !c.is_local(il);
}

void load_exaone4(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "exaone4";
  read_llama_config(cfg, c);
  check_config(cfg, c);
  if (cfg.has("sliding_window")) read_exaone_layers(cfg, c);
  bind_post_norm_weights(src, c, w);
}

void exaone4_layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::post_norm_attention_block(ctx, il, kv, x);  // RoPE where ModelConfig::ropes(il)
  layers::post_norm_swiglu_block(ctx, il, x);
}

}  // namespace

const Architecture arch::exaone4{.name = "exaone4",
                                 .hf_class = "Exaone4ForCausalLM",
                                 .load_hf = load_exaone4,
                                 .embed = layers::embed_tokens,
                                 .layer = exaone4_layer,
                                 .output_norm = arch::rms_output_norm};

}  // namespace troupe

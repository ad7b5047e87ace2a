// SmolLM3 (SmolLM3ForCausalLM, and GGUF "smollm3" files): the Llama layer
// with RoPE left out of some layers (NoPE; every fourth in SmolLM3-3B, as
// no_rope_layers lists them) and, when use_sliding_window is set, a sliding
// window on the layers layer_types calls sliding_attention.
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"

namespace troupe {
namespace {

using Json = nlohmann::json;

// Per layer, 1 or 0 from a list the size of the model (layer_types: the
// names given), else fallback(il).
template <class F>
std::vector<uint8_t> per_layer(const HfConfig& cfg, const ModelConfig& c, const char* key, F&& fallback) {
  std::vector<uint8_t> out(static_cast<size_t>(c.n_layer));
  if (!cfg.has(key)) {
    for (int64_t il = 0; il < c.n_layer; ++il) out[static_cast<size_t>(il)] = fallback(il) ? 1 : 0;
    return out;
  }
  const Json& list = cfg.json()[key];
  if (!list.is_array() || static_cast<int64_t>(list.size()) != c.n_layer) {
    cfg.fail(Errc::bad_format, std::string(key) + " must list num_hidden_layers entries");
  }
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].is_number_integer() && (list[i] == 0 || list[i] == 1)) {
      out[i] = list[i].get<int>() != 0;
    } else if (list[i] == "sliding_attention" || list[i] == "full_attention") {
      out[i] = list[i] == "sliding_attention";
    } else {
      cfg.fail(Errc::bad_format, std::string(key) + "[" + std::to_string(i) + "] is not 0, 1, "
                                 "\"sliding_attention\" or \"full_attention\"");
    }
  }
  return out;
}

void load_smollm3(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "smollm3";
  read_llama_config(cfg, c);
  check_config(cfg, c);
  const int64_t interval = cfg.get_int("no_rope_layer_interval", 4);
  if (interval <= 0) cfg.fail(Errc::bad_format, "no_rope_layer_interval must be positive");
  // no_rope_layers: 1 where the layer uses RoPE (transformers' meaning).
  const std::vector<uint8_t> ropes =
      per_layer(cfg, c, "no_rope_layers", [&](int64_t il) { return (il + 1) % interval != 0; });
  c.nope_layers.resize(ropes.size());
  for (size_t i = 0; i < ropes.size(); ++i) c.nope_layers[i] = ropes[i] == 0;
  if (cfg.get_bool("use_sliding_window", false) && cfg.has("sliding_window")) {
    const int64_t window = cfg.get_int("sliding_window");
    if (window <= 0 || window > INT32_MAX) cfg.fail(Errc::bad_format, "sliding_window is out of range");
    c.sliding_window = static_cast<int32_t>(window);
    // transformers' default: NoPE layers slide.
    c.local_layers = per_layer(cfg, c, "layer_types", [&](int64_t il) { return !c.ropes(il); });
    c.rope_local_theta = c.rope_theta;
    if (c.rope_freq_scale != 1.0f || !c.rope_freq_factors.empty()) {
      cfg.fail(Errc::unsupported, "SmolLM3 with sliding layers and RoPE scaling is not supported");
    }
  }
  if (cfg.get_bool("mlp_bias", false)) cfg.fail(Errc::unsupported, "mlp_bias is not supported");
  const bool bias = cfg.get_bool("attention_bias", false);
  bind_llama_weights(src, c, {.qkv_bias = bias, .o_bias = bias}, w);
}

void smollm3_layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::attention_block(ctx, il, kv, x, layers::Norm::rms, /*rope=*/ctx.config.ropes(il));
  layers::swiglu_block(ctx, il, x);
}

}  // namespace

const Architecture arch::smollm3{.name = "smollm3",
                                 .hf_class = "SmolLM3ForCausalLM",
                                 .load_hf = load_smollm3,
                                 .embed = layers::embed_tokens,
                                 .layer = smollm3_layer,
                                 .output_norm = arch::rms_output_norm};

}  // namespace troupe

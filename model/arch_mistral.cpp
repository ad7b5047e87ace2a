// Mistral (MistralForCausalLM): the Llama layer with sliding-window
// attention; each query sees only the last `sliding_window` positions.
// Ministral 3 (Ministral3ForCausalLM, and GGUF "mistral3" files: Ministral 3
// 3B/8B/14B): the same layer with YaRN and Llama 4's attention temperature
// (ModelConfig::attn_temp_beta). Mistral Small 3.1/3.2, Magistral, Devstral
// and Ministral 3 are published as Mistral3ForConditionalGeneration: one of
// those text models under language_model.*, its config in "text_config"
// (the vision tower is not read).
#include <cmath>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"

namespace troupe {
namespace {

using Json = nlohmann::json;

void load_mistral(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  c.arch = "mistral";
  read_llama_config(cfg, c);
  check_config(cfg, c);
  const int64_t window = cfg.get_int("sliding_window", 0);  // null: full attention
  if (window < 0 || window > INT32_MAX) cfg.fail(Errc::bad_format, "sliding_window " + std::to_string(window) + " is out of range");
  c.sliding_window = static_cast<int32_t>(window);
  bind_llama_weights(src, c, {}, w);
}

// Mistral's loading plus the attention temperature, whose beta sits among
// the rope settings (llama_4_scaling_beta) with the original context as its
// step (original_max_position_embeddings).
void load_ministral3(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  load_mistral(cfg, src, c, w);
  c.arch = "ministral3";
  const char* key = cfg.has("rope_parameters") ? "rope_parameters" : "rope_scaling";
  const Json& rope = cfg.has(key) ? cfg.json()[key] : Json();
  if (rope.is_object() && rope.contains("llama_4_scaling_beta") && !rope["llama_4_scaling_beta"].is_null()) {
    const HfConfig r(rope, cfg.path() + " (" + key + ")");
    c.attn_temp_beta = static_cast<float>(r.get_float("llama_4_scaling_beta"));
    c.attn_temp_floor = r.get_int("original_max_position_embeddings");
    if (!std::isfinite(c.attn_temp_beta) || c.attn_temp_floor <= 0) {
      cfg.fail(Errc::bad_format, "llama_4_scaling_beta needs a finite beta and a positive "
                                 "original_max_position_embeddings");
    }
  }
}

// Mistral3ForConditionalGeneration: the text model of text_config
// ("mistral" or "ministral3"), its tensors under language_model.*. The head
// is tied as the top level says (transformers ties by it), else as the
// text config says.
void load_mistral3_multimodal(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  const HfConfig text_cfg = text_config_of(cfg);
  const std::string type = text_cfg.get_string("model_type", "mistral");
  src.rename_prefix("", "language_model.");
  if (type == "mistral") {
    load_mistral(text_cfg, src, c, w);
  } else if (type == "ministral3") {
    load_ministral3(text_cfg, src, c, w);
  } else {
    cfg.fail(Errc::unsupported, "text_config model_type '" + type + "' is not supported; supported: mistral, "
                                "ministral3");
  }
  src.rename_prefix("", "");
}

void mistral_layer(const layers::StepContext& ctx, int64_t il, const PagedKvView& kv, float* x) {
  layers::attention_block(ctx, il, kv, x, layers::Norm::rms, /*rope=*/true);  // the window travels in config
  layers::swiglu_block(ctx, il, x);
}

}  // namespace

const Architecture arch::mistral{.name = "mistral",
                                 .hf_class = "MistralForCausalLM",
                                 .load_hf = load_mistral,
                                 .embed = layers::embed_tokens,
                                 .layer = mistral_layer,
                                 .output_norm = arch::rms_output_norm};
const Architecture arch::ministral3{.name = "ministral3",
                                    .hf_class = "Ministral3ForCausalLM",
                                    .load_hf = load_ministral3,
                                    .embed = layers::embed_tokens,
                                    .layer = mistral_layer,
                                    .output_norm = arch::rms_output_norm};
// Registered under its own name only to be found by class: the model it
// loads is "mistral" or "ministral3".
const Architecture arch::mistral3_multimodal{.name = "mistral3-multimodal",
                                             .hf_class = "Mistral3ForConditionalGeneration",
                                             .load_hf = load_mistral3_multimodal,
                                             .embed = layers::embed_tokens,
                                             .layer = mistral_layer,
                                             .output_norm = arch::rms_output_norm};

}  // namespace troupe

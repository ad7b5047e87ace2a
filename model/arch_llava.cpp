// LLaVA (LlavaForConditionalGeneration: LLaVA-1.5, BakLLaVA,
// LLaVA-Interleave): a text model of its own architecture (text_config's
// model_type: Llama, Mistral, Qwen2, Qwen3) beside a CLIP or SigLIP vision
// tower. This loads the text model, under language_model.* (the published
// checkpoints, and what transformers 5 saves) or model.language_model.*
// (transformers 4.5x's save); the vision tower and the projector are the
// vision library's (vision/vision_model.hpp).
#include <string>
#include <utility>

#include "core/error.hpp"
#include "model/architecture.hpp"
#include "model/hf_config.hpp"
#include "model/hf_weights.hpp"

namespace troupe {
namespace {

// text_config's model_type -> the class whose loader reads it.
constexpr std::pair<std::string_view, std::string_view> kTextClasses[] = {
    {"llama", "LlamaForCausalLM"},
    {"mistral", "MistralForCausalLM"},
    {"qwen2", "Qwen2ForCausalLM"},
    {"qwen3", "Qwen3ForCausalLM"},
};

void load_llava(const HfConfig& cfg, HfWeights& src, ModelConfig& c, ModelWeights& w) {
  const HfConfig text = text_config_of(cfg);
  const std::string type = text.get_string("model_type", "llama");
  const Architecture* arch = nullptr;
  std::string supported;
  for (const auto& [t, cls] : kTextClasses) {
    supported += (supported.empty() ? "" : ", ") + std::string(t);
    if (t == type) arch = find_hf_architecture(cls);
  }
  if (arch == nullptr) {
    cfg.fail(Errc::unsupported, "text_config model_type '" + type + "' is not supported; supported: " + supported);
  }
  if (src.has("language_model.model.embed_tokens.weight")) {
    src.rename_prefix("", "language_model.");
  } else {
    src.rename_prefix("model.", "model.language_model.");
  }
  arch->load_hf(text, src, c, w);
  src.rename_prefix("", "");
}

// Never run: a loaded model's config names its text architecture.
void llava_layer(const layers::StepContext&, int64_t, const PagedKvView&, float*) {
  throw Error(Errc::internal, "llava-multimodal only loads; its text model runs as its own architecture");
}

}  // namespace

// Registered under its own name only to be found by class: the model it
// loads is its text model's architecture.
const Architecture arch::llava_multimodal{.name = "llava-multimodal",
                                          .hf_class = "LlavaForConditionalGeneration",
                                          .load_hf = load_llava,
                                          .embed = layers::embed_tokens,
                                          .layer = llava_layer,
                                          .output_norm = arch::rms_output_norm};

}  // namespace troupe

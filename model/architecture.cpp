// The architecture registry: an explicit list (self-registering statics get
// dropped from static libraries), searched by name or config.json class.
#include "model/architecture.hpp"

#include "core/error.hpp"

namespace troupe {
namespace {

const Architecture* const kAll[] = {&arch::llama,    &arch::mistral,  &arch::qwen2,  &arch::qwen3,
                                    &arch::mixtral,  &arch::qwen2moe, &arch::qwen3moe, &arch::gemma2,
                                    &arch::gemma3,   &arch::phi3,     &arch::smollm3, &arch::olmo2,
                                    &arch::granite,  &arch::starcoder2, &arch::gpt2,
                                    &arch::gpt_oss,  &arch::glm4,
                                    &arch::glm4moe,  &arch::exaone4,  &arch::deepseek2,
                                    &arch::deepseek3, &arch::ernie4_5, &arch::ernie4_5_moe,
                                    &arch::command_r, &arch::cohere2, &arch::lfm2, &arch::lfm2moe,
                                    &arch::ministral3, &arch::mistral3_multimodal, &arch::llava_multimodal, &arch::qwen3_vl,
                                    &arch::qwen3_vl_moe, &arch::olmoe,
                                    &arch::granitemoe, &arch::hunyuan_dense,
                                    &arch::minimax_m2, &arch::apertus, &arch::qwen3next,
                                    &arch::qwen35,   &arch::qwen35moe, &arch::qwen35_multimodal,
                                    &arch::qwen35moe_multimodal, &arch::granitehybrid, &arch::bert,
                                    &arch::roberta, &arch::xlm_roberta, &arch::modernbert,
                                    &arch::nomic_bert, &arch::distilbert};

}  // namespace

const Architecture& architecture(std::string_view name) {
  for (const Architecture* a : kAll) {
    if (a->name == name) return *a;
  }
  std::string names;
  for (const Architecture* a : kAll) names += (names.empty() ? "" : ", ") + std::string(a->name);
  throw Error(Errc::unsupported, "architecture '" + std::string(name) + "' is not supported; supported: " + names);
}

const Architecture* find_hf_architecture(std::string_view hf_class) {
  for (const Architecture* a : kAll) {
    if (a->hf_class == hf_class || (!a->hf_class_also.empty() && a->hf_class_also == hf_class)) return a;
  }
  return nullptr;
}

std::string supported_hf_architectures() {
  std::string names;
  for (const Architecture* a : kAll) {
    names += (names.empty() ? "" : ", ") + std::string(a->hf_class);
    if (!a->hf_class_also.empty()) names += ", " + std::string(a->hf_class_also);
  }
  return names;
}

void arch::rms_output_norm(const layers::StepContext& ctx, float* x, int64_t n_rows) {
  layers::output_rms_norm(ctx, x, n_rows);
}

void arch::layer_output_norm(const layers::StepContext& ctx, float* x, int64_t n_rows) {
  layers::norm(ctx, layers::Norm::layer, x, x, ctx.weights.output_norm, ctx.weights.output_norm_b, n_rows);
}

}  // namespace troupe

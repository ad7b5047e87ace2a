#include "tools/cli/lora_option.hpp"

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdlib>

#include "core/error.hpp"

namespace troupe::cli {

std::vector<LoraAdapterSpec> LoraArgs::specs() const {
  std::vector<LoraAdapterSpec> out;
  for (const std::string& p : paths) out.push_back({.path = p, .scale = 1.0f});
  for (size_t i = 0; i + 1 < scaled.size(); i += 2) {
    const std::string& text = scaled[i + 1];
    char* end = nullptr;
    const float scale = std::strtof(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !std::isfinite(scale)) {
      throw Error(Errc::invalid_argument, "--lora-scaled " + scaled[i] + " '" + text + "': the scale is not a number");
    }
    out.push_back({.path = scaled[i], .scale = scale});
  }
  return out;
}

void add_lora_options(CLI::App* cmd, LoraArgs* args) {
  cmd->add_option("--lora", args->paths,
                  "A LoRA adapter to apply (repeatable): a PEFT adapter directory over a Hugging Face model, or "
                  "an adapter GGUF (llama.cpp's convert_lora_to_gguf.py) over a GGUF model. Run unmerged on cpu "
                  "stages; the base weights stay as they are");
  cmd->add_option("--lora-scaled", args->scaled, "A LoRA adapter and its scale (repeatable): --lora-scaled PATH 0.5")
      ->type_size(2);
}

std::string lora_note(const std::vector<LoraAdapterSpec>& specs) {
  if (specs.empty()) return {};
  return ", " + std::to_string(specs.size()) + (specs.size() == 1 ? " LoRA adapter" : " LoRA adapters");
}

}  // namespace troupe::cli

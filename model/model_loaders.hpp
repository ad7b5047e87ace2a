// The loaders behind Model::load, one per format (internal to model/).
#pragma once

#include <memory>
#include <string>

#include "model/model.hpp"

namespace troupe {

// Rows [row0, row0 + n_rows) of a matrix, in place: a fused projection's
// parts (Phi-3's qkv and gate_up, GPT-2's c_attn) (hf_weights.cpp).
Weight weight_rows(const Weight& w, int64_t row0, int64_t n_rows);

// LongRoPE: sets c.rope_freq_factors to the short or the long list, by the
// context the engine will run (model_load.cpp). No-op for other models.
void select_longrope(ModelConfig& c, int64_t context_length);

// A GGUF file (gguf_model.cpp).
std::shared_ptr<const Model> load_gguf_model(const std::string& path, const ModelLoadOptions& options);
// A Hugging Face directory: config.json plus safetensors weights (hf_model.cpp).
std::shared_ptr<const Model> load_hf_model(const std::string& dir, const ModelLoadOptions& options);

}  // namespace troupe

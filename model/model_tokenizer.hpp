// The tokenizer that belongs to a loaded model: the vocabulary a GGUF file
// carries, or a Hugging Face directory's tokenizer.json (or GPT-2's
// encoder.json + vocab.bpe) beside its weights.
#pragma once

#include <memory>

#include "model/model.hpp"
#include "tokenizer/tokenizer.hpp"

namespace troupe {

// Throws Error(bad_format) for a model that has no usable tokenizer.
std::unique_ptr<Tokenizer> load_model_tokenizer(const Model& model);

}  // namespace troupe

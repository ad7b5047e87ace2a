// A model's identity for a handshake between processes: two processes that
// are to run one chain must hold the same model. A hash of its metadata
// (architecture and shapes) and its tensor table (names, types, shapes and
// the first and last bytes of each tensor), cheap enough to take at start-up.
#pragma once

#include <string>

#include "model/model.hpp"

namespace troupe {

// 16 hex digits; equal for two loads of the same file (or copies of it).
std::string model_identity(const Model& model);

// A short name for messages: the file's name without its extension, or the
// Hugging Face folder's name.
std::string model_display_name(const Model& model);

}  // namespace troupe

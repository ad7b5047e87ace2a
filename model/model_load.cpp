// Model::load: a directory is a Hugging Face model, a file is GGUF.
#include <filesystem>

#include "core/error.hpp"
#include "model/model_loaders.hpp"

namespace troupe {

std::shared_ptr<const Model> Model::load(const std::string& path, const ModelLoadOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) return load_hf_model(path, options);
  const std::string ext = fs::path(path).extension().string();
  if (ext == ".safetensors" || ext == ".json") {
    throw Error(Errc::invalid_argument, path + ": a Hugging Face model is loaded from its directory (config.json "
                                               "and the safetensors files), not from one of its files");
  }
  return load_gguf_model(path, options);
}

void select_longrope(ModelConfig& c, int64_t context_length) {
  if (c.rope_short_factors.empty()) return;
  c.rope_freq_factors = context_length > c.rope_orig_ctx ? c.rope_long_factors : c.rope_short_factors;
}

}  // namespace troupe

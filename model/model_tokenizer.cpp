// load_model_tokenizer: GGUF vocabularies are read at model load; HF
// directories are read here, from the tokenizer files beside the weights.
#include "model/model_tokenizer.hpp"

#include <filesystem>

#include "core/error.hpp"
#include "tokenizer/hf_tokenizer.hpp"

namespace troupe {

std::unique_ptr<Tokenizer> load_model_tokenizer(const Model& model) {
  namespace fs = std::filesystem;
  if (!model.vocab().tokens.empty()) return Tokenizer::create(model.vocab());
  const fs::path dir(model.path());
  if (fs::is_directory(dir) && (fs::exists(dir / "tokenizer.json") || fs::exists(dir / "vocab.bpe"))) {
    return load_hf_tokenizer(dir.string());
  }
  throw Error(Errc::bad_format, model.path() + ": no tokenizer (expected tokenizer.json, or encoder.json and vocab.bpe)");
}

}  // namespace troupe

// libFuzzer target for GGUF files (model/gguf*.cpp) all the way through
// Model::load: header, metadata, tensor table, tensor data bounds, the
// hyperparameters and weights an architecture takes from them, and the
// vocabulary, which then builds a tokenizer that encodes and decodes a
// sentence. A file either loads or fails with troupe::Error; libFuzzer's
// -malloc_limit_mb (run_fuzzers.py) turns an allocation sized by an
// unchecked count into a failure.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "model/model.hpp"
#include "tests/fuzz/fuzz_util.hpp"
#include "tokenizer/tokenizer.hpp"

using namespace troupe::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = (scratch_dir() / "input.gguf").string();
  write_file(path, as_text(data, size));
  std::shared_ptr<const troupe::Model> model;
  try {
    model = troupe::Model::load(path);
  } catch (const troupe::Error& e) {
    refused(e);
    return 0;
  }
  const troupe::ModelConfig& c = model->config();
  check(c.n_layer >= 1 && c.n_embd >= 1 && c.n_vocab >= 1);
  check(static_cast<int64_t>(model->weights().layers.size()) == c.n_layer);
  try {
    const auto tok = troupe::Tokenizer::create(model->vocab());
    const std::vector<int32_t> ids = tok->encode("Hello world, <s> caf\xc3\xa9!", true, true);
    for (const int32_t id : ids) check(id >= 0 && id < tok->n_vocab());
    (void)tok->decode(ids, false);
  } catch (const troupe::Error& e) {
    refused(e);
  }
  return 0;
}

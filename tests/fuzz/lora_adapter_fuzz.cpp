// libFuzzer target for LoRA adapter GGUFs (model/lora.cpp) through
// Model::load: a real base, the tiny Llama fixture as llama.cpp converted it
// (tests/fixtures/gguf/llama.gguf), with the input as its adapter. The load
// either binds every update to a matrix of the update's shape, within the
// rows of its B, or fails with troupe::Error.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/error.hpp"
#include "model/model.hpp"
#include "tests/fuzz/fuzz_util.hpp"

using namespace troupe::fuzz;

namespace {

void check_update(const troupe::Weight& w) {
  for (const troupe::LoraDelta* d = w.lora; d != nullptr; d = d->next) {
    check(d->rank >= 1 && d->rank <= troupe::kMaxLoraRank);
    check(d->a != nullptr && d->bt != nullptr);
    check(w.lora_row0 >= 0 && w.lora_row0 + w.n_out <= d->rows);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = (scratch_dir() / "adapter.gguf").string();
  static const std::string base = std::string(TROUPE_FIXTURES_DIR) + "/gguf/llama.gguf";
  write_file(path, as_text(data, size));
  troupe::ModelLoadOptions options;
  options.lora = {{.path = path}};
  std::shared_ptr<const troupe::Model> model;
  try {
    model = troupe::Model::load(base, options);
  } catch (const troupe::Error& e) {
    refused(e);
    return 0;
  }
  const troupe::ModelWeights& w = model->weights();
  check(w.tok_embd.lora == nullptr);
  for (const troupe::LayerWeights& l : w.layers) {
    for (const troupe::Weight* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) check_update(*m);
  }
  check_update(w.output);
  return 0;
}

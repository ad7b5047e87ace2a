// libFuzzer target for llama.cpp's mmproj files (vision/vision_mmproj.cpp)
// through VisionModel::load_mmproj: the GGUF container, the clip.* sizes,
// the projector type, the tower's and projector's tensors and their f32
// copies, the image processor built from the file, beside a vocabulary
// that has every image token. A file either loads a tower whose sizes and
// weights agree, or fails with troupe::Error.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/error.hpp"
#include "tests/fuzz/fuzz_util.hpp"
#include "tokenizer/vocab.hpp"
#include "vision/image_processor.hpp"
#include "vision/vision_model.hpp"

using namespace troupe::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = (scratch_dir() / "input.mmproj.gguf").string();
  static const troupe::VocabData vocab = [] {
    troupe::VocabData v;
    v.model = "gpt2";
    v.tokens = {"a", "<image>", "<image_soft_token>", "<start_of_image>", "<end_of_image>"};
    return v;
  }();
  write_file(path, as_text(data, size));
  std::shared_ptr<const troupe::vision::VisionModel> model;
  try {
    model = troupe::vision::VisionModel::load_mmproj(path, vocab);
  } catch (const troupe::Error& e) {
    refused(e);
    return 0;
  }
  const troupe::vision::VisionConfig& c = model->config();
  check(c.sizes_sane() && c.n_run >= 1 && c.n_run <= c.n_layer && c.text_embd >= 1);
  check(c.image_tokens() >= 1 && c.image_token >= 1 && c.image_token < 5);
  check(static_cast<int64_t>(model->weights().tower.layers.size()) == c.n_run);
  check(model->weights().patch != nullptr && model->weights().pos_embd != nullptr);
  const auto out = troupe::vision::fixed_output_size(model->processor());
  check(out && out->height == c.image_size && out->width == c.image_size);
  return 0;
}

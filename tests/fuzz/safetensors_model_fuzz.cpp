// libFuzzer target for Hugging Face model folders (model/hf_config.cpp,
// model/safetensors.cpp, model/hf_weights.cpp) through Model::load: the
// input is a config.json, a NUL byte, then a model.safetensors. A folder
// either loads or fails with troupe::Error; libFuzzer's -malloc_limit_mb
// (run_fuzzers.py) turns an allocation sized by an unchecked header field
// into a failure.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/error.hpp"
#include "model/model.hpp"
#include "tests/fuzz/fuzz_util.hpp"

using namespace troupe::fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string dir = [] {
    const auto d = scratch_dir() / "hf";
    std::filesystem::create_directories(d);
    return d.string();
  }();
  const auto [config, weights] = split(as_text(data, size), std::string_view("\0", 1));
  write_file(std::filesystem::path(dir) / "config.json", config);
  write_file(std::filesystem::path(dir) / "model.safetensors", weights);
  try {
    const auto model = troupe::Model::load(dir);
    const troupe::ModelConfig& c = model->config();
    check(c.n_layer >= 1 && c.n_embd >= 1 && c.n_vocab >= 1);
    check(static_cast<int64_t>(model->weights().layers.size()) == c.n_layer);
  } catch (const troupe::Error& e) {
    refused(e);
  }
  return 0;
}

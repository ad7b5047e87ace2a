// LoRA adapters: low-rank updates W x + scale · B (A x) of some of a
// model's matrices, read from PEFT's adapter directories (over a Hugging
// Face model directory) or llama.cpp's adapter GGUFs (over a GGUF model),
// bound to the matrices as the loader makes them (Weight::lora) and run
// unmerged by the backend's matmul, so quantized base weights stay as the
// file has them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernels/backend.hpp"

namespace troupe {

class WeightStore;
struct ModelWeights;

// One adapter to apply, as llama.cpp's --lora / --lora-scaled take it.
struct LoraAdapterSpec {
  std::string path;    // a PEFT directory (adapter_config.json) or an adapter GGUF
  float scale = 1.0f;  // times the adapter's own alpha / r
};

// The updates of every adapter, by the name of the base tensor each
// updates (as the base model's format names it).
class LoraSet {
 public:
  // Reads the adapters for a base model of this format: PEFT directories
  // for a Hugging Face model (hf_base), adapter GGUFs of architecture
  // `gguf_arch` for a GGUF one. A and B go to `store` as f32, the scale in
  // B. Throws Error naming the adapter and the problem: the other format,
  // DoRA, per-module alphas, embedding updates, a tensor without its pair,
  // shapes that disagree.
  static LoraSet read(const std::vector<LoraAdapterSpec>& specs, bool hf_base, const std::string& gguf_arch,
                      WeightStore& store);

  bool empty() const { return targets_.empty(); }
  // Binds the updates of tensor `name` (if any) to w, the matrix the loader
  // made of it whole. Throws Error(bad_format) if their shapes differ.
  void attach(const std::string& name, Weight& w);
  // After the model is bound: every update was taken, and none by a matrix
  // that is not run by matmul (the token embedding). Throws
  // Error(unsupported) naming the adapter tensor.
  void finish(const ModelWeights& w) const;

 private:
  struct Target {
    LoraDelta* first = nullptr;
    LoraDelta* last = nullptr;
    int64_t n_in = 0, n_out = 0;
    std::string source;  // the first adapter and tensor, for messages
    bool used = false;
  };
  void add(const std::string& target, LoraDelta* d, int64_t n_in, int64_t n_out, const std::string& source);

  std::map<std::string, Target, std::less<>> targets_;
};

}  // namespace troupe

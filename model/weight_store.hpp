// Weights a loader makes rather than maps (dtype conversions, transposes,
// quantized copies), owned for the life of the model, and the load-time
// passes over a whole ModelWeights: quantization and the bytes-per-step count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.hpp"

namespace troupe {

struct ModelWeights;
struct ModelConfig;
struct QuantScheme;

class WeightStore {
 public:
  // 64-byte aligned (what SIMD loads like); lives as long as the store.
  void* allocate(size_t bytes);
  float* floats(int64_t n) { return static_cast<float*>(allocate(static_cast<size_t>(n) * sizeof(float))); }
  // A copy the quantizer frees once it has converted every matrix inside
  // it (an FP8 checkpoint's matrices, dequantized), so that --quantize ends
  // at the quantized size.
  void* allocate_transient(size_t bytes);
  // The transient block holding p, or nullptr.
  const void* transient_block(const void* p) const;
  // Frees a block transient_block returned.
  void release(const void* block);
  size_t bytes() const { return bytes_; }

 private:
  struct Free {
    void operator()(void* p) const noexcept;
  };
  struct Transient {
    std::unique_ptr<void, Free> block;
    size_t bytes = 0;
  };
  std::vector<std::unique_ptr<void, Free>> blocks_;
  std::map<uintptr_t, Transient> transient_;  // by start: a DeepSeek-V3 has tens of thousands
  size_t bytes_ = 0;
};

// An f32 copy of n values of type t (f32, f16 or bf16), read from src with
// no alignment assumed (safetensors data has none).
const float* store_f32(WeightStore& store, DType t, const void* src, int64_t n);

// A copy of some rows of w (any type: rows are independent blocks), in
// order: `runs` of {first row, row count}. For checkpoints that fuse what a
// kernel reads apart, as Qwen3-Next's q_proj interleaves each head's query
// and gate rows.
struct RowRun {
  int64_t first = 0;
  int64_t count = 0;
};
Weight gather_rows(WeightStore& store, const Weight& w, const std::vector<RowRun>& runs);

// Calls fn(label, matrix, quantizable) for every matrix of w ("token_embd",
// "blk.3.attn_q", "blk.0.ffn_down.expert.2", ...). Position tables and MoE
// routers are not quantizable: both are small, and a rounded router can send
// a token to other experts. A tied output head is the token embedding and
// is not visited twice.
void for_each_matrix(ModelWeights& w, const std::function<void(const std::string&, Weight&, bool)>& fn);

// Converts every quantizable f32/f16/bf16 matrix to the type the scheme
// gives it (model/quant_scheme.hpp), with core's reference rounding, into
// `store`, the rows split over the hardware's threads. Throws
// Error(unsupported) naming the matrix when a plain scheme's block does not
// divide its row length.
void quantize_weights(ModelWeights& w, const ModelConfig& c, const QuantScheme& scheme, WeightStore& store,
                      const std::string& model_path);

// Bytes of matrices one decode step streams: every matrix once, the token
// embedding only when it is also the output head (otherwise a step reads one
// row), and of a mixture of experts only the n_expert_used routed experts.
int64_t decode_weight_bytes(const ModelWeights& w, const ModelConfig& c);

}  // namespace troupe

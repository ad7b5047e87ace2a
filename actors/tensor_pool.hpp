// Reusable host buffers for the large tensors that travel between actors
// (hidden states [n_tokens, n_embd], logits [n_logit_rows, n_vocab]). A
// message carries a shared handle, never a copy; when the last holder drops
// it the buffer goes back to the pool of the stage that produced it, so a
// running pipeline stops allocating after its first few steps.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace troupe {

struct TensorBuffer {
  std::vector<float> data;  // [rows, cols]
  int64_t rows = 0;
  int64_t cols = 0;

  float* row(int64_t i) { return data.data() + i * cols; }
  const float* row(int64_t i) const { return data.data() + i * cols; }
};

using TensorHandle = std::shared_ptr<TensorBuffer>;

// Thread-safe: buffers come back from whichever actor drops them last.
class TensorPool : public std::enable_shared_from_this<TensorPool> {
 public:
  // Keeps at most max_free idle buffers; more are freed on return.
  static std::shared_ptr<TensorPool> create(size_t max_free = 4);

  // A [rows, cols] buffer (contents unspecified). The handle returns it here.
  TensorHandle acquire(int64_t rows, int64_t cols);

  size_t n_free() const;
  size_t n_allocated() const;  // buffers ever created by this pool

 private:
  explicit TensorPool(size_t max_free) : max_free_(max_free) {}
  void give_back(TensorBuffer* b);

  size_t max_free_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<TensorBuffer>> free_;
  size_t n_allocated_ = 0;
};

}  // namespace troupe

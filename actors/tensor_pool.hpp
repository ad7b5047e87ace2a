// Reusable host buffers for the large tensors that travel between actors
// (hidden states [n_tokens, n_embd], logits [n_logit_rows, n_vocab]). A
// message carries a shared handle, never a copy; when the last holder drops
// it the buffer goes back to the pool of the stage that produced it, so a
// running pipeline stops allocating after its first few steps. A pool next
// to a GPU stage takes its memory from that stage's backend (pinned), so
// the hand-off is an asynchronous DMA copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

namespace troupe {

class Backend;  // kernels/backend.hpp

struct TensorBuffer {
  float* data = nullptr;  // [rows, cols]
  int64_t rows = 0;
  int64_t cols = 0;
  size_t capacity = 0;    // floats allocated

  size_t size() const { return static_cast<size_t>(rows * cols); }
  std::span<float> values() { return {data, size()}; }
  std::span<const float> values() const { return {data, size()}; }
  float* row(int64_t i) { return data + i * cols; }
  const float* row(int64_t i) const { return data + i * cols; }
};

using TensorHandle = std::shared_ptr<TensorBuffer>;

// A standalone [rows, cols] buffer in plain host memory, freed with its
// last handle (a tensor that arrived from another process).
TensorHandle make_tensor(int64_t rows, int64_t cols);

// Thread-safe: buffers come back from whichever actor drops them last.
class TensorPool : public std::enable_shared_from_this<TensorPool> {
 public:
  // Keeps at most max_free idle buffers; more are freed on return.
  // `memory`: the backend whose host_alloc/host_free provide the buffers
  // (kept alive until the last buffer is back); null: plain host memory.
  static std::shared_ptr<TensorPool> create(size_t max_free = 4, std::shared_ptr<Backend> memory = nullptr);
  ~TensorPool();

  // A [rows, cols] buffer (contents unspecified). The handle returns it here.
  TensorHandle acquire(int64_t rows, int64_t cols);

  size_t n_free() const;
  size_t n_allocated() const;  // buffers ever created by this pool

 private:
  TensorPool(size_t max_free, std::shared_ptr<Backend> memory) : max_free_(max_free), memory_(std::move(memory)) {}
  void give_back(TensorBuffer* b);
  void release(TensorBuffer& b);

  size_t max_free_;
  std::shared_ptr<Backend> memory_;
  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<TensorBuffer>> free_;
  size_t n_allocated_ = 0;
};

}  // namespace troupe

// TensorPool: a free list of buffers behind a mutex; handles are shared_ptrs
// whose deleter returns the buffer (and keeps the pool alive until then).
#include "actors/tensor_pool.hpp"

#include "core/error.hpp"

namespace troupe {

std::shared_ptr<TensorPool> TensorPool::create(size_t max_free) {
  return std::shared_ptr<TensorPool>(new TensorPool(max_free));
}

TensorHandle TensorPool::acquire(int64_t rows, int64_t cols) {
  if (rows < 0 || cols < 0) {
    throw Error(Errc::invalid_argument, "TensorPool::acquire: negative shape [" +
                                            std::to_string(rows) + ", " + std::to_string(cols) + "]");
  }
  std::unique_ptr<TensorBuffer> b;
  {
    std::lock_guard lock(mutex_);
    if (!free_.empty()) {
      b = std::move(free_.back());
      free_.pop_back();
    } else {
      ++n_allocated_;
    }
  }
  if (!b) b = std::make_unique<TensorBuffer>();
  // resize within the capacity a buffer already has does not reallocate;
  // buffers grow to the largest step they have seen.
  b->data.resize(static_cast<size_t>(rows * cols));
  b->rows = rows;
  b->cols = cols;
  std::shared_ptr<TensorPool> self = shared_from_this();
  return TensorHandle(b.release(), [self](TensorBuffer* p) { self->give_back(p); });
}

void TensorPool::give_back(TensorBuffer* b) {
  std::unique_ptr<TensorBuffer> owned(b);
  std::lock_guard lock(mutex_);
  if (free_.size() < max_free_) free_.push_back(std::move(owned));
}

size_t TensorPool::n_free() const {
  std::lock_guard lock(mutex_);
  return free_.size();
}

size_t TensorPool::n_allocated() const {
  std::lock_guard lock(mutex_);
  return n_allocated_;
}

}  // namespace troupe

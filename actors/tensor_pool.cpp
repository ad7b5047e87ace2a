// TensorPool: a free list of buffers behind a mutex; handles are shared_ptrs
// whose deleter returns the buffer (and keeps the pool alive until then).
#include "actors/tensor_pool.hpp"

#include <cstdlib>
#include <new>

#include "core/error.hpp"
#include "kernels/backend.hpp"

namespace troupe {
namespace {

constexpr size_t kAlignment = 64;

float* plain_alloc(size_t floats) {
  const size_t bytes = (floats * sizeof(float) + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, bytes == 0 ? kAlignment : bytes);
  if (p == nullptr) throw std::bad_alloc();
  return static_cast<float*>(p);
}

}  // namespace

TensorHandle make_tensor(int64_t rows, int64_t cols) {
  if (rows < 0 || cols < 0) throw Error(Errc::invalid_argument, "make_tensor: negative shape");
  auto* b = new TensorBuffer{.rows = rows, .cols = cols, .capacity = static_cast<size_t>(rows * cols)};
  try {
    b->data = plain_alloc(b->capacity);
  } catch (...) {
    delete b;
    throw;
  }
  return TensorHandle(b, [](TensorBuffer* p) {
    std::free(p->data);
    delete p;
  });
}

std::shared_ptr<TensorPool> TensorPool::create(size_t max_free, std::shared_ptr<Backend> memory) {
  return std::shared_ptr<TensorPool>(new TensorPool(max_free, std::move(memory)));
}

TensorPool::~TensorPool() {
  for (auto& b : free_) release(*b);
}

void TensorPool::release(TensorBuffer& b) {
  if (b.data == nullptr) return;
  if (memory_) {
    memory_->host_free(b.data);
  } else {
    std::free(b.data);
  }
  b.data = nullptr;
  b.capacity = 0;
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
  // Buffers grow to the largest step they have seen, then are reused as they are.
  const auto need = static_cast<size_t>(rows * cols);
  if (need > b->capacity) {
    release(*b);
    b->data = memory_ ? static_cast<float*>(memory_->host_alloc(need * sizeof(float))) : plain_alloc(need);
    b->capacity = need;
  }
  b->rows = rows;
  b->cols = cols;
  std::shared_ptr<TensorPool> self = shared_from_this();
  return TensorHandle(b.release(), [self](TensorBuffer* p) { self->give_back(p); });
}

void TensorPool::give_back(TensorBuffer* b) {
  std::unique_ptr<TensorBuffer> owned(b);
  std::lock_guard lock(mutex_);
  if (free_.size() < max_free_) {
    free_.push_back(std::move(owned));
  } else {
    release(*owned);
  }
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

// TensorPool: buffers come back and are reused, the idle list is bounded,
// and handles dropped on other threads return safely.
#include "actors/tensor_pool.hpp"

#include <gtest/gtest.h>

#include <thread>

#include "core/error.hpp"
#include "kernels/cpu_backend.hpp"

namespace troupe {
namespace {

TEST(TensorPool, ReusesAReturnedBuffer) {
  auto pool = TensorPool::create(2);
  const float* first = nullptr;
  {
    TensorHandle a = pool->acquire(4, 8);
    ASSERT_EQ(a->size(), 32u);
    EXPECT_GE(a->capacity, 32u);
    EXPECT_EQ(a->rows, 4);
    EXPECT_EQ(a->cols, 8);
    first = a->data;
  }
  EXPECT_EQ(pool->n_free(), 1u);
  TensorHandle b = pool->acquire(2, 8);  // smaller: same storage
  EXPECT_EQ(b->data, first);
  EXPECT_EQ(b->rows, 2);
  EXPECT_EQ(pool->n_allocated(), 1u);
}

TEST(TensorPool, KeepsAtMostMaxFree) {
  auto pool = TensorPool::create(1);
  {
    TensorHandle a = pool->acquire(1, 1);
    TensorHandle b = pool->acquire(1, 1);
    TensorHandle c = pool->acquire(1, 1);
  }
  EXPECT_EQ(pool->n_free(), 1u);
  EXPECT_EQ(pool->n_allocated(), 3u);
}

TEST(TensorPool, OutlivesThePoolHandle) {
  TensorHandle kept;
  {
    auto pool = TensorPool::create(2);
    kept = pool->acquire(3, 3);
  }
  kept->data[8] = 1.0f;  // the pool lives until its last buffer is back
  kept.reset();
}

TEST(TensorPool, ReturnsFromOtherThreads) {
  auto pool = TensorPool::create(4);
  for (int round = 0; round < 50; ++round) {
    std::vector<TensorHandle> hs;
    for (int i = 0; i < 4; ++i) hs.push_back(pool->acquire(16, 16));
    std::thread t([moved = std::move(hs)]() mutable { moved.clear(); });
    t.join();
  }
  EXPECT_LE(pool->n_allocated(), 4u);
}

TEST(TensorPool, GrowsABufferTooSmallForTheStep) {
  auto pool = TensorPool::create(2);
  { TensorHandle a = pool->acquire(1, 4); }
  TensorHandle b = pool->acquire(8, 4);
  EXPECT_EQ(b->size(), 32u);
  EXPECT_GE(b->capacity, 32u);
  b->row(7)[3] = 2.0f;  // the last element is writable (ASan checks the bound)
  EXPECT_EQ(pool->n_allocated(), 1u);
}

TEST(TensorPool, TakesMemoryFromABackend) {
  // A backend's host memory (pinned on a GPU) backs the buffers; the pool
  // keeps the backend alive until the last buffer is back.
  struct CountingBackend : CpuBackend {
    int* live;
    explicit CountingBackend(int* l) : CpuBackend({.n_threads = 1}), live(l) {}
    void* host_alloc(size_t bytes) override {
      ++*live;
      return CpuBackend::host_alloc(bytes);
    }
    void host_free(void* p) override {
      --*live;
      CpuBackend::host_free(p);
    }
  };
  int live = 0;
  TensorHandle kept;
  {
    auto pool = TensorPool::create(1, std::make_shared<CountingBackend>(&live));
    kept = pool->acquire(2, 2);
    TensorHandle other = pool->acquire(2, 2);
    EXPECT_EQ(live, 2);
  }
  EXPECT_EQ(live, 2);  // `other` idles in the pool, which lives as long as `kept`
  kept.reset();
  EXPECT_EQ(live, 0);
}

TEST(TensorPool, MakesStandaloneTensors) {
  TensorHandle t = make_tensor(3, 5);
  EXPECT_EQ(t->size(), 15u);
  t->row(2)[4] = 1.0f;
}

TEST(TensorPool, RejectsNegativeShapes) {
  auto pool = TensorPool::create();
  EXPECT_THROW(pool->acquire(-1, 4), Error);
}

}  // namespace
}  // namespace troupe

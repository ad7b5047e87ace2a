// ThreadPool: a generation counter that workers spin on, then sleep on.
#include "core/thread_pool.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TROUPE_PAUSE() _mm_pause()
#else
#define TROUPE_PAUSE() ((void)0)
#endif

namespace troupe {
namespace {
// About 20-50 us of spinning: long enough to bridge back-to-back kernels of
// one step, short enough not to starve other actors on a 2-core machine.
constexpr int kSpinIterations = 20000;
}  // namespace

int hardware_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads > 0 ? n_threads : hardware_threads()) {
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  {
    std::lock_guard lock(mutex_);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  if (n_threads_ == 1) {
    fn(0, 1);
    return;
  }
  job_ = &fn;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  // seq_cst on generation_ and sleepers_: either a worker about to sleep sees
  // the new generation in its predicate, or we see it counted and wake it.
  generation_.fetch_add(1);
  if (sleepers_.load() > 0) {
    {
      std::lock_guard lock(mutex_);
    }
    wake_.notify_all();
  }
  fn(0, n_threads_);
  // Spin, then yield: when threads outnumber free cores (other actors, other
  // processes) a pure spin would keep the straggler we wait for off the CPU.
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < 2000) {
      TROUPE_PAUSE();
    } else {
      std::this_thread::yield();
    }
  }
  job_ = nullptr;
}

void ThreadPool::worker(int index) {
  // Generation 0 is the one at construction: a job posted before this thread
  // got scheduled must still be seen as new.
  uint32_t seen = 0;
  for (;;) {
    int spins = 0;
    uint32_t now = generation_.load(std::memory_order_acquire);
    while (now == seen && spins < kSpinIterations) {
      TROUPE_PAUSE();
      if (++spins % 1024 == 0) std::this_thread::yield();
      now = generation_.load(std::memory_order_acquire);
    }
    if (now == seen) {
      std::unique_lock lock(mutex_);
      sleepers_.fetch_add(1);
      wake_.wait(lock, [&] { return generation_.load() != seen; });
      sleepers_.fetch_sub(1);
      now = generation_.load();
    }
    seen = now;
    if (stop_.load(std::memory_order_acquire)) return;
    (*job_)(index, n_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace troupe

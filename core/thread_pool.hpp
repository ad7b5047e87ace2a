// A fixed pool of worker threads for data-parallel kernels. The calling thread
// takes part as thread 0, so a pool of 1 runs everything inline. Workers spin
// briefly between jobs (a decode step issues hundreds of small jobs) and then
// sleep on a condition variable, so an idle engine costs no CPU.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace troupe {

class ThreadPool {
 public:
  // n_threads <= 0 picks the number of hardware threads.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(thread_index, n_threads) once on every thread and returns when
  // all are done. Not re-entrant: one job at a time per pool.
  void run(const std::function<void(int, int)>& fn);

  // Splits [0, n) into one contiguous chunk per thread: fn(begin, end).
  template <class F>
  void parallel_for(int64_t n, F&& fn) {
    if (n <= 0) return;
    if (n_threads_ == 1 || n == 1) {
      fn(int64_t{0}, n);
      return;
    }
    run([&](int ith, int nth) {
      const int64_t chunk = (n + nth - 1) / nth;
      const int64_t begin = ith * chunk;
      const int64_t end = begin + chunk < n ? begin + chunk : n;
      if (begin < end) fn(begin, end);
    });
  }

 private:
  void worker(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int, int)>* job_ = nullptr;
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  // Sleeping workers wait here; sleepers_ lets run() skip the lock when every
  // worker is still spinning.
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<int> sleepers_{0};
};

// The number of hardware threads, at least 1.
int hardware_threads();

}  // namespace troupe

// A fixed pool of worker threads for data-parallel kernels. The calling thread
// takes part as thread 0, so a pool of 1 runs everything inline. Workers spin
// briefly between jobs (a decode step issues hundreds of small jobs) and then
// sleep on a condition variable, so an idle engine costs no CPU. With a CPU
// list, thread i is pinned to cpus[i % cpus.size()] (thread 0, the caller,
// when it first runs a job: the stage executor's own thread).
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace troupe {

class ThreadPool {
 public:
  // n_threads <= 0 picks the number of hardware threads. Throws
  // Error(invalid_argument) for a CPU this process may not run on.
  explicit ThreadPool(int n_threads = 0, std::vector<int> cpus = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  const std::vector<int>& cpus() const { return cpus_; }

  // Calls fn(thread_index, n_threads) once on every thread and returns when
  // all are done. Not re-entrant: one job at a time per pool.
  void run(const std::function<void(int, int)>& fn);

  // Splits [0, n) into one contiguous chunk per thread: fn(begin, end).
  template <class F>
  void parallel_for(int64_t n, F&& fn) {
    if (n <= 0) return;
    if (!cpus_.empty()) pin_caller();
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

  // Splits [0, n) into chunks of `grain` that the threads take in turn until
  // none is left: fn(begin, end) per chunk. For long jobs (a prefill's
  // matmuls) on a shared machine, where a static split leaves every thread
  // waiting at the end for one that was descheduled. One thread, or n no
  // larger than grain, runs fn(0, n) inline.
  template <class F>
  void parallel_dynamic(int64_t n, int64_t grain, F&& fn) {
    if (done_inline(n, grain, fn)) return;
    std::atomic<int64_t> next{0};
    run([&](int, int) {
      for (;;) {
        const int64_t begin = next.fetch_add(grain, std::memory_order_relaxed);
        if (begin >= n) return;
        fn(begin, begin + grain < n ? begin + grain : n);
      }
    });
  }

  // Guided self-scheduling over [0, n): each take is a share of what is
  // left (1 / (2 n_threads) of it), a multiple of `grain` and at least one,
  // so chunks start long (few takes, long streams for the prefetcher) and
  // end short (whoever finishes first waits at most one short chunk for the
  // other). For the decode matmuls, a few microseconds each, where a fixed
  // grain of a quarter of a thread's share left that much idle at every end.
  template <class F>
  void parallel_guided(int64_t n, int64_t grain, F&& fn) {
    if (done_inline(n, grain, fn)) return;
    std::atomic<int64_t> next{0};
    run([&](int, int nth) {
      int64_t begin = next.load(std::memory_order_relaxed);
      for (;;) {
        if (begin >= n) return;
        const int64_t share = (n - begin + 2 * nth - 1) / (2 * nth);
        const int64_t size = std::min(n - begin, (share + grain - 1) / grain * grain);
        if (next.compare_exchange_weak(begin, begin + size, std::memory_order_relaxed)) {
          fn(begin, begin + size);
          begin = next.load(std::memory_order_relaxed);
        }
      }
    });
  }

 private:
  // The chunked splits' common start: pins the caller, takes a grain below 1
  // as 1, and runs fn(0, n) inline where one thread or one chunk would do.
  // True when nothing is left to split.
  template <class F>
  bool done_inline(int64_t n, int64_t& grain, F& fn) {
    if (n <= 0) return true;
    if (!cpus_.empty()) pin_caller();
    if (grain < 1) grain = 1;
    if (n_threads_ == 1 || n <= grain) {
      fn(int64_t{0}, n);
      return true;
    }
    return false;
  }

  void worker(int index);
  // Pins the calling thread to cpus_[0] the first time it runs a job.
  void pin_caller();

  int n_threads_;
  std::vector<int> cpus_;
  std::atomic<std::thread::id> pinned_caller_{};
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

// The process's CPU affinity plan (`--cpu-affinity`): pools that are not given
// CPUs of their own take the next n of this list, in the order they are made
// (a pipeline makes its stages' backends first to last), wrapping around.
// Empty (the default): no pinning.
void set_cpu_affinity(std::vector<int> cpus);
std::vector<int> claim_cpus(int n);

// Parses a CPU list as taskset writes it: "0,1", "0-3", "0-3,8". Throws
// Error(invalid_argument) on anything else.
std::vector<int> parse_cpu_list(const std::string& s);

}  // namespace troupe

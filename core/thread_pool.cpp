// ThreadPool: a generation counter that workers spin on, then sleep on.
#include "core/thread_pool.hpp"

#include <string>

#include "core/error.hpp"

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

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

namespace {

#if defined(__linux__)
void check_cpus(const std::vector<int>& cpus) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;  // cannot tell: the pin reports it
  for (int c : cpus) {
    if (c < 0 || c >= CPU_SETSIZE || !CPU_ISSET(c, &allowed)) {
      throw Error(Errc::invalid_argument, "CPU " + std::to_string(c) + " is not one this process may run on");
    }
  }
}

void pin_current_thread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  // Best effort: a pin refused later (the set changed under us) leaves the
  // thread where the OS puts it rather than failing a step.
  (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}
#else
void check_cpus(const std::vector<int>& cpus) {
  if (!cpus.empty()) throw Error(Errc::unsupported, "CPU affinity is supported on Linux only");
}
void pin_current_thread(int) {}
#endif

}  // namespace

namespace {
std::mutex g_plan_mutex;
std::vector<int> g_plan;
size_t g_plan_next = 0;
}  // namespace

void set_cpu_affinity(std::vector<int> cpus) {
  check_cpus(cpus);
  std::lock_guard lock(g_plan_mutex);
  g_plan = std::move(cpus);
  g_plan_next = 0;
}

std::vector<int> claim_cpus(int n) {
  std::lock_guard lock(g_plan_mutex);
  std::vector<int> out;
  if (g_plan.empty()) return out;
  for (int i = 0; i < n; ++i) out.push_back(g_plan[g_plan_next++ % g_plan.size()]);
  return out;
}

std::vector<int> parse_cpu_list(const std::string& s) {
  std::vector<int> out;
  auto bad = [&] { return Error(Errc::invalid_argument, "bad CPU list '" + s + "' (want e.g. 0,1 or 0-3)"); };
  size_t i = 0;
  auto number = [&] {
    if (i >= s.size() || s[i] < '0' || s[i] > '9') throw bad();
    int v = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      v = v * 10 + (s[i++] - '0');
      if (v > 1 << 20) throw bad();
    }
    return v;
  };
  while (i < s.size()) {
    const int lo = number();
    int hi = lo;
    if (i < s.size() && s[i] == '-') {
      ++i;
      hi = number();
      if (hi < lo) throw bad();
    }
    for (int c = lo; c <= hi; ++c) out.push_back(c);
    if (i < s.size()) {
      if (s[i] != ',') throw bad();
      ++i;
      if (i == s.size()) throw bad();
    }
  }
  if (out.empty()) throw bad();
  return out;
}

ThreadPool::ThreadPool(int n_threads, std::vector<int> cpus)
    : n_threads_(n_threads > 0 ? n_threads : hardware_threads()), cpus_(std::move(cpus)) {
  check_cpus(cpus_);
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) {
    workers_.emplace_back([this, i] {
      if (!cpus_.empty()) pin_current_thread(cpus_[static_cast<size_t>(i) % cpus_.size()]);
      worker(i);
    });
  }
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

void ThreadPool::pin_caller() {
  if (pinned_caller_.load(std::memory_order_relaxed) != std::this_thread::get_id()) {
    pin_current_thread(cpus_[0]);
    pinned_caller_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  }
}

void ThreadPool::run(const std::function<void(int, int)>& fn) {
  if (!cpus_.empty()) pin_caller();
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

// Admission control in front of the pipeline: a bounded number of requests
// in flight (running plus queued), a circuit breaker that, once tripped by a
// full house, refuses new work until the load falls back below a low-water
// mark (so a burst does not keep the queue pinned at its limit and admitted
// requests keep their latency), and graceful degradation (max_tokens capped)
// when the house is nearly full or the engine is short of KV pages (requests
// wait although batch slots are free): then long requests are capped, and
// past a second mark refused with Retry-After, while short ones still go in
// (the scheduler keeps them a share). Plain and thread-safe; the routes call it.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>

namespace troupe::net {

struct AdmissionOptions {
  int32_t max_running = 64;  // what the pipeline runs at once (its max_batch_size)
  int32_t max_queue = 64;    // admitted but waiting beyond that
  // The breaker closes again when in-flight falls to this fraction of
  // max_running + max_queue.
  double resume_fraction = 0.75;
  // Past this fraction of the capacity, new requests get at most
  // degraded_max_tokens (0: no degradation).
  double degrade_fraction = 0.8;
  int32_t degraded_max_tokens = 256;
  // KV pressure: requests waiting in the engine while it runs fewer than
  // its batch allows wait for KV pages. From kv_degrade_waiting of them, new
  // requests get at most degraded_max_tokens; from kv_refuse_waiting, those
  // asking for more are refused (429) instead. 0: off.
  int32_t kv_degrade_waiting = 1;
  int32_t kv_refuse_waiting = 64;
  // How often the engine's load is read (the probe asks the scheduler).
  std::chrono::milliseconds engine_probe_interval{100};
  // A request that would wait longer than this for a running slot is
  // refused (429) at once: the requests queued ahead of it over the rate at
  // which requests ended in the last 10 s. The count bound alone lets the
  // queue hold minutes of work when the engine slows down (a loaded
  // machine, long generations). 0: off.
  double max_queue_seconds = 30.0;
};

// What the engine reports (PipelineStats' running and waiting).
struct EngineLoad {
  int32_t running = 0;
  int32_t waiting = 0;
};

struct Admission {
  bool admitted = false;
  int retry_after = 0;         // seconds, when refused
  int32_t max_tokens_cap = 0;  // > 0: degraded, cap max_tokens at this
  bool draining = false;       // refused because the server shuts down (503)
  bool kv_bound = false;       // refused for KV pressure: a shorter request would go in
  bool wait_bound = false;     // refused: it would wait past max_queue_seconds
};

class AdmissionControl {
 public:
  using Clock = std::chrono::steady_clock;

  explicit AdmissionControl(AdmissionOptions options);

  // n requests (choices) that arrive together: all admitted or none.
  // max_tokens: the most any of them asks for (0: unknown), weighed against
  // the KV pressure.
  Admission try_admit(int32_t n, int32_t max_tokens = 0, Clock::time_point now = Clock::now());
  // Where the engine's load comes from; called at most once per
  // engine_probe_interval, outside the lock. Unset: no KV pressure.
  void set_engine_probe(std::function<EngineLoad()> probe);
  // Requests the engine holds back for want of KV pages, as last read.
  int32_t kv_waiting() const;
  // One admitted request ended after `seconds` in the server.
  void release(double seconds, Clock::time_point now = Clock::now());
  // Requests that ended per second over the last 10 s; 0 when too few did
  // to tell.
  double completion_rate(Clock::time_point now = Clock::now()) const;

  // The server shuts down: every later try_admit is refused (draining).
  void begin_drain();
  bool draining() const;

  int32_t in_flight() const;
  int32_t capacity() const { return options_.max_running + options_.max_queue; }
  bool breaker_open() const;
  const AdmissionOptions& options() const { return options_; }

 private:
  int retry_after_locked() const;
  double completion_rate_locked(Clock::time_point now) const;
  void refresh_engine_load();

  AdmissionOptions options_;
  mutable std::mutex mutex_;
  int32_t in_flight_ = 0;
  bool open_ = false;
  bool draining_ = false;
  double mean_seconds_ = 1.0;  // moving average of a request's time in the server
  std::mutex probe_mutex_;     // one probe at a time; never held with mutex_
  std::function<EngineLoad()> probe_;
  Clock::time_point probed_at_{};
  int32_t kv_waiting_ = 0;     // guarded by mutex_
  mutable std::deque<Clock::time_point> ended_;  // ends in the last 10 s (at most 4096)
  Clock::time_point last_end_{};
  Clock::time_point queue_since_{};  // when requests last began to wait for a slot
};

}  // namespace troupe::net

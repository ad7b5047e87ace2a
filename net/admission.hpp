// Admission control in front of the pipeline: a bounded number of requests
// in flight (running plus queued), a circuit breaker that, once tripped by a
// full house, refuses new work until the load falls back below a low-water
// mark (so a burst does not keep the queue pinned at its limit and admitted
// requests keep their latency), and graceful degradation (max_tokens capped)
// when the house is nearly full. Plain and thread-safe; the routes call it.
#pragma once

#include <chrono>
#include <cstdint>
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
};

struct Admission {
  bool admitted = false;
  int retry_after = 0;         // seconds, when refused
  int32_t max_tokens_cap = 0;  // > 0: degraded, cap max_tokens at this
};

class AdmissionControl {
 public:
  using Clock = std::chrono::steady_clock;

  explicit AdmissionControl(AdmissionOptions options);

  // n requests (choices) that arrive together: all admitted or none.
  Admission try_admit(int32_t n);
  // One admitted request ended after `seconds` in the server.
  void release(double seconds);

  int32_t in_flight() const;
  int32_t capacity() const { return options_.max_running + options_.max_queue; }
  bool breaker_open() const;
  const AdmissionOptions& options() const { return options_; }

 private:
  int retry_after_locked() const;

  AdmissionOptions options_;
  mutable std::mutex mutex_;
  int32_t in_flight_ = 0;
  bool open_ = false;
  double mean_seconds_ = 1.0;  // moving average of a request's time in the server
};

}  // namespace troupe::net

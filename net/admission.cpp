// The admission bound, its breaker with hysteresis, and the Retry-After
// estimate from the recent time requests spend in the server.
#include "net/admission.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace troupe::net {

AdmissionControl::AdmissionControl(AdmissionOptions options) : options_(options) {
  if (options_.max_running < 1) throw Error(Errc::invalid_argument, "admission: max_running must be at least 1");
  if (options_.max_queue < 0) throw Error(Errc::invalid_argument, "admission: max_queue must not be negative");
  if (!(options_.resume_fraction > 0.0 && options_.resume_fraction <= 1.0)) {
    throw Error(Errc::invalid_argument, "admission: resume_fraction must be in (0, 1]");
  }
}

void AdmissionControl::set_engine_probe(std::function<EngineLoad()> probe) {
  std::lock_guard lock(probe_mutex_);
  probe_ = std::move(probe);
  probed_at_ = {};
}

void AdmissionControl::refresh_engine_load() {
  // One caller probes; the others use the last reading rather than wait.
  std::unique_lock probe_lock(probe_mutex_, std::try_to_lock);
  if (!probe_lock.owns_lock() || !probe_) return;
  const Clock::time_point now = Clock::now();
  if (probed_at_ != Clock::time_point{} && now - probed_at_ < options_.engine_probe_interval) return;
  probed_at_ = now;
  EngineLoad load;
  try {
    load = probe_();
  } catch (const std::exception&) {
    return;  // an engine too busy to answer: keep the last reading
  }
  // Waiting although slots are free: waiting for KV pages.
  const int32_t kv_waiting = load.running < options_.max_running ? load.waiting : 0;
  std::lock_guard lock(mutex_);
  kv_waiting_ = kv_waiting;
}

int32_t AdmissionControl::kv_waiting() const {
  std::lock_guard lock(mutex_);
  return kv_waiting_;
}

Admission AdmissionControl::try_admit(int32_t n, int32_t max_tokens, Clock::time_point now) {
  refresh_engine_load();
  std::lock_guard lock(mutex_);
  if (draining_) return {.admitted = false, .retry_after = 1, .draining = true};
  const int32_t cap = capacity();
  if (open_ && in_flight_ <= static_cast<int32_t>(options_.resume_fraction * cap)) open_ = false;
  if (open_ || in_flight_ + n > cap) {
    open_ = true;
    return {.admitted = false, .retry_after = retry_after_locked()};
  }
  // KV pressure: a long request would only lengthen the KV queue; a short
  // one runs in the share the scheduler keeps for short requests.
  const int32_t short_tokens = options_.degraded_max_tokens;
  const bool long_request = short_tokens > 0 && (max_tokens <= 0 || max_tokens > short_tokens);
  if (long_request && options_.kv_refuse_waiting > 0 && kv_waiting_ >= options_.kv_refuse_waiting) {
    return {.admitted = false, .retry_after = retry_after_locked(), .kv_bound = true};
  }
  // Time to a slot: the requests queued ahead (and these) over the rate
  // requests end at. With none ending for longer than the bound while some
  // wait, the engine is stalled: that counts as past it too.
  const int32_t ahead = in_flight_ + n - options_.max_running;
  if (ahead > 0 && in_flight_ <= options_.max_running) queue_since_ = now;  // a queue starts now
  if (options_.max_queue_seconds > 0 && ahead > 0) {
    const double rate = completion_rate_locked(now);
    const double stalled_s = std::chrono::duration<double>(now - std::max(last_end_, queue_since_)).count();
    const double wait_s = rate > 0 ? ahead / rate : stalled_s;
    if (wait_s > options_.max_queue_seconds) {
      const double over = rate > 0 ? wait_s - options_.max_queue_seconds : 1.0;
      return {.admitted = false,
              .retry_after = static_cast<int>(std::clamp(std::ceil(over), 1.0, 60.0)),
              .wait_bound = true};
    }
  }
  in_flight_ += n;
  Admission a{.admitted = true};
  const bool house_full = in_flight_ > options_.degrade_fraction * cap;
  const bool kv_short = options_.kv_degrade_waiting > 0 && kv_waiting_ >= options_.kv_degrade_waiting;
  if (options_.degraded_max_tokens > 0 && (house_full || kv_short)) a.max_tokens_cap = options_.degraded_max_tokens;
  return a;
}

void AdmissionControl::release(double seconds, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  if (in_flight_ > 0) --in_flight_;
  ended_.push_back(now);
  if (ended_.size() > 4096) ended_.pop_front();
  last_end_ = std::max(last_end_, now);
  if (std::isfinite(seconds) && seconds >= 0) mean_seconds_ = 0.9 * mean_seconds_ + 0.1 * seconds;
}

void AdmissionControl::begin_drain() {
  std::lock_guard lock(mutex_);
  draining_ = true;
}

bool AdmissionControl::draining() const {
  std::lock_guard lock(mutex_);
  return draining_;
}

int32_t AdmissionControl::in_flight() const {
  std::lock_guard lock(mutex_);
  return in_flight_;
}

bool AdmissionControl::breaker_open() const {
  std::lock_guard lock(mutex_);
  return open_;
}

double AdmissionControl::completion_rate(Clock::time_point now) const {
  std::lock_guard lock(mutex_);
  return completion_rate_locked(now);
}

double AdmissionControl::completion_rate_locked(Clock::time_point now) const {
  constexpr auto kWindow = std::chrono::seconds(10);
  while (!ended_.empty() && now - ended_.front() > kWindow) ended_.pop_front();
  if (ended_.size() < 4) return 0.0;  // too few to tell
  // Over the window, or since the first end in it when the server is
  // younger than that (at least a second: a burst of ends is not a rate).
  const double span = std::max(1.0, std::chrono::duration<double>(now - ended_.front()).count());
  return static_cast<double>(ended_.size()) / span;
}

int AdmissionControl::retry_after_locked() const {
  // Requests that must end before the breaker closes, ending at about
  // max_running per mean request time.
  const double resume = options_.resume_fraction * capacity();
  const double to_drain = std::max(1.0, in_flight_ - resume + 1.0);
  const double seconds = to_drain * mean_seconds_ / options_.max_running;
  return static_cast<int>(std::clamp(std::ceil(seconds), 1.0, 60.0));
}

}  // namespace troupe::net

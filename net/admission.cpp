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

Admission AdmissionControl::try_admit(int32_t n) {
  std::lock_guard lock(mutex_);
  const int32_t cap = capacity();
  if (open_ && in_flight_ <= static_cast<int32_t>(options_.resume_fraction * cap)) open_ = false;
  if (open_ || in_flight_ + n > cap) {
    open_ = true;
    return {.admitted = false, .retry_after = retry_after_locked()};
  }
  in_flight_ += n;
  Admission a{.admitted = true};
  if (options_.degraded_max_tokens > 0 && in_flight_ > options_.degrade_fraction * cap) {
    a.max_tokens_cap = options_.degraded_max_tokens;
  }
  return a;
}

void AdmissionControl::release(double seconds) {
  std::lock_guard lock(mutex_);
  if (in_flight_ > 0) --in_flight_;
  if (std::isfinite(seconds) && seconds >= 0) mean_seconds_ = 0.9 * mean_seconds_ + 0.1 * seconds;
}

int32_t AdmissionControl::in_flight() const {
  std::lock_guard lock(mutex_);
  return in_flight_;
}

bool AdmissionControl::breaker_open() const {
  std::lock_guard lock(mutex_);
  return open_;
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

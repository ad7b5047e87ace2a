// Health of one executor stage, shared between the actor that runs it (the
// only writer) and readers anywhere (/ready, /metrics, Pipeline): up, or
// failed/down with the reason. A device stage whose GPU reported an error,
// or a remote stage whose worker is lost, is not up.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace troupe {

struct StageHealth {
  std::string name;   // "executor_1"
  std::string where;  // "cpu", "cuda:0", "remote 127.0.0.1:7001"
  int64_t first_layer = 0;
  int64_t last_layer = 0;
  bool up = true;
  std::string error;        // why it is not up
  uint64_t reconnects = 0;  // remote stages: times the link came back
};

class StageStatus {
 public:
  explicit StageStatus(StageHealth initial) : health_(std::move(initial)) { up_ = health_.up; }

  bool up() const { return up_.load(std::memory_order_acquire); }
  void set_down(std::string why) {
    std::lock_guard lock(mutex_);
    health_.up = false;
    health_.error = std::move(why);
    up_.store(false, std::memory_order_release);
  }
  void set_up() {
    std::lock_guard lock(mutex_);
    if (!health_.up && !health_.error.empty()) ++health_.reconnects;
    health_.up = true;
    health_.error.clear();
    up_.store(true, std::memory_order_release);
  }
  StageHealth snapshot() const {
    std::lock_guard lock(mutex_);
    return health_;
  }

 private:
  mutable std::mutex mutex_;
  StageHealth health_;
  std::atomic<bool> up_{true};
};

}  // namespace troupe

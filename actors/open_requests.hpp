// The pipeline's list of requests whose sink has not had its FinalEvent
// yet: the watchdog ends each of them when a pipeline actor stops.
#pragma once

#include <mutex>
#include <unordered_map>
#include <utility>

#include "actors/interfaces.hpp"

namespace troupe {

// Requests whose sink has not had its FinalEvent yet: when a pipeline actor
// stops, the watchdog ends each of them, since the actor that would have
// may be the one that stopped.
class OpenRequests {
 public:
  void add(RequestId id, sink_actor sink) {
    std::lock_guard lock(mutex_);
    sinks_.emplace(id, std::move(sink));
  }
  // Whether it was still open.
  bool remove(RequestId id) {
    std::lock_guard lock(mutex_);
    return sinks_.erase(id) > 0;
  }
  std::unordered_map<RequestId, sink_actor> take_all() {
    std::lock_guard lock(mutex_);
    return std::exchange(sinks_, {});
  }

 private:
  std::mutex mutex_;
  std::unordered_map<RequestId, sink_actor> sinks_;
};

}  // namespace troupe

// Polling with a deadline, for state that settles after the event a test
// waits on (an actor's meter or trace span is recorded when its handler
// returns, after it has passed the message on).
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace troupe::test {

// Calls ok() every 50 ms until it returns true or `limit` has passed;
// returns its last answer.
inline bool wait_until(const std::function<bool()>& ok, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return ok();
}

}  // namespace troupe::test

// Per-actor load, for /metrics: how long an actor has spent handling
// messages and how many were waiting when it last got to run. Metered<Impl>
// wraps a class-based actor's resume() (scheduled and detached actors alike
// run their messages there), so the actor's own code is unchanged.
#pragma once

#include <caf/scheduled_actor.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

namespace troupe {

struct ActorMeter {
  explicit ActorMeter(std::string n) : name(std::move(n)) {}
  const std::string name;
  std::atomic<int64_t> busy_ns{0};
  std::atomic<int64_t> mailbox_depth{0};  // messages waiting at the latest activation
  std::atomic<uint64_t> activations{0};
};

template <class Impl>
class Metered : public Impl {
 public:
  template <class... Ts>
  Metered(caf::actor_config& cfg, std::shared_ptr<ActorMeter> meter, Ts&&... xs)
      : Impl(cfg, std::forward<Ts>(xs)...), meter_(std::move(meter)) {}

  caf::resumable::resume_result resume(caf::execution_unit* ctx, size_t max_throughput) override {
    // mailbox() is the owner's to read, and resume() runs as the owner.
    meter_->mailbox_depth.store(static_cast<int64_t>(this->mailbox().size()), std::memory_order_relaxed);
    const auto t0 = std::chrono::steady_clock::now();
    const auto result = Impl::resume(ctx, max_throughput);
    meter_->busy_ns.fetch_add(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count(),
        std::memory_order_relaxed);
    meter_->activations.fetch_add(1, std::memory_order_relaxed);
    return result;
  }

 private:
  std::shared_ptr<ActorMeter> meter_;
};

}  // namespace troupe

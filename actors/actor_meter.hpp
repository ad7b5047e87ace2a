// Per-actor load, for /metrics: messages waiting in an actor's mailbox and
// the time it spent handling them. Metered<Impl> wraps a class-based actor's
// enqueue() (senders put messages in) and consume() (the actor takes one
// out and handles it), so the actor's own code is unchanged.
#pragma once

#include <caf/invoke_message_result.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/scheduled_actor.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace troupe {

struct ActorMeter {
  explicit ActorMeter(std::string n) : name(std::move(n)) {}
  const std::string name;
  std::atomic<int64_t> busy_ns{0};
  std::atomic<int64_t> mailbox_depth{0};  // enqueued, not yet taken out
  std::atomic<uint64_t> messages{0};      // handled
};

template <class Impl>
class Metered : public Impl {
 public:
  template <class... Ts>
  Metered(caf::actor_config& cfg, std::shared_ptr<ActorMeter> meter, Ts&&... xs)
      : Impl(cfg, std::forward<Ts>(xs)...), meter_(std::move(meter)) {}

  // Any thread: a sender puts a message in.
  void enqueue(caf::mailbox_element_ptr ptr, caf::execution_unit* host) override {
    meter_->mailbox_depth.fetch_add(1, std::memory_order_relaxed);
    Impl::enqueue(std::move(ptr), host);
  }

  using Impl::consume;
  // The actor's own thread: one message taken out and handled.
  caf::invoke_message_result consume(caf::mailbox_element& x) override {
    meter_->mailbox_depth.fetch_sub(1, std::memory_order_relaxed);
    const auto t0 = std::chrono::steady_clock::now();
    const caf::invoke_message_result r = Impl::consume(x);
    meter_->busy_ns.fetch_add(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count(),
        std::memory_order_relaxed);
    meter_->messages.fetch_add(1, std::memory_order_relaxed);
    return r;
  }

 private:
  std::shared_ptr<ActorMeter> meter_;
};

}  // namespace troupe

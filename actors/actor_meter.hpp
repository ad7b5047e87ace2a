// Per-actor load, for /metrics and traces: messages waiting in an actor's
// mailbox and the time it spent handling them, and with tracing on a span
// per message (telemetry/trace_ring.hpp). Metered<Impl> wraps a class-based
// actor's enqueue() (senders put messages in) and consume() (the actor takes
// one out and handles it), so the actor's own code is unchanged.
#pragma once

#include <caf/invoke_message_result.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/scheduled_actor.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "actors/message_tags.hpp"
#include "telemetry/trace_ring.hpp"

namespace troupe {

struct ActorMeter {
  explicit ActorMeter(std::string n, std::shared_ptr<TraceTrack> t = nullptr)
      : name(std::move(n)), trace(std::move(t)) {}
  const std::string name;
  std::atomic<int64_t> busy_ns{0};
  std::atomic<int64_t> mailbox_depth{0};  // enqueued, not yet taken out
  std::atomic<uint64_t> messages{0};      // handled
  // Tracing: spans go here, and enqueue times wait in `stamps` (keyed by
  // the mailbox element, which lives from enqueue to consume) until the
  // actor takes the message out. Null: tracing off, no stamps taken.
  const std::shared_ptr<TraceTrack> trace;
  std::mutex stamps_mu;
  std::unordered_map<const void*, int64_t> stamps;
};

inline int64_t meter_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

template <class Impl>
class Metered : public Impl {
 public:
  template <class... Ts>
  Metered(caf::actor_config& cfg, std::shared_ptr<ActorMeter> meter, Ts&&... xs)
      : Impl(cfg, std::forward<Ts>(xs)...), meter_(std::move(meter)) {}

  // Any thread: a sender puts a message in.
  void enqueue(caf::mailbox_element_ptr ptr, caf::execution_unit* host) override {
    meter_->mailbox_depth.fetch_add(1, std::memory_order_relaxed);
    if (meter_->trace && ptr) {
      // Stamped before the mailbox has it: the actor may take it out at once.
      std::lock_guard lock(meter_->stamps_mu);
      meter_->stamps[ptr.get()] = meter_clock_ns();
    }
    Impl::enqueue(std::move(ptr), host);
  }

  using Impl::consume;
  // The actor's own thread: one message taken out and handled.
  caf::invoke_message_result consume(caf::mailbox_element& x) override {
    meter_->mailbox_depth.fetch_sub(1, std::memory_order_relaxed);
    int64_t enqueued = 0;
    SpanTags tags;
    if (meter_->trace) {
      tags = tag_message(x.content(), ids_);
      std::lock_guard lock(meter_->stamps_mu);
      const auto it = meter_->stamps.find(&x);
      if (it != meter_->stamps.end()) {
        enqueued = it->second;
        meter_->stamps.erase(it);
      }
    }
    const int64_t t0 = meter_clock_ns();
    const caf::invoke_message_result r = Impl::consume(x);
    const int64_t t1 = meter_clock_ns();
    meter_->busy_ns.fetch_add(t1 - t0, std::memory_order_relaxed);
    meter_->messages.fetch_add(1, std::memory_order_relaxed);
    if (meter_->trace) meter_->trace->record(tags, enqueued, t0, t1);
    return r;
  }

 private:
  std::shared_ptr<ActorMeter> meter_;
  std::vector<int64_t> ids_;  // scratch for the span's request ids
};

}  // namespace troupe

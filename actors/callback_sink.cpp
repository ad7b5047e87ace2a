// Callback sink: one per request, runs on CAF's shared threads.
#include "actors/callback_sink.hpp"

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <cstdio>

namespace troupe {
namespace {

struct SinkState {
  RequestId id = 0;
  RequestCallbacks callbacks;
  scheduler_actor scheduler;
  bool failed = false;  // a callback threw: the request is being cancelled
  bool ended = false;   // the final event was handled (a second one, from the watchdog, is dropped)
  std::function<void(RequestId)> closed;
};

sink_actor::behavior_type callback_sink(sink_actor::stateful_pointer<SinkState> self, RequestId id,
                                        RequestCallbacks callbacks, scheduler_actor scheduler,
                                        std::function<void(RequestId)> closed) {
  self->state.id = id;
  self->state.closed = std::move(closed);
  self->state.callbacks = std::move(callbacks);
  self->state.scheduler = std::move(scheduler);
  return {
      [self](const PromptEvent& ev) {
        SinkState& st = self->state;
        if (st.failed || st.ended || !st.callbacks.on_prompt) return;
        try {
          st.callbacks.on_prompt(ev);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "troupe: on_prompt of request %lld threw (%s); cancelling it\n",
                       static_cast<long long>(st.id), e.what());
          st.failed = true;
          self->send(st.scheduler, cancel_atom_v, st.id);
        }
      },
      [self](const TokenEvent& ev) {
        SinkState& st = self->state;
        if (st.failed || st.ended || !st.callbacks.on_token) return;
        try {
          st.callbacks.on_token(ev);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "troupe: on_token of request %lld threw (%s); cancelling it\n",
                       static_cast<long long>(st.id), e.what());
          st.failed = true;
          self->send(st.scheduler, cancel_atom_v, st.id);
        }
      },
      [self](const FinalEvent& ev) {
        SinkState& st = self->state;
        if (st.ended) return;
        st.ended = true;
        if (st.closed) st.closed(st.id);
        if (st.callbacks.on_final) {
          try {
            st.callbacks.on_final(ev);
          } catch (const std::exception& e) {
            std::fprintf(stderr, "troupe: on_final of request %lld threw (%s)\n",
                         static_cast<long long>(st.id), e.what());
          }
        }
        self->quit();
      },
  };
}

}  // namespace

sink_actor spawn_callback_sink(caf::actor_system& system, RequestId id, RequestCallbacks callbacks,
                               scheduler_actor scheduler, std::function<void(RequestId)> closed) {
  return system.spawn(callback_sink, id, std::move(callbacks), std::move(scheduler), std::move(closed));
}

}  // namespace troupe

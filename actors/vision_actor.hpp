// The vision actor: a vision-language model's image encoder between the
// tokenizer and the scheduler. Runs detached (a vision tower's forward is
// the CPU work of a long prefill, which must hold up neither the tokenizer
// nor the scheduled actors). Each image is decoded, preprocessed, run
// through the tower and the projector; the request then goes on to the
// scheduler with its features, its PromptEvent to the detokenizer first.
#pragma once

#include <atomic>
#include <caf/fwd.hpp>
#include <cstdint>
#include <memory>

#include "actors/interfaces.hpp"
#include "kernels/backend.hpp"
#include "vision/vision_model.hpp"

namespace troupe {

struct ActorMeter;

struct VisionCounters {
  std::atomic<uint64_t> encoded{0};
  std::atomic<uint64_t> cache_hits{0};
};

struct VisionActorOptions {
  std::shared_ptr<const vision::VisionModel> model;
  // Where the tower runs; its weights are uploaded when the actor starts.
  std::shared_ptr<Backend> backend;
  std::shared_ptr<ActorMeter> meter;  // optional load counters and trace track
  // Requests refused here (an unreadable image), added to
  // PipelineStats::rejected; optional.
  std::shared_ptr<std::atomic<uint64_t>> refused;
  // PipelineStats::images_encoded and image_cache_hits; optional.
  std::shared_ptr<VisionCounters> counters;
  // Features of recent images kept for requests that send them again (a
  // conversation's later turns resend its images), least recently used
  // first out; 0: no cache.
  size_t cache_bytes = size_t{128} << 20;
};

// An image that cannot be read ends its request with a RequestDone(error,
// invalid_argument) naming the image's field; no other request is touched.
vision_actor spawn_vision(caf::actor_system& system, VisionActorOptions options, scheduler_actor scheduler,
                          detokenizer_actor detokenizer);

}  // namespace troupe

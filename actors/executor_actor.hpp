// An executor actor: one ModelStage (a contiguous range of layers) on its own
// backend and thread. It runs spawned `caf::detached`, since a forward pass
// blocks for the length of a step; a chain of them is pipeline parallelism.
#pragma once

#include <functional>
#include <memory>

#include <caf/fwd.hpp>

#include "actors/interfaces.hpp"
#include "kernels/backend.hpp"
#include "model/model_stage.hpp"

namespace troupe {

struct ActorMeter;  // actors/actor_meter.hpp
class StageStatus;  // actors/stage_status.hpp

struct ExecutorParts {
  std::shared_ptr<Backend> backend;  // outlives the stage (and the buffers it lends)
  std::unique_ptr<ModelStage> stage;
  // Where the output buffers come from: a GPU stage's (or the CPU stage
  // before a GPU stage's) backend gives pinned memory; null: plain memory.
  std::shared_ptr<Backend> output_memory;
  // Set down when the device fails (an Errc::unavailable error: a CUDA
  // error is sticky, so every later step would fail too); may be null.
  std::shared_ptr<StageStatus> status;
  // Idle output buffers the stage keeps (hidden states or logits): one per
  // micro-batch in flight behind it, plus one.
  size_t max_free_buffers = 4;
  // Called on the stage's thread before each forward pass with the step id
  // (PipelineExtensions::before_stage_step: instrumentation, fault injection).
  std::function<void(uint64_t step)> before_step;
};

// `next`: the following stage, or none for the last stage, which sends each
// step's logits to `sampler` as if from the scheduler (its SampledStep reply
// goes there). The scheduler's handle arrives in a connect message before the
// first step. A step the stage cannot run becomes a StepFailed to the
// scheduler, which fails the requests in it; the stage keeps running.
// `meter`, when given, records the actor's busy time and mailbox depth.
executor_actor spawn_executor(caf::actor_system& system, ExecutorParts parts, executor_actor next,
                              sampler_actor sampler, std::shared_ptr<ActorMeter> meter = nullptr);

}  // namespace troupe

// The typed interfaces of the pipeline's actors, in the order a request
// meets them, so the compiler checks how stages connect:
//
//   tokenizer -> scheduler -> executor stage(s) -> sampler -> scheduler
//             -> detokenizer -> the request's sink (+ observers)
//
// The sink comes first only because the detokenizer's interface names it.
// Actors get the handles of the actors after them when they are spawned; the
// two that also talk back up the chain (executors and the detokenizer, to the
// scheduler) get its handle in a connect message right after.
#pragma once

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/messages.hpp"

namespace troupe {

// What a request's events go to: Pipeline's callback sink, or any user actor
// (an observer of every request's stream implements the same interface).
// A PromptEvent first (unless the request is refused), then TokenEvents, then
// exactly one FinalEvent.
using sink_actor =
    caf::typed_actor<caf::reacts_to<PromptEvent>, caf::reacts_to<TokenEvent>, caf::reacts_to<FinalEvent>>;
using observer_actor = sink_actor;

// The front door: every request enters here. Renders chat, encodes text,
// applies the model's rules (actors/request_rules.hpp), then sends the
// request's PromptEvent to the detokenizer and its TokenRequest to the
// scheduler, or a RequestDone(error) to the detokenizer. Also answers
// /tokenize and /detokenize.
using tokenizer_actor =
    caf::typed_actor<caf::reacts_to<PromptRequest>, caf::replies_to<TokenizeQuery>::with<TokenizeAnswer>>;

// A vision-language model's image encoder: decodes each image of a request,
// runs the vision tower and its projector, then sends the PromptEvent to the
// detokenizer and the TokenRequest, features attached, to the scheduler (or
// a RequestDone(error) naming the image at fault to the detokenizer).
using vision_actor = caf::typed_actor<caf::reacts_to<VisionRequest>>;

// Continuous batching over SchedulerPolicy "virtual engines" sharing one
// KvCacheManager (the KV manager role: the scheduler is its single writer).
using scheduler_actor = caf::typed_actor<
    caf::reacts_to<TokenRequest>,
    caf::reacts_to<SampledStep>,            // the sampler's answer to a step's logits
    caf::reacts_to<StepFailed>,             // an executor could not run a step
    caf::reacts_to<cancel_atom, RequestId>,
    caf::reacts_to<stop_atom, RequestId>,   // the detokenizer matched a stop string
    caf::reacts_to<wake_atom>,
    caf::reacts_to<caf::connect_atom, caf::actor>,  // a new sampler (a remote last stage came back)
    caf::replies_to<stats_atom>::with<PipelineStats>,
    caf::replies_to<kv_atom>::with<KvSnapshot>,
    caf::replies_to<shutdown_atom>::with<caf::ok_atom>>;

// One stage: a contiguous range of layers on its own backend and thread.
// Forwards hidden states to the next stage, or (last stage) logits to the
// sampler on behalf of the scheduler.
// A remote stage's link in the head process has this interface too: the
// chain does not know which of its stages live in other processes.
using executor_actor = caf::typed_actor<caf::reacts_to<StageBatch>, caf::reacts_to<caf::connect_atom, scheduler_actor>,
                                        caf::reacts_to<ForgetRequests>>;

// Per-request sampling. A custom sampler implements this interface: it
// learns a request's parameters from SeqOpen and answers each step's logits
// with one SampledToken per row, in row order.
using sampler_actor = caf::typed_actor<caf::reacts_to<SeqOpen>, caf::reacts_to<SeqClose>,
                                       caf::replies_to<StepLogits>::with<SampledStep>>;

// A `troupe stage` worker in another process, published through CAF's
// middleman: a handshake, then the steps of the session it opened.
using stage_worker_actor =
    caf::typed_actor<caf::replies_to<StageHello>::with<StageWelcome>, caf::replies_to<RemoteStep>::with<StageOutput>,
                     caf::reacts_to<StageScheduler>, caf::reacts_to<ForgetRequests>,
                     caf::replies_to<stats_atom>::with<WorkerStats>>;

// Token ids -> text pieces, stop strings, the final event; the only actor
// that talks to sinks.
using detokenizer_actor = caf::typed_actor<
    caf::reacts_to<RequestOpen, sink_actor>,
    caf::reacts_to<PromptEvent>,
    caf::reacts_to<SeqOpen>,
    caf::reacts_to<SampledStep>,
    caf::reacts_to<RequestDone>,
    caf::reacts_to<caf::connect_atom, scheduler_actor>,
    caf::reacts_to<caf::add_atom, observer_actor>,
    caf::replies_to<shutdown_atom>::with<caf::ok_atom>>;

}  // namespace troupe

// The sink Pipeline::submit spawns for each request: a tiny actor that turns
// TokenEvent / FinalEvent messages into the caller's callbacks, then quits
// after the final event.
#pragma once

#include <caf/fwd.hpp>

#include <functional>

#include "actors/interfaces.hpp"
#include "actors/pipeline.hpp"

namespace troupe {

// An exception thrown by a callback is reported on stderr and cancels the
// request through `scheduler`; the final event is still delivered. `closed`
// (optional) runs once the final event was handled (the pipeline's list of
// open requests forgets the sink).
sink_actor spawn_callback_sink(caf::actor_system& system, RequestId id, RequestCallbacks callbacks,
                               scheduler_actor scheduler, std::function<void(RequestId)> closed = nullptr);

}  // namespace troupe

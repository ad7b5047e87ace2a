// The pipeline's watchdog: monitors every pipeline actor and, when one
// stops while the pipeline runs (an exception escaped a handler, someone
// killed it), reports which and why, once per actor. The pipeline then ends
// every open request with an error and refuses new ones, so that no request
// waits forever on an actor that is gone.
#pragma once

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace troupe {

// on_down(actor name, reason) runs on the watchdog's thread.
caf::actor spawn_watchdog(caf::actor_system& system, std::vector<std::pair<std::string, caf::actor>> watched,
                          std::function<void(const std::string&, const std::string&)> on_down);

}  // namespace troupe

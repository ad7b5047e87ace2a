// The asynchronous replies of /v1/completions and /v1/chat/completions: one
// JSON body when the request did not stream, Server-Sent Events ending in
// "data: [DONE]" when it did.
#pragma once

#include <memory>

#include "net/generation.hpp"
#include "net/http_types.hpp"

namespace troupe::net {

class ServerCore;

// Runs `spec` (already admitted) once started; cancelling it (the client
// went away) cancels every choice in the pipeline.
std::shared_ptr<AsyncReply> make_generation_reply(ServerCore& core, JobSpec spec, bool stream, bool include_usage);

}  // namespace troupe::net

// The reply of POST /v1/responses: one Response object ({"id": "resp_...",
// "object": "response", "status", "output": [reasoning, message,
// function_call items], "usage", ...and what it repeats of the request}),
// or, streamed, its events (response.created, response.in_progress;
// output_item.added / content_part.added / *.delta / *.done /
// output_item.done per item; response.completed or response.incomplete),
// each with its sequence_number.
#pragma once

#include <memory>
#include <string>

#include "net/generation.hpp"
#include "net/http_types.hpp"

namespace troupe::net {

class ServerCore;

// Runs `spec` (one choice, already admitted) once started; cancelling it
// (the client went away) cancels the choice. echo_json: what the Response
// repeats of the request (ResponsesRequest::echo_json).
std::shared_ptr<AsyncReply> make_responses_reply(ServerCore& core, JobSpec spec, bool stream, std::string echo_json);

}  // namespace troupe::net

// The replies of Anthropic's Messages API: one Message body ({"id", "type":
// "message", "role", "model", "content": [thinking, text, tool_use
// blocks], "stop_reason", "stop_sequence", "usage"}) or, streamed, its
// Server-Sent Events (message_start, content_block_start /
// content_block_delta / content_block_stop per block, message_delta with
// the stop reason and usage, message_stop). Errors in Anthropic's shape:
// {"type": "error", "error": {"type", "message"}}.
#pragma once

#include <memory>
#include <string>

#include "net/api_error.hpp"
#include "net/generation.hpp"
#include "net/http_types.hpp"

namespace troupe::net {

class ServerCore;

// Runs `spec` (one choice, already admitted) once started; cancelling it
// (the client went away) cancels the choice in the pipeline. model: as the
// request named it.
std::shared_ptr<AsyncReply> make_anthropic_reply(ServerCore& core, JobSpec spec, bool stream, std::string model);

// POST /v1/messages/count_tokens: {"input_tokens"} of the rendered
// conversation, from the engine's tokenizer actor (the ids a request would
// get).
std::shared_ptr<AsyncReply> make_anthropic_count_reply(ServerCore& core, ChatPrompt chat);

// The reply of an error in Anthropic's shape, the status and headers kept
// (`counted` is the same error as ServerCore::error_reply wrote and counted
// it): invalid_request_error (400), authentication_error (401),
// not_found_error (404), request_too_large (413), rate_limit_error (429),
// overloaded_error (503), api_error (others).
HttpReply anthropic_error_reply(HttpReply counted, const ApiError& e);
std::string anthropic_error_body(const ApiError& e);

}  // namespace troupe::net

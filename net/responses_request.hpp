// OpenAI's Responses API request (POST /v1/responses), read into the chat
// the OpenAI chat route runs: "input" items (messages, function_call,
// function_call_output) as turns, "instructions" as the system turn,
// "text.format" as response_format, "reasoning.effort" as the template's
// reasoning_effort. Shapes are checked here under the Responses API's names;
// what a chat request shares (sampling, tools' schemas, formats) is the
// chat parser's rule. Stateless: a request carries its whole conversation.
#pragma once

#include <string>
#include <string_view>

#include "net/request_parser.hpp"

namespace troupe::net {

struct ResponsesRequest {
  ParsedRequest request;  // a chat
  // What the Response object repeats of the request (tools, tool_choice,
  // parallel_tool_calls, temperature, top_p, max_output_tokens,
  // instructions, text, reasoning, metadata), a JSON object.
  std::string echo_json;
};

// Throws ApiError (400, naming the field: "input[2].call_id",
// "text.format.type", "tools[0].type").
ResponsesRequest parse_responses_request(std::string_view body, const RequestLimits& limits);

}  // namespace troupe::net

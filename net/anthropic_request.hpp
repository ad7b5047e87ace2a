// Anthropic's Messages API requests (POST /v1/messages and
// /v1/messages/count_tokens), read into the chat the OpenAI routes run
// (net/request_parser.hpp): content blocks (text, tool_use, tool_result,
// thinking) as the turns Hugging Face's templates read, tools and
// tool_choice in OpenAI's shape, "thinking" as the template's
// enable_thinking, a trailing assistant turn as a prefill. Apart from the
// replies (anthropic_reply.hpp) so that the request fuzzer links them alone.
#pragma once

#include <string_view>

#include "net/request_parser.hpp"

namespace troupe::net {

struct AnthropicRequest {
  // A chat; max_tokens already cut to the server's --max-tokens (Anthropic's
  // clients ask for far more than a local model's context, and are served
  // what fits).
  ParsedRequest request;
  bool thinking = false;  // "thinking": {"type": "enabled"}: the model must be one that thinks
};

// Throw ApiError (400, naming the field as Anthropic's clients write it:
// "messages[1].content[0].tool_use_id", "tool_choice.name").
AnthropicRequest parse_anthropic_messages(std::string_view body, const RequestLimits& limits);
// The same conversation, tools and system, with nothing to generate:
// max_tokens and the sampling fields are not read.
AnthropicRequest parse_anthropic_count_tokens(std::string_view body, const RequestLimits& limits);

}  // namespace troupe::net

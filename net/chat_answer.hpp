// A chat output read the way the API returns it: the <think> block apart
// (JobSpec::AnswerReading::reasoning), the tool calls parsed out of the answer
// (AnswerReading::tools), each given an id, and the finish_reason that follows.
// One reading for every front end: the JSON body, the SSE stream's end and
// the WebSocket's final frame.
#pragma once

#include <boost/json/object.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "net/generation.hpp"

namespace troupe::net {

struct ChatAnswer {
  std::string reasoning;
  std::string content;
  std::vector<OutputToolCall> tool_calls;
  std::string finish_reason;  // stop, length, tool_calls
};

// A whole output that ended for `reason` (stop or length).
ChatAnswer read_chat_answer(const JobSpec::AnswerReading& reading, std::string_view text, EndReason reason);

// A call's arguments as the object they are (Ollama's and Anthropic's
// replies carry objects, not JSON text); the parsers give objects only, so
// anything else is an empty object.
boost::json::object tool_arguments_object(std::string_view arguments);

// Calls parsed out of an output that ended for `reason`, with ids, appended
// to `out`; the finish_reason: "tool_calls" when there were calls and
// max_tokens did not cut the output (OpenAI's), else stop or length.
std::string take_tool_calls(std::vector<grammar::ToolCall> calls, EndReason reason, std::vector<OutputToolCall>& out);

}  // namespace troupe::net

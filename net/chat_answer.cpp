// Reasoning first, so a call the model wrote while thinking is not a call;
// harmony output (gpt-oss) carries all three as channels.
#include "net/chat_answer.hpp"

#include <boost/json/parse.hpp>

#include "net/harmony_answer.hpp"
#include "net/reasoning_split.hpp"
#include "net/routes.hpp"

namespace troupe::net {

ChatAnswer read_chat_answer(const JobSpec::AnswerReading& reading, std::string_view text, EndReason reason) {
  ChatAnswer a;
  if (reading.harmony) {
    std::vector<grammar::ToolCall> calls;
    HarmonyParts parts = read_harmony(text, reading.tools ? reading.tools->names : std::vector<std::string>{}, calls);
    a.reasoning = std::move(parts.reasoning);
    a.content = std::move(parts.content);
    a.finish_reason = take_tool_calls(std::move(calls), reason, a.tool_calls);
    return a;
  }
  if (reading.reasoning) {
    ReasoningParts parts = split_reasoning(text, reading.reasoning->starts_open);
    a.reasoning = std::move(parts.reasoning);
    a.content = std::move(parts.content);
  } else {
    a.content = std::string(text);
  }
  std::vector<grammar::ToolCall> calls;
  if (reading.tools) {
    grammar::ToolCallOutput parsed = grammar::parse_tool_calls(reading.tools->syntax, a.content, reading.tools->names);
    if (!parsed.calls.empty()) a.content = std::move(parsed.content);
    calls = std::move(parsed.calls);
  }
  a.finish_reason = take_tool_calls(std::move(calls), reason, a.tool_calls);
  return a;
}

boost::json::object tool_arguments_object(std::string_view arguments) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(arguments, ec);
  if (ec || !v.is_object()) return {};
  return std::move(v.as_object());
}

std::string take_tool_calls(std::vector<grammar::ToolCall> calls, EndReason reason, std::vector<OutputToolCall>& out) {
  const char* plain = reason == EndReason::length ? "length" : "stop";
  if (calls.empty()) return plain;
  for (grammar::ToolCall& c : calls) out.push_back({.id = new_response_id("call_"), .call = std::move(c)});
  return reason == EndReason::length ? plain : "tool_calls";
}

}  // namespace troupe::net

// Reasoning first, so a call the model wrote while thinking is not a call
// (as read_chat_answer).
#include "net/answer_stream.hpp"

namespace troupe::net {

AnswerStream::AnswerStream(const JobSpec::AnswerReading& reading) {
  if (reading.harmony) {
    harmony_.emplace(reading.tools ? reading.tools->names : std::vector<std::string>{});
    return;
  }
  if (reading.reasoning) reasoning_.emplace(reading.reasoning->starts_open);
  if (reading.tools) tools_.emplace(reading.tools->syntax, reading.tools->names);
}

ReasoningParts AnswerStream::split(std::string_view piece, bool last) {
  if (!reasoning_) return ReasoningParts{.reasoning = {}, .content = std::string(piece)};
  ReasoningParts parts = reasoning_->push(piece);
  if (last) {
    ReasoningParts rest = reasoning_->finish();
    parts.reasoning += rest.reasoning;
    parts.content += rest.content;
  }
  return parts;
}

ReasoningParts AnswerStream::push(std::string_view piece) {
  if (harmony_) {
    HarmonyParts h = harmony_->push(piece);
    return ReasoningParts{.reasoning = std::move(h.reasoning), .content = std::move(h.content)};
  }
  ReasoningParts parts = split(piece, /*last=*/false);
  if (tools_) parts.content = tools_->push(parts.content);
  return parts;
}

ReasoningParts AnswerStream::finish(std::string_view piece, std::vector<grammar::ToolCall>& calls) {
  if (harmony_) {
    ReasoningParts parts = push(piece);
    const HarmonyParts rest = harmony_->finish(calls);
    parts.reasoning += rest.reasoning;
    parts.content += rest.content;
    return parts;
  }
  ReasoningParts parts = split(piece, /*last=*/true);
  if (tools_) {
    parts.content = tools_->push(parts.content);
    grammar::ToolCallOutput parsed = tools_->finish();
    parts.content += parsed.content;
    for (grammar::ToolCall& c : parsed.calls) calls.push_back(std::move(c));
  }
  return parts;
}

}  // namespace troupe::net

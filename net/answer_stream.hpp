// One chat output read as it streams, the way the APIs return it: the
// <think> block apart (JobSpec::AnswerReading::reasoning), then the tool
// calls held back from the answer (AnswerReading::tools), or harmony's
// channels (gpt-oss). Shared by the SSE stream and Ollama's NDJSON stream;
// a whole output is read_chat_answer's (net/chat_answer.hpp).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "grammar/tool_calls.hpp"
#include "net/generation.hpp"
#include "net/harmony_answer.hpp"
#include "net/reasoning_split.hpp"

namespace troupe::net {

class AnswerStream {
 public:
  explicit AnswerStream(const JobSpec::AnswerReading& reading);

  // Nothing to split or parse: the output goes out as it comes.
  bool plain() const { return !reasoning_ && !tools_ && !harmony_; }

  // What is decided of both parts once `piece` came.
  ReasoningParts push(std::string_view piece);
  // The output's last piece and its end: everything held, and the calls
  // (appended to `calls`).
  ReasoningParts finish(std::string_view piece, std::vector<grammar::ToolCall>& calls);

 private:
  // The piece through the reasoning split (last: and what it held).
  ReasoningParts split(std::string_view piece, bool last);

  std::optional<ReasoningStream> reasoning_;
  std::optional<grammar::ToolCallStream> tools_;
  std::optional<HarmonyStream> harmony_;
};

}  // namespace troupe::net

// gpt-oss's harmony output read as the chat API returns it. The model
// writes a turn as messages, each a header then a body:
//
//   <|channel|>analysis<|message|>...<|end|>                    reasoning
//   <|start|>assistant<|channel|>commentary to=functions.f
//       <|constrain|>json<|message|>{"x": 1}<|call|>              a tool call
//   <|start|>assistant<|channel|>final<|message|>...<|return|>  the answer
//
// (the prompt ends with "<|start|>assistant", so the first header has no
// role; the recipient may also stand before the channel). The analysis
// channel is returned as reasoning_content, a body addressed to
// functions.NAME as a call, every other body (final, a commentary preamble)
// as content. The harmony tokens reach this text because the tokenizer
// always renders them (Tokenizer::always_rendered).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "grammar/tool_calls.hpp"

namespace troupe::net {

struct HarmonyParts {
  std::string reasoning;
  std::string content;
};

// Streams an output: each piece gives what is decided of the reasoning and
// the content; headers, and a marker's first bytes at the end of a piece,
// wait. Calls collect until finish().
class HarmonyStream {
 public:
  // names: the tools a call may name; a call to another name, or whose
  // arguments are not a JSON object, is returned as content.
  explicit HarmonyStream(std::vector<std::string> names);

  HarmonyParts push(std::string_view piece);
  // At the end of the output: what was held, and the calls.
  HarmonyParts finish(std::vector<grammar::ToolCall>& calls);

 private:
  enum class Route { reasoning, content, call };
  void step(HarmonyParts& out, bool last);
  void begin_body(std::string_view header);
  void end_body(HarmonyParts& out);
  void emit(HarmonyParts& out, std::string_view text);

  std::vector<std::string> names_;
  std::string held_;         // bytes not yet decided
  bool in_body_ = false;     // past a header's <|message|>
  Route route_ = Route::content;
  std::string call_name_;    // Route::call: the function
  std::string call_body_;    // Route::call: the arguments so far
  std::vector<grammar::ToolCall> calls_;
};

// A whole output: HarmonyStream over one piece.
HarmonyParts read_harmony(std::string_view text, const std::vector<std::string>& names,
                          std::vector<grammar::ToolCall>& calls);

}  // namespace troupe::net

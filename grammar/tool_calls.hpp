// Tool calls in a model's output: the text conventions chat models are
// trained to call functions with, found in the output and parsed into
// OpenAI's {name, arguments} calls. Which convention a model uses follows
// from its chat template (the template tells the model how to call), or
// from the deployment (`troupe serve --tool-call-parser`).
//
//   hermes       <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>  (Qwen2.5, Qwen3, Hermes)
//   llama3_json  {"name": "f", "parameters": {...}}, several joined by "; "    (Llama 3.1 to 3.3)
//   mistral      [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]         (Mistral)
//   json         [{"name": "f", "arguments": {...}}, ...] or one such object   (models without a convention)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::grammar {

enum class ToolCallSyntax : uint8_t { json, hermes, llama3_json, mistral };

std::string_view to_string(ToolCallSyntax syntax);
// nullopt: not a syntax's name.
std::optional<ToolCallSyntax> tool_call_syntax_named(std::string_view name);
// The convention a chat template teaches its model; json when it teaches none.
ToolCallSyntax detect_tool_call_syntax(std::string_view chat_template);

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object, as text (OpenAI's function.arguments)
};

struct ToolCallOutput {
  std::string content;          // the text that is not a call (before the first one), or all of it
  std::vector<ToolCall> calls;  // empty: the output calls nothing
};

// The calls in a whole output. A call must name one of `names` and carry
// an object of arguments; when any call is malformed the output is taken
// as plain text (no calls, content the whole text), as a client can act on
// text but not on half a call.
ToolCallOutput parse_tool_calls(ToolCallSyntax syntax, std::string_view text, const std::vector<std::string>& names);

// The same while the output streams: text that cannot be part of a call
// passes at once; from where a call may begin (a marker, or a leading `{`
// or `[`) the text is held until finish() parses it. A marker's first
// bytes at the end of a piece are held until the next piece decides.
class ToolCallStream {
 public:
  ToolCallStream(ToolCallSyntax syntax, std::vector<std::string> names);

  // The part of `piece` (and of what was held) that is plain text for sure.
  std::string push(std::string_view piece);
  // At the end of the output: the text not yet passed that is content, and
  // the calls.
  ToolCallOutput finish();

 private:
  ToolCallSyntax syntax_;
  std::vector<std::string> names_;
  std::string text_;      // the whole output so far
  size_t passed_ = 0;     // bytes of text_ returned by push()
  bool holding_ = false;  // a call may have begun: hold everything
  bool led_ = false;      // the first non-space byte was seen and was not a call's
};

}  // namespace troupe::grammar

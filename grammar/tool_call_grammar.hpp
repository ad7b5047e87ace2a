// The output a request's tool_choice forces: "required" (one call or more,
// of any of the tools) or a named function (one call of it), written in
// the model's own tool-call syntax, each call's arguments held to its
// function's parameters schema. The request travels with the choice as
// text (OutputFormat::Kind::tool_calls), compiled here like any format.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "grammar/grammar.hpp"
#include "grammar/tool_calls.hpp"

namespace troupe::grammar {

// The format text for a tool choice. tools_json: OpenAI's "tools" array;
// function: the named function, empty for any of them; parallel: more than
// one call allowed (OpenAI's parallel_tool_calls; a named choice makes one).
// lazy: tool_choice "auto", where the model may answer in text or call:
// the grammar takes over only once the output opens a call (llama.cpp's
// lazy grammars), for the syntaxes whose calls open with a marker written
// as text (tool_call_trigger).
// think_open (lazy): the output begins inside a <think> block, where a
// trigger does not count (see LazyTokenGrammar).
std::string tool_choice_format(ToolCallSyntax syntax, std::string_view tools_json, std::string_view function,
                               bool parallel, bool lazy = false, bool think_open = false);

// The marker a syntax's calls open with, as text a model writes; empty
// when its calls open with a control token or a bare value.
std::string_view tool_call_trigger(ToolCallSyntax syntax);

// Compiles tool_choice_format's text: the calls, or for a lazy format what
// follows the trigger. Throws Error(invalid_argument) naming the tool whose
// parameters schema cannot be enforced (a lazy format lets such a tool's
// arguments be any object instead: "auto" must not refuse a request).
std::shared_ptr<const Grammar> tool_call_grammar(std::string_view format);

// The trigger of a lazy format (empty for a forcing one), and whether its
// output begins inside a <think> block.
struct LazyTrigger {
  std::string text;
  bool think_open = false;
};
LazyTrigger tool_call_format_trigger(std::string_view format);

}  // namespace troupe::grammar

// A call is the JSON object {"name": <const>, "<arguments key>": <the
// function's parameters>}; a choice of several functions is their anyOf;
// the syntax's fixed text frames the calls (json_schema.hpp's JsonFrame).
#include "grammar/tool_call_grammar.hpp"

#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.hpp"
#include "grammar/json_schema.hpp"

namespace troupe::grammar {
namespace {

using json = nlohmann::ordered_json;

[[noreturn]] void fail_tools(const std::string& what) { throw Error(Errc::invalid_argument, "tools: " + what); }

// The key a syntax's calls carry their arguments under.
const char* arguments_key(ToolCallSyntax syntax) {
  return syntax == ToolCallSyntax::llama3_json ? "parameters" : "arguments";
}

JsonFrame frame_of(ToolCallSyntax syntax, bool parallel, bool lazy) {
  const int32_t max = parallel ? -1 : 1;
  if (lazy) {
    // After "<tool_call>": the rest of the first call, then more calls.
    return {.open = "",
            .item_open = "\n",
            .item_close = "\n</tool_call>",
            .separator = "\n<tool_call>",
            .close = "",
            .max_values = max};
  }
  switch (syntax) {
    case ToolCallSyntax::hermes:
      return {.open = "",
              .item_open = "<tool_call>\n",
              .item_close = "\n</tool_call>",
              .separator = "\n",
              .close = "",
              .max_values = max};
    case ToolCallSyntax::llama3_json:
      return {.open = "", .item_open = "", .item_close = "", .separator = "; ", .close = "", .max_values = max};
    case ToolCallSyntax::mistral:
    case ToolCallSyntax::json:
      break;
  }
  // A JSON array of calls. Mistral's [TOOL_CALLS] is a control token, which
  // constrained output cannot write; its parser takes the bare array.
  return {.open = "[", .item_open = "", .item_close = "", .separator = ", ", .close = "]", .max_values = max};
}

}  // namespace

std::string_view tool_call_trigger(ToolCallSyntax syntax) {
  return syntax == ToolCallSyntax::hermes ? "<tool_call>" : "";
}

std::string tool_choice_format(ToolCallSyntax syntax, std::string_view tools_json, std::string_view function,
                               bool parallel, bool lazy, bool think_open) {
  json spec = json::object();
  spec["syntax"] = std::string(to_string(syntax));
  spec["function"] = std::string(function);
  spec["parallel"] = parallel && function.empty();
  if (lazy) {
    spec["trigger"] = std::string(tool_call_trigger(syntax));
    spec["think_open"] = think_open;
  }
  spec["tools"] = json::parse(tools_json.begin(), tools_json.end(), nullptr, false);
  return spec.dump();
}

std::shared_ptr<const Grammar> tool_call_grammar(std::string_view format) {
  const json spec = json::parse(format.begin(), format.end(), nullptr, false);
  if (!spec.is_object() || !spec.contains("tools") || !spec["tools"].is_array()) fail_tools("not a tool choice");
  const std::optional<ToolCallSyntax> syntax = tool_call_syntax_named(spec.value("syntax", std::string()));
  if (!syntax) fail_tools("unknown tool-call syntax");
  const std::string function = spec.value("function", std::string());
  const bool parallel = spec.value("parallel", false);
  const bool lazy = !spec.value("trigger", std::string()).empty();
  if (lazy && *syntax != ToolCallSyntax::hermes)
    fail_tools("a lazy tool choice needs a syntax whose calls open with a marker");

  json calls = json::array();
  const json& tools = spec["tools"];
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& tool = tools[i];
    const std::string at = "tools[" + std::to_string(i) + "]";
    if (!tool.is_object() || !tool.contains("function") || !tool["function"].is_object()) {
      fail_tools(at + " has no function");
    }
    const json& fn = tool["function"];
    const std::string name = fn.value("name", std::string());
    if (!function.empty() && name != function) continue;
    json params =
        fn.contains("parameters") ? fn["parameters"] : json{{"type", "object"}, {"properties", json::object()}};
    try {
      (void)json_schema_grammar(params.dump());
    } catch (const Error& e) {
      if (!lazy) fail_tools(at + " ('" + name + "') parameters: " + e.what());
      params = json{{"type", "object"}};
    }
    json call = {{"type", "object"},
                 {"properties", {{"name", {{"const", name}}}, {arguments_key(*syntax), std::move(params)}}},
                 {"required", {"name", arguments_key(*syntax)}}};
    calls.push_back(std::move(call));
  }
  if (calls.empty()) fail_tools(function.empty() ? "no tools to call" : "no function named '" + function + "'");
  const json one = calls.size() == 1 ? calls[0] : json{{"anyOf", std::move(calls)}};
  return framed_json_grammar(one.dump(), frame_of(*syntax, parallel, lazy));
}

LazyTrigger tool_call_format_trigger(std::string_view format) {
  const json spec = json::parse(format.begin(), format.end(), nullptr, false);
  if (!spec.is_object()) return {};
  return {.text = spec.value("trigger", std::string()), .think_open = spec.value("think_open", false)};
}

}  // namespace troupe::grammar

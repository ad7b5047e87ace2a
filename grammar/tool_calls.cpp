// Each syntax finds where its calls are (a span of the output) and parses
// them with nlohmann::json; the text around the calls is the content.
#include "grammar/tool_calls.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace troupe::grammar {
namespace {

using json = nlohmann::ordered_json;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kMistralMarker = "[TOOL_CALLS]";
constexpr std::string_view kPythonTag = "<|python_tag|>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

size_t skip_space(std::string_view s, size_t i) {
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

std::string_view trim(std::string_view s) {
  size_t b = skip_space(s, 0), e = s.size();
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::string_view trim_right(std::string_view s) {
  size_t e = s.size();
  while (e > 0 && is_space(s[e - 1])) --e;
  return s.substr(0, e);
}

// One past the end of the JSON object or array that starts at `i` (a '{'
// or '['), by matching brackets outside strings; npos when it does not end.
size_t json_value_end(std::string_view s, size_t i) {
  int depth = 0;
  bool in_string = false;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

std::optional<json> parse_json(std::string_view s) {
  json v = json::parse(s.begin(), s.end(), nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return std::nullopt;
  return v;
}

// {"name": ..., "arguments" | "parameters": {...} or its text}; missing
// arguments are none.
std::optional<ToolCall> call_of(const json& o, const std::vector<std::string>& names) {
  if (!o.is_object()) return std::nullopt;
  auto name = o.find("name");
  if (name == o.end() || !name->is_string()) return std::nullopt;
  ToolCall call{.name = name->get<std::string>(), .arguments = {}};
  if (std::find(names.begin(), names.end(), call.name) == names.end()) return std::nullopt;
  json args = json::object();
  if (auto a = o.find("arguments"); a != o.end()) {
    args = *a;
  } else if (auto p = o.find("parameters"); p != o.end()) {
    args = *p;
  }
  if (args.is_string()) {
    std::optional<json> inner = parse_json(args.get<std::string>());
    if (!inner) return std::nullopt;
    args = std::move(*inner);
  }
  if (!args.is_object()) return std::nullopt;
  call.arguments = args.dump();
  return call;
}

// An object is one call, an array a list of them.
bool append_calls(const json& v, const std::vector<std::string>& names, std::vector<ToolCall>& out) {
  if (v.is_array()) {
    if (v.empty()) return false;
    for (const json& item : v) {
      if (item.is_array() || !append_calls(item, names, out)) return false;
    }
    return true;
  }
  std::optional<ToolCall> call = call_of(v, names);
  if (!call) return false;
  out.push_back(std::move(*call));
  return true;
}

// Where the calls are: the content is text[0, begin) and `after`.
struct Found {
  size_t begin = std::string_view::npos;
  std::string_view after;
  std::vector<ToolCall> calls;
};

// <tool_call> JSON </tool_call>, repeated; the last one may lack its close
// (the output was cut, or the model ended there).
Found find_hermes(std::string_view s, const std::vector<std::string>& names) {
  Found f;
  size_t open = s.find(kHermesOpen);
  if (open == std::string_view::npos) return {};
  f.begin = open;
  size_t i = open;
  while (i < s.size() && s.substr(i, kHermesOpen.size()) == kHermesOpen) {
    const size_t body = i + kHermesOpen.size();
    const size_t close = s.find(kHermesClose, body);
    const size_t body_end = close == std::string_view::npos ? s.size() : close;
    std::optional<json> v = parse_json(trim(s.substr(body, body_end - body)));
    if (!v || v->is_array() || !append_calls(*v, names, f.calls)) return {};
    i = close == std::string_view::npos ? s.size() : skip_space(s, close + kHermesClose.size());
  }
  f.after = s.substr(i);
  return f;
}

// What a call may open the output with where no marker precedes it: the
// value each syntax's model writes bare (for llama3_json an object, as
// vLLM's parser takes). The stream holds an output that opens so until its
// end, so the whole parse takes no other: a bare llama3_json list or
// mistral object is text. (The tool_calls fuzzer found the stream passing a
// list as text that the parse then read as calls.)
bool leads_a_call(ToolCallSyntax syntax, char c) {
  switch (syntax) {
    case ToolCallSyntax::hermes:
      return false;
    case ToolCallSyntax::llama3_json:
      return c == '{';
    case ToolCallSyntax::mistral:
      return c == '[';
    case ToolCallSyntax::json:
      return c == '{' || c == '[';
  }
  return false;
}

// JSON values from `i` on, each an object (one call) or an array of them,
// separated by `separator` and spaces; nothing may follow.
bool read_values(std::string_view s, size_t i, char separator, const std::vector<std::string>& names, Found& f) {
  while (true) {
    i = skip_space(s, i);
    if (i >= s.size() || (s[i] != '{' && s[i] != '[')) return false;
    const size_t end = json_value_end(s, i);
    if (end == std::string_view::npos) return false;
    std::optional<json> v = parse_json(s.substr(i, end - i));
    if (!v || !append_calls(*v, names, f.calls)) return false;
    i = skip_space(s, end);
    if (i == s.size()) return true;
    if (separator == 0 || s[i] != separator) return false;
    ++i;
  }
}

Found find_leading(ToolCallSyntax syntax, std::string_view s, std::string_view marker, char separator,
                   const std::vector<std::string>& names) {
  Found f;
  size_t i = skip_space(s, 0);
  size_t begin = i;
  bool marked = false;
  if (!marker.empty()) {
    if (size_t m = s.find(marker); m != std::string_view::npos) {
      begin = m;
      i = m + marker.size();
      marked = true;
    }
  }
  if (!marked && (i == s.size() || !leads_a_call(syntax, s[i]))) return {};
  f.begin = begin;
  if (!read_values(s, i, separator, names, f)) return {};
  return f;
}

Found find_calls(ToolCallSyntax syntax, std::string_view s, const std::vector<std::string>& names) {
  switch (syntax) {
    case ToolCallSyntax::hermes:
      return find_hermes(s, names);
    case ToolCallSyntax::llama3_json:
      return find_leading(syntax, s, kPythonTag, ';', names);
    case ToolCallSyntax::mistral:
      return find_leading(syntax, s, kMistralMarker, 0, names);
    case ToolCallSyntax::json:
      return find_leading(syntax, s, {}, 0, names);
  }
  return {};
}

// The text before the calls, then the text after them, on a line of its own.
std::string join_content(std::string_view before, std::string_view after) {
  std::string out(trim_right(before));
  after = trim(after);
  if (!after.empty()) {
    if (!out.empty()) out += '\n';
    out += after;
  }
  return out;
}

std::string_view marker_of(ToolCallSyntax syntax) {
  switch (syntax) {
    case ToolCallSyntax::hermes:
      return kHermesOpen;
    case ToolCallSyntax::llama3_json:
      return kPythonTag;
    case ToolCallSyntax::mistral:
      return kMistralMarker;
    case ToolCallSyntax::json:
      break;
  }
  return {};
}

}  // namespace

std::string_view to_string(ToolCallSyntax syntax) {
  switch (syntax) {
    case ToolCallSyntax::json:
      return "json";
    case ToolCallSyntax::hermes:
      return "hermes";
    case ToolCallSyntax::llama3_json:
      return "llama3_json";
    case ToolCallSyntax::mistral:
      return "mistral";
  }
  return "json";
}

std::optional<ToolCallSyntax> tool_call_syntax_named(std::string_view name) {
  for (ToolCallSyntax s :
       {ToolCallSyntax::json, ToolCallSyntax::hermes, ToolCallSyntax::llama3_json, ToolCallSyntax::mistral}) {
    if (to_string(s) == name) return s;
  }
  return std::nullopt;
}

ToolCallSyntax detect_tool_call_syntax(std::string_view tpl) {
  if (tpl.find(kHermesOpen) != std::string_view::npos) return ToolCallSyntax::hermes;
  if (tpl.find(kMistralMarker) != std::string_view::npos) return ToolCallSyntax::mistral;
  // Llama 3.1+ templates tell the model to answer with
  // {"name": function name, "parameters": dictionary of argument name and its value}.
  if (tpl.find(kPythonTag) != std::string_view::npos ||
      tpl.find("\"parameters\": dictionary") != std::string_view::npos) {
    return ToolCallSyntax::llama3_json;
  }
  return ToolCallSyntax::json;
}

ToolCallOutput parse_tool_calls(ToolCallSyntax syntax, std::string_view text, const std::vector<std::string>& names) {
  Found f = find_calls(syntax, text, names);
  if (f.calls.empty()) return ToolCallOutput{.content = std::string(text), .calls = {}};
  return ToolCallOutput{.content = join_content(text.substr(0, f.begin), f.after), .calls = std::move(f.calls)};
}

ToolCallStream::ToolCallStream(ToolCallSyntax syntax, std::vector<std::string> names)
    : syntax_(syntax), names_(std::move(names)) {}

std::string ToolCallStream::push(std::string_view piece) {
  text_ += piece;
  if (holding_) return {};
  if (!led_) {
    const size_t first = skip_space(text_, 0);
    if (first == text_.size()) return {};  // only spaces yet: a call may still lead
    if (leads_a_call(syntax_, text_[first])) {
      holding_ = true;
      return {};
    }
    led_ = true;
  }
  const std::string_view marker = marker_of(syntax_);
  size_t end = text_.size();
  if (!marker.empty()) {
    if (size_t m = text_.find(marker, passed_); m != std::string::npos) {
      holding_ = true;
      end = m;
    } else {
      // Hold the longest tail that a marker could start with.
      for (size_t k = std::min(marker.size() - 1, text_.size() - passed_); k > 0; --k) {
        if (std::string_view(text_).substr(text_.size() - k) == marker.substr(0, k)) {
          end = text_.size() - k;
          break;
        }
      }
    }
  }
  // Spaces before a call are not content (parse_tool_calls trims them):
  // they pass once text follows them.
  if (!marker.empty()) {
    while (end > passed_ && is_space(text_[end - 1])) --end;
  }
  std::string out = text_.substr(passed_, end - passed_);
  passed_ = end;
  return out;
}

ToolCallOutput ToolCallStream::finish() {
  Found f = find_calls(syntax_, text_, names_);
  if (f.calls.empty()) {
    ToolCallOutput out{.content = text_.substr(passed_), .calls = {}};
    passed_ = text_.size();
    return out;
  }
  // What push() passed is text before the calls; the rest of the content
  // follows it.
  const std::string_view s(text_);
  const bool said_something = !trim_right(s.substr(0, f.begin)).empty();
  std::string rest = passed_ < f.begin ? std::string(trim_right(s.substr(passed_, f.begin - passed_))) : std::string();
  const std::string_view after = trim(f.after);
  if (!after.empty()) {
    if (said_something) rest += '\n';
    rest += after;
  }
  passed_ = text_.size();
  return ToolCallOutput{.content = std::move(rest), .calls = std::move(f.calls)};
}

}  // namespace troupe::grammar

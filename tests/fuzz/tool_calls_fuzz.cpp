// libFuzzer target for tool calls found in model output
// (grammar/tool_calls.cpp), gpt-oss's harmony reader
// (net/harmony_answer.cpp) and the <think> block's split
// (net/reasoning_split.cpp), the parsers that read what a model wrote: the
// first byte picks the syntax (or harmony) by its value mod 5 and whether
// the template opened a <think> block by the next bit, the second where
// the output is cut in two pieces, the rest is the output. Streamed in
// those pieces, and byte by byte, it must give the reasoning, content and
// calls of the whole parse, and every call's arguments must be a JSON
// object naming a known function.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "grammar/tool_calls.hpp"
#include "net/harmony_answer.hpp"
#include "net/reasoning_split.hpp"
#include "tests/fuzz/fuzz_util.hpp"

using namespace troupe::fuzz;
using troupe::grammar::ToolCallOutput;
using troupe::grammar::ToolCallStream;
using troupe::grammar::ToolCallSyntax;

namespace {

const std::vector<std::string> kNames{"f", "get_weather"};

bool same(const ToolCallOutput& a, const ToolCallOutput& b) {
  if (a.content != b.content || a.calls.size() != b.calls.size()) return false;
  for (size_t k = 0; k < a.calls.size(); ++k) {
    if (a.calls[k].name != b.calls[k].name || a.calls[k].arguments != b.calls[k].arguments) return false;
  }
  return true;
}

// Calls push(piece) for the pieces that cuts (ascending offsets) make of text.
template <class Push>
void in_pieces(std::string_view text, const std::vector<size_t>& cuts, Push&& push) {
  size_t from = 0;
  for (size_t cut : cuts) {
    push(text.substr(from, cut - from));
    from = cut;
  }
  push(text.substr(from));
}

// The offsets that cut text into single bytes.
std::vector<size_t> every_byte(std::string_view text) {
  std::vector<size_t> cuts;
  for (size_t i = 1; i < text.size(); ++i) cuts.push_back(i);
  return cuts;
}

ToolCallOutput streamed(ToolCallSyntax syntax, std::string_view text, const std::vector<size_t>& cuts) {
  ToolCallStream stream(syntax, kNames);
  std::string content;
  in_pieces(text, cuts, [&](std::string_view piece) { content += stream.push(piece); });
  ToolCallOutput end = stream.finish();
  end.content = content + end.content;
  return end;
}

struct Harmony {
  std::string reasoning, content;
  std::vector<troupe::grammar::ToolCall> calls;
  bool operator==(const Harmony& o) const {
    return reasoning == o.reasoning && content == o.content && same({"", calls}, {"", o.calls});
  }
};

Harmony harmony(std::string_view text, const std::vector<size_t>& cuts) {
  troupe::net::HarmonyStream stream(kNames);
  Harmony out;
  auto add = [&](const troupe::net::HarmonyParts& p) {
    out.reasoning += p.reasoning;
    out.content += p.content;
  };
  in_pieces(text, cuts, [&](std::string_view piece) { add(stream.push(piece)); });
  add(stream.finish(out.calls));
  return out;
}

void check_harmony(const uint8_t* data, std::string_view text) {
  const Harmony whole = harmony(text, {});
  for (const auto& call : whole.calls) {
    check(call.name == kNames[0] || call.name == kNames[1]);
    check(nlohmann::json::parse(call.arguments, nullptr, false).is_object());
  }
  // Nothing is made up: every byte out was in the output.
  check(whole.reasoning.size() + whole.content.size() <= text.size());
  check(harmony(text, {std::min<size_t>(data[1], text.size())}) == whole);
  check(harmony(text, every_byte(text)) == whole);
}

troupe::net::ReasoningParts reasoning(std::string_view text, bool open, const std::vector<size_t>& cuts) {
  troupe::net::ReasoningStream stream(open);
  troupe::net::ReasoningParts out;
  auto add = [&](const troupe::net::ReasoningParts& p) {
    out.reasoning += p.reasoning;
    out.content += p.content;
  };
  in_pieces(text, cuts, [&](std::string_view piece) { add(stream.push(piece)); });
  add(stream.finish());
  return out;
}

void check_reasoning(const uint8_t* data, std::string_view text) {
  const bool open = (data[0] / 5) % 2 == 1;
  const troupe::net::ReasoningParts whole = troupe::net::split_reasoning(text, open);
  check(whole.reasoning.size() + whole.content.size() <= text.size());
  // No block opens the output: all of it is the answer.
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (!open && (first == std::string_view::npos || !text.substr(first).starts_with("<think>"))) {
    check(whole.reasoning.empty() && whole.content == text);
  }
  auto same_parts = [&](const troupe::net::ReasoningParts& p) {
    return p.reasoning == whole.reasoning && p.content == whole.content;
  };
  check(same_parts(reasoning(text, open, {std::min<size_t>(data[1], text.size())})));
  check(same_parts(reasoning(text, open, every_byte(text))));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const std::string_view text = as_text(data + 2, size - 2);
  check_reasoning(data, text);
  if (data[0] % 5 == 4) {
    check_harmony(data, text);
    return 0;
  }
  const auto syntax = static_cast<ToolCallSyntax>(data[0] % 5);
  const ToolCallOutput whole = troupe::grammar::parse_tool_calls(syntax, text, kNames);
  if (whole.calls.empty()) check(whole.content == text);
  for (const auto& call : whole.calls) {
    check(call.name == kNames[0] || call.name == kNames[1]);
    check(nlohmann::json::parse(call.arguments, nullptr, false).is_object());
  }
  check(same(streamed(syntax, text, {std::min<size_t>(data[1], text.size())}), whole));
  check(same(streamed(syntax, text, every_byte(text)), whole));
  return 0;
}

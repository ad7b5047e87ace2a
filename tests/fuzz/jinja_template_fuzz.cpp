// libFuzzer target for the Jinja chat-template engine (tokenizer/jinja_*):
// any bytes as a template, parsed, then rendered over a fixed conversation
// (system, user, assistant with a tool call, tool result) with tools and
// add_generation_prompt. A template either renders or fails with
// troupe::Error, within the engine's limits on depth, work, output and time.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "tests/fuzz/fuzz_util.hpp"
#include "tokenizer/chat_template.hpp"

using namespace troupe::fuzz;

namespace {

troupe::ChatRenderInput conversation() {
  using json = nlohmann::ordered_json;
  troupe::ChatRenderInput in;
  in.messages.push_back({.role = "system", .content = "You are terse."});
  in.messages.push_back({.role = "user", .content = "Hi \xc3\xa9 \xf0\x9f\x98\x80, what is 2+2?"});
  in.messages.push_back({.role = "assistant",
                         .content = std::nullopt,
                         .tool_calls = json::parse(R"([{"type": "function", "function":
                             {"name": "add", "arguments": {"a": 2, "b": 2}}}])")});
  in.messages.push_back({.role = "tool", .content = "4", .extra = json{{"tool_call_id", "call_1"}}});
  in.add_generation_prompt = true;
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  in.tools = json::parse(R"([{"type": "function", "function": {"name": "add", "description": "a + b",
      "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}}])");
  return in;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const troupe::ChatRenderInput input = conversation();
  try {
    const auto tpl = troupe::ChatTemplate::parse(as_text(data, size));
    const std::string out = tpl.render(input);
    check(out.size() <= (size_t{64} << 20));
  } catch (const troupe::Error& e) {
    refused(e);
  }
  return 0;
}

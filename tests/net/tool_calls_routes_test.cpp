// Function calling through the chat endpoint over a scripted engine: the
// calls a model writes come back as OpenAI's message.tool_calls (whole
// replies and streams, where no byte of a call leaks into the content), a
// forcing tool_choice reaches the engine as an output constraint, and bad
// tools or choices are 400s naming the field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

#include "grammar/output_format.hpp"
#include "grammar/tool_call_grammar.hpp"
#include "tests/grammar/grammar_test_util.hpp"
#include "tests/net/route_env.hpp"

namespace troupe::net {
namespace {

using nlohmann::json;
using test::Env;
using test::error_of;
using test::sse_data;

constexpr const char* kTools = R"([{"type": "function", "function": {"name": "get_weather",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "now"}}])";

std::string chat(const std::string& extra) {
  return R"({"model": "fake", "messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": )" +
         std::string(kTools) + extra + "}";
}

// A Qwen-style answer that thinks aloud, then calls, cut across tokens
// mid-marker.
void script_a_call(Env& env) {
  env.backend.tool_call_syntax = grammar::ToolCallSyntax::hermes;
  env.backend.script = {.texts = {"Let me check.", "\n<tool_", "call>\n{\"name\": \"get_weather\", ",
                                  "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"}};
}

void expect_the_call(const json& calls) {
  ASSERT_EQ(calls.size(), 1u) << calls;
  EXPECT_EQ(calls[0]["type"], "function");
  EXPECT_EQ(std::string(calls[0]["id"]).rfind("call_", 0), 0u);
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(std::string(calls[0]["function"]["arguments"])), json({{"city", "Paris"}}));
}

TEST(ToolCallRoutes, AWholeReplyCarriesTheCalls) {
  Env env;
  script_a_call(env);
  const HttpReply r = env.call("POST", "/v1/chat/completions", chat(""));
  ASSERT_EQ(r.status, 200) << r.body;
  const json choice = json::parse(r.body)["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["content"], "Let me check.");
  expect_the_call(choice["message"]["tool_calls"]);
  // "auto" with a syntax whose calls open with a marker: the engine holds a
  // call to the tools from that marker on (a lazy format), and the output
  // is otherwise free.
  ASSERT_EQ(env.backend.submitted.size(), 1u);
  const OutputFormat& format = env.backend.submitted[0].params.format;
  EXPECT_EQ(format.kind, OutputFormat::Kind::tool_calls);
  EXPECT_EQ(grammar::tool_call_format_trigger(format.schema).text, "<tool_call>");
}

TEST(ToolCallRoutes, AutoWithBareJsonCallsLeavesTheOutputFree) {
  Env env;  // the json syntax: calls would open with a bare '[' or '{'
  env.backend.script = {.texts = {"[{\"name\": \"now\", \"arguments\": {}}]"}};
  const HttpReply r = env.call("POST", "/v1/chat/completions", chat(""));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_FALSE(env.backend.submitted.at(0).params.format.constrained());
  const json choice = json::parse(r.body)["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "now");
}

TEST(ToolCallRoutes, AStreamHoldsTheCallAndSendsItWhole) {
  Env env;
  script_a_call(env);
  const HttpReply r = env.call("POST", "/v1/chat/completions", chat(R"(, "stream": true)"));
  ASSERT_EQ(r.status, 200) << r.body;
  std::string content, finish;
  json calls = json::array();
  for (const std::string& d : sse_data(r.body)) {
    if (d == "[DONE]") continue;
    const json c = json::parse(d);
    const json& delta = c["choices"][0]["delta"];
    if (delta.contains("content") && delta["content"].is_string()) content += delta["content"];
    if (delta.contains("tool_calls")) {
      for (const json& call : delta["tool_calls"]) {
        EXPECT_EQ(call["index"], calls.size());
        calls.push_back(call);
      }
    }
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(content, "Let me check.");
  EXPECT_EQ(finish, "tool_calls");
  expect_the_call(calls);
}

TEST(ToolCallRoutes, NoneAndNoToolsLeaveTheTextAlone) {
  for (const std::string& body :
       {chat(R"(, "tool_choice": "none")"),
        std::string(R"({"model": "fake", "messages": [{"role": "user", "content": "Hi"}]})")}) {
    Env env;
    script_a_call(env);
    const HttpReply r = env.call("POST", "/v1/chat/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json choice = json::parse(r.body)["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "stop");
    EXPECT_FALSE(choice["message"].contains("tool_calls"));
    EXPECT_EQ(std::string(choice["message"]["content"]).find("<tool_call>"), std::string("Let me check.\n").size());
  }
}

TEST(ToolCallRoutes, AMalformedCallStaysText) {
  Env env;
  env.backend.tool_call_syntax = grammar::ToolCallSyntax::hermes;
  env.backend.script = {
      .texts = {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": }\n</tool_call>"}};
  const HttpReply r = env.call("POST", "/v1/chat/completions", chat(""));
  ASSERT_EQ(r.status, 200) << r.body;
  const json choice = json::parse(r.body)["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "stop");
  EXPECT_FALSE(choice["message"].contains("tool_calls"));
  EXPECT_EQ(choice["message"]["content"], env.backend.script.texts[0]);
}

// "required" and a named function constrain the output in the model's
// syntax: the engine gets a format whose grammar takes only such calls.
TEST(ToolCallRoutes, AForcingChoiceConstrainsTheOutput) {
  Env env;
  script_a_call(env);
  ASSERT_EQ(env.call("POST", "/v1/chat/completions",
                     chat(R"(, "tool_choice": {"type": "function", "function": {"name": "now"}})"))
                .status,
            200);
  ASSERT_EQ(
      env.call("POST", "/v1/chat/completions", chat(R"(, "tool_choice": "required", "parallel_tool_calls": false)"))
          .status,
      200);
  ASSERT_EQ(env.backend.submitted.size(), 2u);
  const OutputFormat& named = env.backend.submitted[0].params.format;
  const OutputFormat& required = env.backend.submitted[1].params.format;
  ASSERT_EQ(named.kind, OutputFormat::Kind::tool_calls);
  ASSERT_EQ(required.kind, OutputFormat::Kind::tool_calls);
  const std::string now = "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";
  const std::string paris =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  using grammar::test::accepts;
  EXPECT_TRUE(accepts(output_grammar(named), now));
  EXPECT_FALSE(accepts(output_grammar(named), paris));
  EXPECT_TRUE(accepts(output_grammar(required), paris));
  EXPECT_FALSE(accepts(output_grammar(required), paris + "\n" + now));  // parallel_tool_calls: false
}

// A model no template taught to call (the json syntax) makes one call
// unless the client asks for parallel calls; one that was taught, many.
TEST(ToolCallRoutes, ParallelCallsByDefaultOnlyForModelsTaughtToCall) {
  const std::string two = R"([{"name": "now", "arguments": {}}, {"name": "now", "arguments": {}}])";
  const std::string two_hermes =
      "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";
  struct Case {
    grammar::ToolCallSyntax syntax;
    std::string extra, text;
    bool many;
  };
  for (const Case& c : {Case{grammar::ToolCallSyntax::json, "", two, false},
                        Case{grammar::ToolCallSyntax::json, R"(, "parallel_tool_calls": true)", two, true},
                        Case{grammar::ToolCallSyntax::hermes, "", two_hermes, true}}) {
    Env env;
    env.backend.tool_call_syntax = c.syntax;
    env.backend.script = {.texts = {"x"}};
    ASSERT_EQ(env.call("POST", "/v1/chat/completions", chat(R"(, "tool_choice": "required")" + c.extra)).status, 200);
    EXPECT_EQ(grammar::test::accepts(output_grammar(env.backend.submitted.at(0).params.format), c.text), c.many)
        << c.extra << c.text;
  }
}

TEST(ToolCallRoutes, BadToolsAndChoicesAre400NamingTheField) {
  Env env;
  struct Case {
    std::string body;
    std::string param;
  };
  const std::string msgs = R"({"model": "fake", "messages": [{"role": "user", "content": "Hi"}])";
  const std::vector<Case> cases{
      {chat(R"(, "tool_choice": {"type": "function", "function": {"name": "later"}})"), "tool_choice.function.name"},
      {chat(R"(, "tool_choice": "sometimes")"), "tool_choice"},
      {msgs + R"(, "tool_choice": "required"})", "tool_choice"},
      {chat(R"(, "tool_choice": "required", "response_format": {"type": "json_object"})"), "tool_choice"},
      {msgs + R"(, "tools": {"name": "f"}})", "tools"},
      {msgs + R"(, "tools": [{"type": "function", "function": {"name": ""}}]})", "tools[0].function.name"},
      {msgs + R"(, "tools": [{"type": "retrieval"}]})", "tools[0].type"},
      {msgs + R"(, "tools": [{"function": {"name": "f"}}, {"function": {"name": "f"}}]})", "tools[1].function.name"},
      {msgs + R"(, "tools": [{"function": {"name": "f", "parameters": "none"}}]})", "tools[0].function.parameters"},
      // A schema the grammar cannot enforce, refused by the engine when the
      // choice forces calls.
      {msgs + R"(, "tools": [{"function": {"name": "f", "parameters": {"type": "object", "properties":
           {"zip": {"type": "string", "pattern": "[0-9]+"}}}}}], "tool_choice": "required"})",
       "tools"},
  };
  // "auto" never refuses a schema: a call to that tool is held to any object.
  env.backend.tool_call_syntax = grammar::ToolCallSyntax::hermes;
  env.backend.script = {.texts = {"ok"}};
  const HttpReply fine = env.call("POST", "/v1/chat/completions", msgs + R"(, "tools": [{"function": {"name": "f",
      "parameters": {"type": "object", "properties": {"zip": {"type": "string", "pattern": "[0-9]+"}}}}}]})");
  EXPECT_EQ(fine.status, 200) << fine.body;
  for (const Case& c : cases) {
    const HttpReply r = env.call("POST", "/v1/chat/completions", c.body);
    EXPECT_EQ(r.status, 400) << c.body << "\n" << r.body;
    if (r.status == 400) {
      EXPECT_EQ(error_of(r)["param"], c.param) << r.body;
    }
  }
}

// A conversation that goes on after a call: OpenAI's clients send the
// arguments back as text, and a template that writes them with `| tojson`
// (Llama 3.1's way) must see the object, not quote the text again.
TEST(ToolCallRoutes, ArgumentsSentBackAsTextReachTheTemplateAsObjects) {
  Env env;
  env.backend.context_length = 256;
  env.backend.chat_template =
      "{% for m in messages %}{% if m.tool_calls %}{% for c in m.tool_calls %}"
      "{\"name\": \"{{ c.function.name }}\", \"parameters\": {{ c.function.arguments | tojson }}}\n"
      "{% endfor %}{% else %}{{ m.content }}\n{% endif %}{% endfor %}";
  const std::string body = R"({"model": "fake", "messages": [
    {"role": "user", "content": "Oslo?"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}},
      {"id": "call_2", "type": "function", "function": {"name": "now", "arguments": "not json"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]})";
  const HttpReply ids = env.call("POST", "/tokenize", body);
  ASSERT_EQ(ids.status, 200) << ids.body;
  const json tokens = {{"tokens", json::parse(ids.body)["tokens"]}};
  const HttpReply text = env.call("POST", "/detokenize", tokens.dump());
  ASSERT_EQ(text.status, 200) << text.body;
  const std::string prompt = json::parse(text.body)["prompt"];
  EXPECT_NE(prompt.find(R"({"name": "get_weather", "parameters": {"city": "Oslo"}})"), std::string::npos) << prompt;
  // Text that is no JSON object stays text.
  EXPECT_NE(prompt.find(R"({"name": "now", "parameters": "not json"})"), std::string::npos) << prompt;
}

// The tool loop's second request on a template that cannot take a turn
// without content (SmolLM2's, the default model's): the assistant turn
// that only called tools renders with empty content instead of failing.
TEST(ToolCallRoutes, TheTurnThatOnlyCalledRendersOnTemplatesThatNeedContent) {
  std::ifstream in(std::string(TROUPE_FIXTURES_DIR) + "/chat_templates.json");
  const json fixture = json::parse(in);
  Env env;
  env.backend.context_length = 512;
  env.backend.chat_template = fixture["templates"]["smollm2"]["source"].get<std::string>();
  for (const std::string content : {"", R"("content": null, )"}) {
    const std::string body = R"({"messages": [{"role": "user", "content": "Oslo?"},
      {"role": "assistant", )" +
                             content + R"("tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]})";
    const HttpReply ids = env.call("POST", "/tokenize", body);
    ASSERT_EQ(ids.status, 200) << ids.body;
    const json tokens = {{"tokens", json::parse(ids.body)["tokens"]}};
    const std::string prompt = json::parse(env.call("POST", "/detokenize", tokens.dump()).body)["prompt"];
    EXPECT_NE(prompt.find("<|im_start|>assistant\n<|im_end|>"), std::string::npos) << prompt;
    EXPECT_NE(prompt.find("sunny"), std::string::npos) << prompt;
  }
}

}  // namespace
}  // namespace troupe::net

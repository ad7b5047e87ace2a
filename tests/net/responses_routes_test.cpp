// OpenAI's Responses API (POST /v1/responses) over a scripted engine: the
// Response object and its events as OpenAI's API reference gives them, the
// prompt the engine gets (the chat route's tokens for the same
// conversation), reasoning and function_call items read out of the output,
// and refusals naming the Responses API's fields.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/net/route_env.hpp"

namespace troupe::net {
namespace {

using nlohmann::json;
using test::Env;

using Event = test::SseEvent;

// The events, each with its place in the stream as sequence_number.
std::vector<Event> response_events(const HttpReply& r) {
  std::vector<Event> out = test::sse_events(r);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].data["sequence_number"], i);
  return out;
}

std::vector<std::string> event_names(const std::vector<Event>& events) {
  std::vector<std::string> out;
  for (const Event& e : events) out.push_back(e.name);
  return out;
}

json responses_body(const json& extra = json::object()) {
  json b = {{"model", "fake"}, {"input", "Hi"}};
  b.update(extra);
  return b;
}

HttpReply post_response(Env& env, const json& b, const std::string& path = "/v1/responses") {
  return env.call("POST", path, b.dump());
}

TEST(ResponsesApi, AResponseObject) {
  Env env;
  env.backend.script = {.texts = {"Hel", "lo"}};
  const HttpReply r = post_response(
      env, responses_body({{"instructions", "Be brief."}, {"temperature", 0.5}, {"metadata", {{"k", "v"}}}}));
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "response");
  EXPECT_EQ(std::string(j["id"]).rfind("resp_", 0), 0u);
  EXPECT_EQ(j["status"], "completed");
  EXPECT_EQ(j["model"], "fake");
  EXPECT_TRUE(j["incomplete_details"].is_null());
  ASSERT_EQ(j["output"].size(), 1u);
  const json& m = j["output"][0];
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["status"], "completed");
  EXPECT_EQ(m["content"][0]["type"], "output_text");
  EXPECT_EQ(m["content"][0]["text"], "Hello");
  EXPECT_EQ(j["usage"]["output_tokens"], 2);
  EXPECT_EQ(j["usage"]["total_tokens"], j["usage"]["input_tokens"].get<int>() + 2);
  // What it repeats of the request.
  EXPECT_EQ(j["instructions"], "Be brief.");
  EXPECT_FLOAT_EQ(j["temperature"].get<float>(), 0.5f);
  EXPECT_EQ(j["metadata"], json({{"k", "v"}}));
  EXPECT_EQ(j["tools"], json::array());
  EXPECT_EQ(j["tool_choice"], "auto");
  EXPECT_FLOAT_EQ(env.backend.submitted[0].params.sampling.temperature, 0.5f);
}

TEST(ResponsesApi, MaxOutputTokensMakesItIncomplete) {
  Env env;
  env.backend.script = {.texts = {"a", "b"}, .reason = EndReason::length};
  const json j = json::parse(post_response(env, responses_body({{"max_output_tokens", 2}})).body);
  EXPECT_EQ(j["status"], "incomplete");
  EXPECT_EQ(j["incomplete_details"], json({{"reason", "max_output_tokens"}}));
  EXPECT_EQ(j["output"][0]["status"], "incomplete");
  EXPECT_EQ(j["max_output_tokens"], 2);
  EXPECT_EQ(env.backend.submitted[0].params.max_new_tokens, 2);
  const std::vector<Event> events =
      response_events(post_response(env, responses_body({{"max_output_tokens", 2}, {"stream", true}})));
  EXPECT_EQ(events.back().name, "response.incomplete");
}

TEST(ResponsesApi, TheStreamsEvents) {
  Env env;
  env.backend.script = {.texts = {"Hel", "lo"}};
  const std::vector<Event> events = response_events(post_response(env, responses_body({{"stream", true}})));
  EXPECT_EQ(event_names(events),
            (std::vector<std::string>{
                "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
                "response.output_text.delta", "response.output_text.delta", "response.output_text.done",
                "response.content_part.done", "response.output_item.done", "response.completed"}));
  EXPECT_EQ(events[0].data["response"]["status"], "in_progress");
  EXPECT_EQ(events[4].data["delta"], "Hel");
  EXPECT_EQ(events[4].data["item_id"], events[2].data["item"]["id"]);
  EXPECT_EQ(events[6].data["text"], "Hello");
  const json& done = events.back().data["response"];
  EXPECT_EQ(done["status"], "completed");
  EXPECT_EQ(done["output"][0]["content"][0]["text"], "Hello");
  EXPECT_EQ(done["usage"]["output_tokens"], 2);
}

TEST(ResponsesApi, ReasoningAndFunctionCallItems) {
  Env env;
  env.backend.reasoning_tags = true;
  env.backend.tool_call_syntax = grammar::ToolCallSyntax::hermes;
  env.backend.script = {.texts = {"<think>", "weather", "</think>", "<tool_call>\n{\"name\": \"get_weather\", ",
                                  "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"}};
  const json tools = json::parse(R"([{"type": "function", "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}])");
  const json j = json::parse(post_response(env, responses_body({{"tools", tools}})).body);
  ASSERT_EQ(j["output"].size(), 2u) << j;
  EXPECT_EQ(j["output"][0]["type"], "reasoning");
  EXPECT_EQ(j["output"][0]["content"][0], json({{"type", "reasoning_text"}, {"text", "weather"}}));
  const json& call = j["output"][1];
  EXPECT_EQ(call["type"], "function_call");
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_EQ(json::parse(call["arguments"].get<std::string>()), json({{"city", "Paris"}}));
  EXPECT_EQ(std::string(call["call_id"]).rfind("call_", 0), 0u);
  EXPECT_EQ(j["tools"], tools);

  const std::vector<Event> events =
      response_events(post_response(env, responses_body({{"tools", tools}, {"stream", true}})));
  EXPECT_EQ(event_names(events),
            (std::vector<std::string>{
                "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
                "response.reasoning_text.delta", "response.reasoning_text.done", "response.content_part.done",
                "response.output_item.done", "response.output_item.added", "response.function_call_arguments.delta",
                "response.function_call_arguments.done", "response.output_item.done", "response.completed"}));
  EXPECT_EQ(events[8].data["output_index"], 1);
  EXPECT_EQ(events.back().data["response"]["output"].size(), 2u);
}

// The engine gets the tokens the chat route's same conversation gives.
TEST(ResponsesApi, InputItemsRenderAsTheChatRouteDoes) {
  Env env;
  env.backend.context_length = 512;
  env.backend.chat_template =
      "{% for m in messages %}[{{ m.role }}{% if m.tool_call_id %}:{{ m.tool_call_id }}{% endif %}]"
      "{% for c in m.tool_calls or [] %}{{ c.id }}={{ c.function.name }}({{ c.function.arguments | tojson }}){% endfor "
      "%}"
      "{{ m.content }}\n{% endfor %}";
  env.backend.script = {.texts = {"ok"}};
  const json responses = {{"model", "fake"},
                          {"instructions", "Be brief."},
                          {"reasoning", {{"effort", "low"}}},
                          {"input",
                           {{{"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "Oslo?"}}}}},
                            {{"type", "reasoning"}, {"summary", json::array()}},
                            {{"type", "function_call"},
                             {"call_id", "call_1"},
                             {"name", "get_weather"},
                             {"arguments", R"({"city":"Oslo"})"}},
                            {{"type", "function_call_output"}, {"call_id", "call_1"}, {"output", "sunny"}},
                            {{"type", "message"}, {"role", "user"}, {"content", "Thanks"}}}}};
  const json chat = {{"model", "fake"},
                     {"reasoning_effort", "low"},
                     {"messages",
                      {{{"role", "system"}, {"content", "Be brief."}},
                       {{"role", "user"}, {"content", "Oslo?"}},
                       {{"role", "assistant"},
                        {"content", nullptr},
                        {"tool_calls",
                         {{{"id", "call_1"},
                           {"type", "function"},
                           {"function", {{"name", "get_weather"}, {"arguments", R"({"city":"Oslo"})"}}}}}}},
                       {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny"}},
                       {{"role", "user"}, {"content", "Thanks"}}}}};
  ASSERT_EQ(post_response(env, responses).status, 200);
  ASSERT_EQ(post_response(env, chat, "/v1/chat/completions").status, 200);
  ASSERT_EQ(env.backend.submitted.size(), 2u);
  EXPECT_EQ(env.backend.submitted[0].prompt, env.backend.submitted[1].prompt);
  const std::string text = env.backend.tokenizer().decode(env.backend.submitted[0].prompt, /*skip_special=*/false);
  EXPECT_NE(text.find("[tool:call_1]sunny"), std::string::npos) << text;
}

TEST(ResponsesApi, TextFormatConstrainsTheOutput) {
  Env env;
  env.backend.script = {.texts = {"{}"}};
  const json schema = {{"type", "object"}, {"properties", {{"age", {{"type", "integer"}}}}}};
  ASSERT_EQ(
      post_response(
          env, responses_body({{"text", {{"format", {{"type", "json_schema"}, {"name", "p"}, {"schema", schema}}}}}}))
          .status,
      200);
  ASSERT_EQ(post_response(env, responses_body({{"text", {{"format", {{"type", "json_object"}}}}}})).status, 200);
  EXPECT_EQ(env.backend.submitted[0].params.format.kind, OutputFormat::Kind::json_schema);
  EXPECT_EQ(json::parse(env.backend.submitted[0].params.format.schema), schema);
  EXPECT_EQ(env.backend.submitted[1].params.format.kind, OutputFormat::Kind::json_object);
}

TEST(ResponsesApi, RefusalsNameTheField) {
  Env env;
  const auto refused = [&](const json& b, const std::string& param, const std::string& words) {
    const HttpReply r = post_response(env, b);
    EXPECT_EQ(r.status, 400) << b;
    const json e = test::error_of(r);
    EXPECT_EQ(e["param"], param) << e;
    EXPECT_NE(e["message"].get<std::string>().find(words), std::string::npos) << e;
  };
  refused({{"model", "fake"}}, "input", "'input' is required");
  refused(responses_body({{"input", json::array()}}), "input", "at least one message");
  refused(responses_body({{"previous_response_id", "resp_1"}}), "previous_response_id", "keeps no responses");
  refused(
      responses_body({{"input", {{{"role", "user"}, {"content", {{{"type", "input_image"}, {"image_url", "x"}}}}}}}}),
      "input[0].content[0].image_url", "does not fetch images");
  refused(responses_body({{"input", {{{"role", "user"}, {"content", {{{"type", "input_file"}, {"file_id", "f"}}}}}}}}),
          "input[0].content[0].type", "'input_file' is not supported");
  refused(responses_body({{"input", {{{"type", "item_reference"}, {"id", "msg_1"}}}}}), "input[0].type",
          "'item_reference'");
  refused(responses_body({{"input", {{{"type", "function_call_output"}, {"output", "x"}}}}}), "input[0].call_id",
          "is required");
  refused(responses_body({{"tools", {{{"type", "web_search"}}}}}), "tools[0].type", "hosted tool");
  refused(responses_body({{"tools", {{{"type", "function"}}}}}), "tools[0].name", "is required");
  refused(responses_body({{"text", {{"format", {{"type", "yaml"}}}}}}), "text.format.type", "'yaml'");
  refused(responses_body({{"max_output_tokens", 0}}), "max_output_tokens", "'max_output_tokens'");
  refused(responses_body({{"temperature", 3}}), "temperature", "'temperature'");
  refused(responses_body({{"model", "gpt-5"}}), "model", "does not exist");
  EXPECT_TRUE(env.backend.submitted.empty());
}

}  // namespace
}  // namespace troupe::net

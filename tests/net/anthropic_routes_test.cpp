// Anthropic's Messages API (net/anthropic_routes.cpp) over a scripted
// engine: the Message body and its stream of events as Anthropic's API
// reference gives them, the prompt the engine gets (the OpenAI route's
// tokens for the same conversation; a trailing assistant turn continued),
// thinking and tool_use blocks read out of the output, count_tokens, and
// every refusal in Anthropic's shape with its status.
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

std::vector<Event> events_of(const HttpReply& r) { return test::sse_events(r); }

std::vector<std::string> names(const std::vector<Event>& events) {
  std::vector<std::string> out;
  for (const Event& e : events) {
    std::string n = e.name;
    if (e.name == "content_block_start") n += ":" + e.data["content_block"]["type"].get<std::string>();
    if (e.name == "content_block_delta") n += ":" + e.data["delta"]["type"].get<std::string>();
    out.push_back(n);
  }
  return out;
}

json anthropic_error(const HttpReply& r, int status, const std::string& type) {
  EXPECT_EQ(r.status, status) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["type"], "error") << r.body;
  EXPECT_EQ(j["error"]["type"], type) << r.body;
  EXPECT_TRUE(j["error"]["message"].is_string()) << r.body;
  return j["error"];
}

json body(const json& extra = json::object()) {
  json b = {{"model", "fake"}, {"max_tokens", 32}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
  b.update(extra);
  return b;
}

HttpReply post(Env& env, const json& b, const std::string& path = "/v1/messages") {
  return env.call("POST", path, b.dump());
}

TEST(AnthropicMessages, AMessageBody) {
  Env env;
  env.backend.script = {.texts = {"Hel", "lo"}};
  const HttpReply r = post(env, body({{"system", "Be brief."}}));
  ASSERT_EQ(r.status, 200) << r.body;
  const json m = json::parse(r.body);
  EXPECT_EQ(m["type"], "message");
  EXPECT_EQ(m["role"], "assistant");
  EXPECT_EQ(m["model"], "fake");
  EXPECT_EQ(std::string(m["id"]).rfind("msg_", 0), 0u);
  EXPECT_EQ(m["content"], json::parse(R"([{"type": "text", "text": "Hello"}])"));
  EXPECT_EQ(m["stop_reason"], "end_turn");
  EXPECT_TRUE(m["stop_sequence"].is_null());
  EXPECT_EQ(m["usage"]["output_tokens"], 2);
  EXPECT_GT(m["usage"]["input_tokens"].get<int>(), 0);
}

TEST(AnthropicMessages, StopReasonsAndTheMaxTokensBound) {
  Env env;
  env.backend.script = {.texts = {"a"}, .reason = EndReason::length};
  EXPECT_EQ(json::parse(post(env, body()).body)["stop_reason"], "max_tokens");
  env.backend.script = {.texts = {"a"}, .stop_string = "END"};
  const json stopped = json::parse(post(env, body({{"stop_sequences", {"END"}}})).body);
  EXPECT_EQ(stopped["stop_reason"], "stop_sequence");
  EXPECT_EQ(stopped["stop_sequence"], "END");
  EXPECT_EQ(env.backend.submitted.back().params.stop, std::vector<std::string>{"END"});
  // Far past the context (Claude Code asks for 32000): served what fits.
  ASSERT_EQ(post(env, body({{"max_tokens", 100000}})).status, 200);
  EXPECT_LT(env.backend.submitted.back().params.max_new_tokens, env.backend.context_length);
}

TEST(AnthropicMessages, TheStreamsEvents) {
  Env env;
  env.backend.script = {.texts = {"Hel", "lo"}};
  const HttpReply r = post(env, body({{"stream", true}}));
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<Event> events = events_of(r);
  EXPECT_EQ(names(events), (std::vector<std::string>{"message_start", "content_block_start:text",
                                                     "content_block_delta:text_delta", "content_block_delta:text_delta",
                                                     "content_block_stop", "message_delta", "message_stop"}));
  EXPECT_EQ(events[0].data["message"]["content"], json::array());
  EXPECT_EQ(events[2].data["delta"]["text"], "Hel");
  EXPECT_EQ(events[3].data["index"], 0);
  const json& delta = events[5].data;
  EXPECT_EQ(delta["delta"]["stop_reason"], "end_turn");
  EXPECT_EQ(delta["usage"]["output_tokens"], 2);
  EXPECT_GT(delta["usage"]["input_tokens"].get<int>(), 0);
}

TEST(AnthropicMessages, ThinkingComesAsItsOwnBlock) {
  Env env;
  env.backend.reasoning_tags = true;
  env.backend.script = {.texts = {"<think>", "hmm", "</think>", "Answer"}};
  const json whole = json::parse(post(env, body({{"thinking", {{"type", "enabled"}, {"budget_tokens", 2048}}}})).body);
  EXPECT_EQ(whole["content"], json::parse(R"([{"type": "thinking", "thinking": "hmm", "signature": ""},
                                              {"type": "text", "text": "Answer"}])"));
  const std::vector<Event> events = events_of(post(env, body({{"stream", true}})));
  EXPECT_EQ(names(events),
            (std::vector<std::string>{
                "message_start", "content_block_start:thinking", "content_block_delta:thinking_delta",
                "content_block_delta:signature_delta", "content_block_stop", "content_block_start:text",
                "content_block_delta:text_delta", "content_block_stop", "message_delta", "message_stop"}));
  EXPECT_EQ(events[5].data["index"], 1);
}

TEST(AnthropicMessages, ToolUseBlocksCarryTheInput) {
  Env env;
  env.backend.tool_call_syntax = grammar::ToolCallSyntax::hermes;
  env.backend.script = {.texts = {"Checking.", "<tool_call>\n{\"name\": \"get_weather\", ",
                                  "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"}};
  const json tools = json::parse(R"([{"name": "get_weather", "description": "Weather now",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}])");
  const json whole = json::parse(post(env, body({{"tools", tools}})).body);
  EXPECT_EQ(whole["stop_reason"], "tool_use");
  ASSERT_EQ(whole["content"].size(), 2u) << whole;
  EXPECT_EQ(whole["content"][0], json({{"type", "text"}, {"text", "Checking."}}));
  EXPECT_EQ(whole["content"][1]["type"], "tool_use");
  EXPECT_EQ(whole["content"][1]["name"], "get_weather");
  EXPECT_EQ(whole["content"][1]["input"], json({{"city", "Paris"}}));

  const std::vector<Event> events = events_of(post(env, body({{"tools", tools}, {"stream", true}})));
  EXPECT_EQ(names(events),
            (std::vector<std::string>{"message_start", "content_block_start:text", "content_block_delta:text_delta",
                                      "content_block_stop", "content_block_start:tool_use",
                                      "content_block_delta:input_json_delta", "content_block_stop", "message_delta",
                                      "message_stop"}));
  EXPECT_EQ(events[4].data["content_block"]["input"], json::object());
  EXPECT_EQ(json::parse(events[5].data["delta"]["partial_json"].get<std::string>()), json({{"city", "Paris"}}));
  EXPECT_EQ(events[7].data["delta"]["stop_reason"], "tool_use");

  // A reply that is all call: message_start still comes first.
  env.backend.script = {
      .texts = {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}", "\n</tool_call>"}};
  const std::vector<Event> only = events_of(post(env, body({{"tools", tools}, {"stream", true}})));
  EXPECT_EQ(names(only), (std::vector<std::string>{"message_start", "content_block_start:tool_use",
                                                   "content_block_delta:input_json_delta", "content_block_stop",
                                                   "message_delta", "message_stop"}));

  // tool_choice "any": the output must be a call (an output constraint).
  ASSERT_EQ(post(env, body({{"tools", tools}, {"tool_choice", {{"type", "any"}}}})).status, 200);
  EXPECT_EQ(env.backend.submitted.back().params.format.kind, OutputFormat::Kind::tool_calls);
}

// The engine gets the tokens the OpenAI route's same conversation gives.
TEST(AnthropicMessages, BlocksRenderAsTheOpenAiRoutesDo) {
  Env env;
  env.backend.context_length = 512;
  env.backend.chat_template =
      "{% for m in messages %}[{{ m.role }}{% if m.tool_call_id %}:{{ m.tool_call_id }}{% endif %}]"
      "{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}"
      "{% for c in m.tool_calls or [] %}{{ c.id }}={{ c.function.name }}({{ c.function.arguments | tojson }}){% endfor "
      "%}"
      "{{ m.content }}\n{% endfor %}";
  env.backend.script = {.texts = {"ok"}};
  const json anthropic = {
      {"model", "fake"},
      {"max_tokens", 8},
      {"system", {{{"type", "text"}, {"text", "Be brief."}}}},
      {"messages",
       {{{"role", "user"}, {"content", "Oslo?"}},
        {{"role", "assistant"},
         {"content",
          {{{"type", "thinking"}, {"thinking", "look it up"}, {"signature", "x"}},
           {{"type", "text"}, {"text", "Checking."}},
           {{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "get_weather"}, {"input", {{"city", "Oslo"}}}}}}},
        {{"role", "user"},
         {"content",
          {{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "sunny"}},
           {{"type", "text"}, {"text", "Thanks"}}}}}}}};
  const json openai = {{"model", "fake"},
                       {"max_tokens", 8},
                       {"messages",
                        {{{"role", "system"}, {"content", "Be brief."}},
                         {{"role", "user"}, {"content", "Oslo?"}},
                         {{"role", "assistant"},
                          {"content", "Checking."},
                          {"reasoning_content", "look it up"},
                          {"tool_calls",
                           {{{"id", "toolu_1"},
                             {"type", "function"},
                             {"function", {{"name", "get_weather"}, {"arguments", R"({"city":"Oslo"})"}}}}}}},
                         {{"role", "tool"}, {"tool_call_id", "toolu_1"}, {"content", "sunny"}},
                         {{"role", "user"}, {"content", "Thanks"}}}}};
  ASSERT_EQ(post(env, anthropic).status, 200);
  ASSERT_EQ(post(env, openai, "/v1/chat/completions").status, 200);
  ASSERT_EQ(env.backend.submitted.size(), 2u);
  EXPECT_EQ(env.backend.submitted[0].prompt, env.backend.submitted[1].prompt);
  const std::string text = env.backend.tokenizer().decode(env.backend.submitted[0].prompt, /*skip_special=*/false);
  EXPECT_NE(text.find("[tool:toolu_1]sunny"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(toolu_1=get_weather({"city": "Oslo"}))"), std::string::npos) << text;

  // count_tokens: the same conversation's count, from the same tokenizer.
  json count = anthropic;
  count.erase("max_tokens");
  const HttpReply counted = post(env, count, "/v1/messages/count_tokens");
  ASSERT_EQ(counted.status, 200) << counted.body;
  EXPECT_EQ(json::parse(counted.body), json({{"input_tokens", env.backend.submitted[0].prompt.size()}}));
  EXPECT_EQ(env.backend.submitted.size(), 2u);  // nothing generated
}

// A trailing assistant turn is continued: the prompt ends inside it,
// without the template's end of turn or a new assistant header.
TEST(AnthropicMessages, ATrailingAssistantTurnIsContinued) {
  Env env;
  env.backend.context_length = 256;
  env.backend.chat_template =
      "{% for m in messages %}<{{ m.role }}>{{ m.content }}</s>{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}";
  env.backend.script = {.texts = {" time"}};
  const json prefill =
      body({{"messages",
             {{{"role", "user"}, {"content", "Tell me"}}, {{"role", "assistant"}, {"content", "Once upon a"}}}}});
  const json m = json::parse(post(env, prefill).body);
  EXPECT_EQ(m["content"][0]["text"], " time");
  const std::string text = env.backend.tokenizer().decode(env.backend.submitted[0].prompt, /*skip_special=*/false);
  EXPECT_TRUE(text.ends_with("<assistant>Once upon a")) << text;
  // The same through vLLM's continue_final_message on the OpenAI route.
  ASSERT_EQ(post(env,
                 {{"model", "fake"},
                  {"continue_final_message", true},
                  {"add_generation_prompt", false},
                  {"messages", prefill["messages"]}},
                 "/v1/chat/completions")
                .status,
            200);
  EXPECT_EQ(env.backend.submitted[1].prompt, env.backend.submitted[0].prompt);
  const json bad = json::parse(
      post(env,
           {{"model", "fake"}, {"continue_final_message", true}, {"messages", {{{"role", "user"}, {"content", "x"}}}}},
           "/v1/chat/completions")
          .body);
  EXPECT_EQ(bad["error"]["param"], "continue_final_message");
  // A template that does not write the content as it is: no place to cut.
  env.backend.chat_template = "{% for m in messages %}{{ m.content | upper }}{% endfor %}";
  const json refused = anthropic_error(post(env, prefill), 400, "invalid_request_error");
  EXPECT_NE(refused["message"].get<std::string>().find("does not write the final message's content"), std::string::npos)
      << refused;
}

// output_config: a JSON schema holds the reply; the effort and the
// thinking switch are template variables.
TEST(AnthropicMessages, OutputConfigAndThinkingReachTheEngine) {
  Env env;
  env.backend.context_length = 256;
  env.backend.chat_template =
      "{% for m in messages %}{{ m.content }}{% endfor %}"
      "{% if reasoning_effort is defined %} effort={{ reasoning_effort }}{% endif %}"
      "{% if enable_thinking is defined %} thinking={{ enable_thinking }}{% endif %}";
  env.backend.script = {.texts = {"{}"}};
  const json schema = {{"type", "object"}, {"properties", {{"age", {{"type", "integer"}}}}}};
  ASSERT_EQ(
      post(env,
           body({{"output_config", {{"format", {{"type", "json_schema"}, {"schema", schema}}}, {"effort", "high"}}},
                 {"thinking", {{"type", "disabled"}}}}))
          .status,
      200);
  const GenerateParams& p = env.backend.submitted.back().params;
  EXPECT_EQ(p.format.kind, OutputFormat::Kind::json_schema);
  EXPECT_EQ(p.format.param, "output_config.format");
  EXPECT_EQ(json::parse(p.format.schema), schema);
  const std::string text = env.backend.tokenizer().decode(env.backend.submitted.back().prompt, /*skip_special=*/false);
  EXPECT_NE(text.find("Hi effort=high thinking=False"), std::string::npos) << text;
  // "adaptive" leaves the template's default, on any model.
  ASSERT_EQ(post(env, body({{"thinking", {{"type", "adaptive"}}}})).status, 200);
  const std::string adaptive =
      env.backend.tokenizer().decode(env.backend.submitted.back().prompt, /*skip_special=*/false);
  EXPECT_EQ(adaptive.find("thinking="), std::string::npos) << adaptive;
  // The beta's top-level spelling.
  ASSERT_EQ(post(env, body({{"output_format", {{"type", "json_schema"}, {"schema", schema}}}})).status, 200);
  EXPECT_EQ(env.backend.submitted.back().params.format.param, "output_format");
}

TEST(AnthropicMessages, RefusalsInAnthropicsShape) {
  Env env;
  const auto refused = [&](const json& b, int status, const std::string& type, const std::string& words) {
    const json e = anthropic_error(post(env, b), status, type);
    EXPECT_NE(e["message"].get<std::string>().find(words), std::string::npos) << b << " -> " << e;
  };
  json no_max = body();
  no_max.erase("max_tokens");
  refused(no_max, 400, "invalid_request_error", "'max_tokens' is required");
  refused(body({{"model", "claude-sonnet-4-5"}}), 404, "not_found_error", "this server serves 'fake'");
  refused(body({{"temperature", 1.5}}), 400, "invalid_request_error", "'temperature'");
  refused(body({{"messages", json::array()}}), 400, "invalid_request_error", "'messages' must not be empty");
  refused(body({{"messages", {{{"role", "system"}, {"content", "x"}}}}}), 400, "invalid_request_error",
          "'messages[0].role' must be 'user' or 'assistant'");
  const auto image = [](const json& source) {
    return body({{"messages", {{{"role", "user"}, {"content", {{{"type", "image"}, {"source", source}}}}}}}});
  };
  refused(image(json::object()), 400, "invalid_request_error", "'messages[0].content[0].source.type' is required");
  refused(image({{"type", "url"}, {"url", "https://example.com/a.png"}}), 400, "invalid_request_error",
          "not supported (only 'base64')");
  refused(image({{"type", "base64"}, {"media_type", "image/png"}, {"data", "iVBOR"}}), 400, "invalid_request_error",
          "holds no image");
  // Good base64, but the served model reads text only (the engine's rule).
  refused(image({{"type", "base64"}, {"media_type", "image/png"}, {"data", "iVBORw0KGgo="}}), 400,
          "invalid_request_error", "reads text only");
  refused(body({{"tools", {{{"type", "web_search_20250305"}, {"name", "web_search"}}}}}), 400, "invalid_request_error",
          "server tools");
  refused(body({{"tools", {{{"name", "f"}}}}}), 400, "invalid_request_error", "'tools[0].input_schema' is required");
  refused(body({{"tool_choice", {{"type", "tool"}}}}), 400, "invalid_request_error", "'tool_choice.name' is required");
  refused(body({{"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}}}), 400, "invalid_request_error",
          "does not think");
  refused(body({{"messages", {{{"role", "user"}, {"content", {{{"type", "tool_result"}}}}}}}}), 400,
          "invalid_request_error", "'messages[0].content[0].tool_use_id' is required");
  refused(body({{"output_config", {{"format", {{"type", "json_object"}}}}}}), 400, "invalid_request_error",
          "'output_config.format.type' must be 'json_schema'");
  refused(body({{"output_config", {{"format", {{"type", "json_schema"}}}}}}), 400, "invalid_request_error",
          "'output_config.format.schema' is required");
  const HttpReply get = env.call("GET", "/v1/messages");
  anthropic_error(get, 405, "api_error");
  EXPECT_EQ(test::header(get, "Allow"), "POST");
  EXPECT_TRUE(env.backend.submitted.empty());
}

TEST(AnthropicMessages, TheKeyMayComeAsXApiKey) {
  CoreOptions options;
  options.api_key = "sekrit";
  Env env(options);
  env.backend.script = {.texts = {"a"}};
  const auto call = [&](const std::string& x_api_key, const std::string& authorization) {
    RouteResult r = env.core.handle({.method = "POST",
                                     .target = "/v1/messages",
                                     .authorization = authorization,
                                     .api_key = x_api_key,
                                     .body = body().dump()});
    if (!r.async) return r.reply;
    auto w = std::make_shared<test::RecordingWriter>();
    r.async->start(w);
    EXPECT_TRUE(w->wait());
    return w->reply;
  };
  EXPECT_EQ(call("sekrit", "").status, 200);
  EXPECT_EQ(call("", "Bearer sekrit").status, 200);  // Claude Code's ANTHROPIC_AUTH_TOKEN
  anthropic_error(call("wrong", ""), 401, "authentication_error");
  anthropic_error(call("", ""), 401, "authentication_error");
}

TEST(AnthropicMessages, AnErrorMidStreamIsAnErrorEvent) {
  Env env;
  env.backend.script = {
      .texts = {"a"}, .reason = EndReason::error, .error_code = Errc::internal, .error_message = "stage 1 failed"};
  const std::vector<Event> events = events_of(post(env, body({{"stream", true}})));
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().name, "error");
  EXPECT_EQ(events.back().data["error"], json({{"type", "api_error"}, {"message", "stage 1 failed"}}));
  EXPECT_TRUE(env.last_writer->ended);
}

}  // namespace
}  // namespace troupe::net

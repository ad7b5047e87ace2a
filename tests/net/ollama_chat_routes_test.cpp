// Ollama's /api/chat and /api/generate (net/ollama_routes.cpp) over a
// scripted engine: the NDJSON lines and the single body as Ollama's
// docs/api.md gives them, the prompt the engine gets (the same tokens as
// the OpenAI route's equivalent request), options mapped to the sampler
// with Ollama's defaults, thinking and tool calls read out of the output,
// and every refusal in Ollama's shape ({"error": "..."}) with its status.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/net/route_env.hpp"

namespace troupe::net {
namespace {

using nlohmann::json;
using test::Env;

// The lines of an NDJSON body, each parsed.
std::vector<json> lines_of(const HttpReply& r) {
  EXPECT_EQ(r.content_type, "application/x-ndjson");
  std::vector<json> out;
  size_t pos = 0;
  while (pos < r.body.size()) {
    const size_t end = r.body.find('\n', pos);
    EXPECT_NE(end, std::string::npos) << "a line without its newline: " << r.body.substr(pos);
    if (end == std::string::npos) break;
    out.push_back(json::parse(r.body.substr(pos, end - pos)));
    pos = end + 1;
  }
  return out;
}

// "2026-12-06T18:22:03.991035953Z": RFC 3339 with nanoseconds, in UTC.
bool rfc3339_nanos(const std::string& s) {
  constexpr std::string_view kShape = "dddd-dd-ddTdd:dd:dd.dddddddddZ";
  if (s.size() != kShape.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (kShape[i] == 'd' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != kShape[i]) return false;
  }
  return true;
}

std::string ollama_error(const HttpReply& r, int status) {
  EXPECT_EQ(r.status, status) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j.size(), 1u) << r.body;
  EXPECT_TRUE(j["error"].is_string()) << r.body;
  return j["error"].is_string() ? j["error"].get<std::string>() : std::string();
}

json chat_body(const json& extra = json::object()) {
  json b = {{"model", "fake"}, {"messages", {{{"role", "user"}, {"content", "Hi"}}}}};
  b.update(extra);
  return b;
}

HttpReply post(Env& env, const std::string& path, const json& body) { return env.call("POST", path, body.dump()); }

// Ollama's counters on the last line (or the single body).
void expect_done(const json& j, const std::string& reason, int completion_tokens) {
  EXPECT_EQ(j["done"], true) << j;
  EXPECT_EQ(j["done_reason"], reason) << j;
  EXPECT_EQ(j["eval_count"], completion_tokens) << j;
  EXPECT_GT(j["prompt_eval_count"].get<int>(), 0) << j;
  for (const char* k : {"total_duration", "load_duration", "prompt_eval_duration", "eval_duration"}) {
    EXPECT_TRUE(j[k].is_number_integer()) << k << " in " << j;
    EXPECT_GE(j[k].get<int64_t>(), 0) << k;
  }
}

TEST(OllamaChat, StreamsJsonLinesEndingInTheCounters) {
  Env env;
  env.backend.script = {.texts = {"Hel", "lo", " there"}};
  const HttpReply r = post(env, "/api/chat", chat_body({{"model", "fake:latest"}}));
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<json> lines = lines_of(r);
  ASSERT_EQ(lines.size(), 4u) << r.body;
  std::string content;
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    EXPECT_EQ(lines[i]["model"], "fake:latest");  // the name as asked
    EXPECT_TRUE(rfc3339_nanos(lines[i]["created_at"].get<std::string>())) << lines[i];
    EXPECT_EQ(lines[i]["message"]["role"], "assistant");
    EXPECT_EQ(lines[i]["done"], false);
    EXPECT_FALSE(lines[i].contains("done_reason"));
    content += lines[i]["message"]["content"].get<std::string>();
  }
  EXPECT_EQ(content, "Hello there");
  EXPECT_EQ(lines.back()["message"]["content"], "");
  expect_done(lines.back(), "stop", 3);
}

TEST(OllamaChat, StreamFalseIsOneBody) {
  Env env;
  env.backend.script = {.texts = {"Hel", "lo"}, .reason = EndReason::length};
  const HttpReply r = post(env, "/api/chat", chat_body({{"stream", false}}));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "application/json");
  const json j = json::parse(r.body);
  EXPECT_EQ(j["model"], "fake");
  EXPECT_EQ(j["message"], json({{"role", "assistant"}, {"content", "Hello"}}));
  expect_done(j, "length", 2);
}

TEST(OllamaChat, NoMessagesLoadsTheModelAndGeneratesNothing) {
  Env env;
  const HttpReply r = post(env, "/api/chat", {{"model", "fake"}, {"messages", json::array()}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["done"], true);
  EXPECT_EQ(j["done_reason"], "load");
  EXPECT_EQ(j["message"]["content"], "");
  EXPECT_TRUE(env.backend.submitted.empty());
  const HttpReply g = post(env, "/api/generate", {{"model", "fake"}, {"keep_alive", "5m"}});
  ASSERT_EQ(g.status, 200) << g.body;
  EXPECT_EQ(json::parse(g.body)["done_reason"], "load");
  EXPECT_EQ(json::parse(g.body)["response"], "");
  EXPECT_TRUE(env.backend.submitted.empty());
}

// The engine gets the tokens the OpenAI route's same conversation gives:
// Ollama's tool_calls (arguments as an object), tool_name and thinking
// reach the template under the names Hugging Face's templates read.
TEST(OllamaChat, MessagesRenderAsTheOpenAiRoutesDo) {
  Env env;
  env.backend.context_length = 512;
  env.backend.chat_template =
      "{% for m in messages %}[{{ m.role }}{% if m.name %}:{{ m.name }}{% endif %}]"
      "{% if m.reasoning_content %}<think>{{ m.reasoning_content }}</think>{% endif %}"
      "{% for c in m.tool_calls or [] %}{{ c.function.name }}({{ c.function.arguments | tojson }}){% endfor %}"
      "{{ m.content }}\n{% endfor %}{% if enable_thinking is defined %}think={{ enable_thinking }}{% endif %}";
  env.backend.script = {.texts = {"ok"}};
  const json ollama = {
      {"model", "fake"},
      {"stream", false},
      {"think", false},
      {"messages",
       {{{"role", "system"}, {"content", "Be brief."}},
        {{"role", "user"}, {"content", "Oslo?"}},
        {{"role", "assistant"},
         {"content", ""},
         {"thinking", "check weather"},
         {"tool_calls", {{{"function", {{"name", "get_weather"}, {"arguments", {{"city", "Oslo"}}}}}}}}},
        {{"role", "tool"}, {"tool_name", "get_weather"}, {"content", "sunny"}}}}};
  const json openai = {{"model", "fake"},
                       {"chat_template_kwargs", {{"enable_thinking", false}}},
                       {"messages",
                        {{{"role", "system"}, {"content", "Be brief."}},
                         {{"role", "user"}, {"content", "Oslo?"}},
                         {{"role", "assistant"},
                          {"content", ""},
                          {"reasoning_content", "check weather"},
                          {"tool_calls",
                           {{{"id", "call_1"},
                             {"type", "function"},
                             {"function", {{"name", "get_weather"}, {"arguments", R"({"city":"Oslo"})"}}}}}}},
                         {{"role", "tool"}, {"name", "get_weather"}, {"content", "sunny"}}}}};
  ASSERT_EQ(post(env, "/api/chat", ollama).status, 200);
  ASSERT_EQ(post(env, "/v1/chat/completions", openai).status, 200);
  ASSERT_EQ(env.backend.submitted.size(), 2u);
  EXPECT_EQ(env.backend.submitted[0].prompt, env.backend.submitted[1].prompt);
  const std::string text = env.backend.tokenizer().decode(env.backend.submitted[0].prompt, /*skip_special=*/false);
  EXPECT_NE(text.find("[tool:get_weather]sunny"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(get_weather({"city": "Oslo"}))"), std::string::npos) << text;
  EXPECT_NE(text.find("think=False"), std::string::npos) << text;
}

// A conversation that ends in the assistant's words goes on from them, as
// vLLM's continue_final_message does on the OpenAI route.
TEST(OllamaChat, ATrailingAssistantMessageIsContinued) {
  Env env;
  env.backend.context_length = 256;
  env.backend.chat_template =
      "{% for m in messages %}<{{ m.role }}>{{ m.content }}</s>{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}";
  env.backend.script = {.texts = {" time"}};
  const json messages = {{{"role", "user"}, {"content", "Tell me"}},
                         {{"role", "assistant"}, {"content", "Once upon a"}}};
  ASSERT_EQ(post(env, "/api/chat", chat_body({{"messages", messages}, {"stream", false}})).status, 200);
  ASSERT_EQ(
      post(env, "/v1/chat/completions", {{"model", "fake"}, {"messages", messages}, {"continue_final_message", true}})
          .status,
      200);
  ASSERT_EQ(env.backend.submitted.size(), 2u);
  EXPECT_EQ(env.backend.submitted[0].prompt, env.backend.submitted[1].prompt);
  const std::string text = env.backend.tokenizer().decode(env.backend.submitted[0].prompt, /*skip_special=*/false);
  EXPECT_TRUE(text.ends_with("<user>Tell me</s><assistant>Once upon a")) << text;
}

// Without "raw", the prompt is the user's message under the chat template
// (and "system" before it); with it, the text as it is.
TEST(OllamaGenerate, ThePromptGoesUnderTheTemplateUnlessRaw) {
  Env env;
  env.backend.script = {.texts = {"A", "B"}};
  const HttpReply r = post(env, "/api/generate", {{"model", "fake"}, {"prompt", "Once"}, {"system", "Tell tales."}});
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<json> lines = lines_of(r);
  ASSERT_EQ(lines.size(), 3u) << r.body;
  EXPECT_EQ(lines[0]["response"], "A");
  EXPECT_EQ(lines[1]["response"], "B");
  EXPECT_FALSE(lines[0].contains("message"));
  expect_done(lines[2], "stop", 2);
  ASSERT_EQ(
      post(env, "/v1/chat/completions",
           {{"model", "fake"},
            {"messages", {{{"role", "system"}, {"content", "Tell tales."}}, {{"role", "user"}, {"content", "Once"}}}}})
          .status,
      200);
  ASSERT_EQ(
      post(env, "/api/generate", {{"model", "fake"}, {"prompt", "Once"}, {"raw", true}, {"stream", false}}).status,
      200);
  ASSERT_EQ(post(env, "/v1/completions", {{"model", "fake"}, {"prompt", "Once"}}).status, 200);
  ASSERT_EQ(env.backend.submitted.size(), 4u);
  EXPECT_EQ(env.backend.submitted[0].prompt, env.backend.submitted[1].prompt);
  EXPECT_EQ(env.backend.submitted[2].prompt, env.backend.submitted[3].prompt);
  EXPECT_NE(env.backend.submitted[0].prompt, env.backend.submitted[2].prompt);
}

TEST(OllamaChat, OptionsReachTheSamplerWithOllamaDefaults) {
  Env env;
  env.backend.script = {.texts = {"x"}};
  ASSERT_EQ(post(env, "/api/chat", chat_body({{"stream", false}})).status, 200);
  const json options = {{"num_predict", 7},
                        {"temperature", 0.25},
                        {"top_k", 5},
                        {"top_p", 0.5},
                        {"min_p", 0.125},
                        {"repeat_penalty", 1.5},
                        {"presence_penalty", 0.5},
                        {"frequency_penalty", 0.25},
                        {"repeat_last_n", 16},
                        {"seed", 42},
                        {"stop", {"a", "b"}},
                        {"num_ctx", 8192},
                        {"num_thread", 8},
                        {"mirostat", 0},
                        {"typical_p", 1.0}};
  ASSERT_EQ(post(env, "/api/chat", chat_body({{"stream", false}, {"options", options}})).status, 200);
  ASSERT_EQ(env.backend.submitted.size(), 2u);
  const SamplingParams& d = env.backend.submitted[0].params.sampling;
  EXPECT_FLOAT_EQ(d.temperature, 0.8f);
  EXPECT_EQ(d.top_k, 40);
  EXPECT_FLOAT_EQ(d.top_p, 0.9f);
  EXPECT_FLOAT_EQ(d.repetition_penalty, 1.0f);
  EXPECT_EQ(d.penalty_last_n, 64);
  const GenerateParams& p = env.backend.submitted[1].params;
  EXPECT_EQ(p.max_new_tokens, 7);
  EXPECT_FLOAT_EQ(p.sampling.temperature, 0.25f);
  EXPECT_EQ(p.sampling.top_k, 5);
  EXPECT_FLOAT_EQ(p.sampling.top_p, 0.5f);
  EXPECT_FLOAT_EQ(p.sampling.min_p, 0.125f);
  EXPECT_FLOAT_EQ(p.sampling.repetition_penalty, 1.5f);
  EXPECT_FLOAT_EQ(p.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(p.sampling.frequency_penalty, 0.25f);
  EXPECT_EQ(p.sampling.penalty_last_n, 16);
  EXPECT_EQ(p.sampling.seed, 42u);
  EXPECT_EQ(p.stop, (std::vector<std::string>{"a", "b"}));
  // -1 (no limit) and -2 (fill the context): to what the context leaves.
  ASSERT_EQ(post(env, "/api/chat", chat_body({{"stream", false}, {"options", {{"num_predict", -1}}}})).status, 200);
  EXPECT_LT(env.backend.submitted.back().params.max_new_tokens, env.backend.context_length);
}

TEST(OllamaChat, FormatJsonAndSchemasConstrainTheOutput) {
  Env env;
  env.backend.script = {.texts = {"{}"}};
  ASSERT_EQ(post(env, "/api/chat", chat_body({{"stream", false}, {"format", "json"}})).status, 200);
  const json schema = {{"type", "object"}, {"properties", {{"age", {{"type", "integer"}}}}}};
  ASSERT_EQ(post(env, "/api/chat", chat_body({{"stream", false}, {"format", schema}})).status, 200);
  ASSERT_EQ(env.backend.submitted.size(), 2u);
  EXPECT_EQ(env.backend.submitted[0].params.format.kind, OutputFormat::Kind::json_object);
  EXPECT_EQ(env.backend.submitted[1].params.format.kind, OutputFormat::Kind::json_schema);
  EXPECT_EQ(json::parse(env.backend.submitted[1].params.format.schema), schema);
}

TEST(OllamaChat, ThinkingComesApart) {
  Env env;
  env.backend.reasoning_tags = true;
  env.backend.script = {.texts = {"<think>", "hmm", "</think>", "Answer"}};
  const HttpReply r = post(env, "/api/chat", chat_body({{"think", true}}));
  ASSERT_EQ(r.status, 200) << r.body;
  std::string thinking, content;
  for (const json& line : lines_of(r)) {
    if (line["message"].contains("thinking")) thinking += line["message"]["thinking"].get<std::string>();
    content += line["message"]["content"].get<std::string>();
  }
  EXPECT_EQ(thinking, "hmm");
  EXPECT_EQ(content, "Answer");
  const HttpReply whole = post(env, "/api/generate", {{"model", "fake"}, {"prompt", "Q"}, {"stream", false}});
  ASSERT_EQ(whole.status, 200) << whole.body;
  EXPECT_EQ(json::parse(whole.body)["thinking"], "hmm");
  EXPECT_EQ(json::parse(whole.body)["response"], "Answer");
}

TEST(OllamaChat, ToolCallsCarryObjectArguments) {
  Env env;
  env.backend.tool_call_syntax = grammar::ToolCallSyntax::hermes;
  env.backend.script = {
      .texts = {"<tool_call>\n{\"name\": \"get_weather\", ", "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"}};
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
  for (const bool stream : {false, true}) {
    const HttpReply r = post(env, "/api/chat", chat_body({{"tools", tools}, {"stream", stream}}));
    ASSERT_EQ(r.status, 200) << r.body;
    json calls = json::array();
    json last;
    if (stream) {
      for (const json& line : lines_of(r)) {
        EXPECT_EQ(line["message"]["content"], "") << line;  // no byte of the call leaks
        if (line["message"].contains("tool_calls"))
          calls.insert(calls.end(), line["message"]["tool_calls"].begin(), line["message"]["tool_calls"].end());
        last = line;
      }
    } else {
      last = json::parse(r.body);
      calls = last["message"]["tool_calls"];
    }
    ASSERT_EQ(calls.size(), 1u) << r.body;
    EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
    EXPECT_EQ(calls[0]["function"]["arguments"], json({{"city", "Paris"}}));
    EXPECT_EQ(std::string(calls[0]["id"]).rfind("call_", 0), 0u);
    EXPECT_EQ(last["done_reason"], "stop");  // Ollama's, with calls or without
  }
}

TEST(OllamaChat, LogprobsComeWithEachLine) {
  Env env;
  env.backend.script = {.texts = {"a", "b"}};
  const HttpReply r = post(env, "/api/chat", chat_body({{"logprobs", true}, {"top_logprobs", 2}}));
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<json> lines = lines_of(r);
  ASSERT_EQ(lines.size(), 3u);
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_EQ(lines[i]["logprobs"].size(), 1u) << lines[i];
    const json& lp = lines[i]["logprobs"][0];
    EXPECT_FLOAT_EQ(lp["logprob"].get<float>(), -0.5f);
    EXPECT_TRUE(lp["token"].is_string());
    EXPECT_TRUE(lp["bytes"].is_array());
  }
  EXPECT_EQ(env.backend.submitted[0].params.sampling.n_logprobs, 2);
  const HttpReply whole =
      post(env, "/api/generate", {{"model", "fake"}, {"prompt", "Q"}, {"stream", false}, {"logprobs", true}});
  ASSERT_EQ(whole.status, 200) << whole.body;
  EXPECT_EQ(json::parse(whole.body)["logprobs"].size(), 2u);
}

TEST(OllamaChat, AnErrorBeforeTheFirstLineKeepsItsStatus) {
  Env env;
  env.backend.context_length = 16;
  std::string long_text;
  for (int i = 0; i < 40; ++i) long_text += "Once upon a time ";
  const HttpReply r = post(env, "/api/chat", chat_body({{"messages", {{{"role", "user"}, {"content", long_text}}}}}));
  const std::string message = ollama_error(r, 400);
  EXPECT_NE(message.find("context"), std::string::npos) << message;
}

TEST(OllamaChat, AnErrorMidStreamIsTheLastLine) {
  Env env;
  env.backend.script = {
      .texts = {"a"}, .reason = EndReason::error, .error_code = Errc::internal, .error_message = "stage 1 failed"};
  const HttpReply r = post(env, "/api/chat", chat_body());
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<json> lines = lines_of(r);
  ASSERT_EQ(lines.size(), 2u) << r.body;
  EXPECT_EQ(lines[0]["message"]["content"], "a");
  EXPECT_EQ(lines[1], json({{"error", "stage 1 failed"}}));
  EXPECT_TRUE(env.last_writer->ended);
}

TEST(OllamaChat, AClientThatLeavesCancelsTheRequest) {
  Env env;
  env.backend.script = {.texts = {"a", "b"}, .hold = true};
  RouteResult r = env.core.handle({.method = "POST", .target = "/api/chat", .body = chat_body().dump()});
  ASSERT_TRUE(r.async);
  auto w = std::make_shared<test::RecordingWriter>();
  w->refuse_chunks = true;  // gone: its first line cannot be sent
  r.async->start(w);
  for (int i = 0; i < 500 && !env.backend.is_cancelled(1); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(env.backend.is_cancelled(1));
}

TEST(OllamaChat, RefusalsNameTheFieldInOllamasShape) {
  Env env;
  const auto refused = [&](const std::string& path, const json& body, int status, const std::string& words) {
    const std::string message = ollama_error(post(env, path, body), status);
    EXPECT_NE(message.find(words), std::string::npos) << body << " -> " << message;
  };
  refused("/api/chat", {{"messages", json::array()}}, 400, "'model' is required");
  refused("/api/chat", chat_body({{"model", "llama3"}}), 404, "model 'llama3' not found");
  refused("/api/chat", chat_body({{"options", {{"temperature", "hot"}}}}), 400,
          "'options.temperature' must be a number");
  refused("/api/chat", chat_body({{"options", {{"top_p", 2}}}}), 400, "'options.top_p'");
  refused("/api/chat", chat_body({{"options", {{"num_predict", 0}}}}), 400, "'options.num_predict'");
  refused("/api/chat", chat_body({{"options", {{"repeat_last_n", -2}}}}), 400, "'options.repeat_last_n'");
  refused("/api/chat", chat_body({{"options", {{"mirostat", 2}}}}), 400, "'options.mirostat' is not supported");
  refused("/api/chat", chat_body({{"options", {{"typical_p", 0.7}}}}), 400, "'options.typical_p' is not supported");
  refused("/api/chat", chat_body({{"options", 3}}), 400, "'options' must be an object");
  refused("/api/chat", chat_body({{"format", "xml"}}), 400, "'format'");
  refused("/api/chat", chat_body({{"think", "extreme"}}), 400, "'think'");
  refused("/api/chat", chat_body({{"think", true}}), 400, "\"fake\" does not support thinking");
  refused("/api/chat", chat_body({{"messages", {{{"role", "narrator"}, {"content", "x"}}}}}), 400,
          "'messages[0].role' must be one of");
  refused("/api/chat", chat_body({{"messages", {{{"role", "user"}, {"content", "x"}, {"images", {"iVBOR"}}}}}}), 400,
          "'messages[0].images[0]' holds no image");
  // Good base64, but the served model reads text only (the engine's rule).
  refused("/api/chat", chat_body({{"messages", {{{"role", "user"}, {"content", "x"}, {"images", {"iVBORw0KGgo="}}}}}}),
          400, "reads text only");
  refused("/api/chat",
          chat_body({{"messages", {{{"role", "assistant"}, {"tool_calls", {{{"function", {{"arguments", 1}}}}}}}}}}),
          400, "'messages[0].tool_calls[0].function.name' is required");
  refused("/api/generate", {{"model", "fake"}, {"prompt", "x"}, {"template", "{{ .Prompt }}"}}, 400,
          "'template' is not supported");
  refused("/api/generate", {{"model", "fake"}, {"prompt", "x"}, {"suffix", "y"}}, 400, "'suffix' is not supported");
  refused("/api/generate", {{"model", "fake"}, {"prompt", "x"}, {"context", {1, 2}}}, 400,
          "'context' is not supported");
  refused("/api/generate", {{"model", "fake"}, {"prompt", "x"}, {"raw", true}, {"system", "s"}}, 400,
          "raw mode does not support system");
  refused("/api/generate", {{"model", "fake"}, {"prompt", "x"}, {"images", {"iVBOR"}}}, 400,
          "'images[0]' holds no image");
  refused("/api/generate", {{"model", "fake"}, {"prompt", "x"}, {"images", {"iVBORw0KGgo="}}}, 400, "reads text only");
  refused("/api/generate", {{"model", "fake"}, {"prompt", "x"}, {"raw", true}, {"images", {"iVBORw0KGgo="}}}, 400,
          "raw mode takes no images");
  const std::string bad_json = ollama_error(env.call("POST", "/api/chat", "{"), 400);
  EXPECT_NE(bad_json.find("not valid JSON"), std::string::npos);
  const HttpReply get = env.call("GET", "/api/chat");
  ollama_error(get, 405);
  EXPECT_EQ(test::header(get, "Allow"), "POST");
  EXPECT_TRUE(env.backend.submitted.empty());
}

TEST(OllamaModelInfo, ShowPsAndTagsDescribeTheServedModel) {
  Env env;
  env.backend.reasoning_tags = true;
  const HttpReply show = post(env, "/api/show", {{"model", "fake:latest"}});
  ASSERT_EQ(show.status, 200) << show.body;
  const json s = json::parse(show.body);
  EXPECT_EQ(s["capabilities"], json({"completion", "tools", "thinking"}));
  bool context = false;
  for (const auto& [key, value] : s["model_info"].items()) {
    if (key.size() > 15 && key.ends_with(".context_length")) context = value == env.backend.context_length.load();
  }
  EXPECT_TRUE(context) << s["model_info"];
  EXPECT_EQ(json::parse(post(env, "/api/show", {{"name", "fake"}}).body)["capabilities"].size(), 3u);
  ollama_error(post(env, "/api/show", {{"model", "other"}}), 404);
  ollama_error(post(env, "/api/show", json::object()), 400);

  const HttpReply ps = env.call("GET", "/api/ps");
  ASSERT_EQ(ps.status, 200) << ps.body;
  const json p = json::parse(ps.body)["models"];
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0]["name"], "fake");
  EXPECT_EQ(p[0]["size"], 3000);  // the fake's weights and KV pages
  EXPECT_EQ(p[0]["context_length"], env.backend.context_length.load());
  EXPECT_TRUE(p[0]["expires_at"].is_string());
  const json tags = json::parse(env.call("GET", "/api/tags").body)["models"];
  EXPECT_EQ(tags[0]["size"], 1000);
  EXPECT_EQ(tags[0]["capabilities"], s["capabilities"]);
}

}  // namespace
}  // namespace troupe::net

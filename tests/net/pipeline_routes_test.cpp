// The routes over the real actor pipeline and stories260K, still without
// sockets: greedy text and logprobs against the Hugging Face transformers
// reference (tests/fixtures/stories260k_logits.json), and a client that
// leaves mid-stream freeing its KV blocks at once.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <set>
#include <thread>

#include "net/pipeline_client.hpp"
#include "net/routes.hpp"
#include "net/ws_protocol.hpp"
#include "tests/net/fake_engine.hpp"
#include "tests/wait_until.hpp"

namespace troupe::net {
namespace {

using nlohmann::json;
using test::RecordingWriter;

class PipelineRoutes : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    backend_ = new PipelineClient(
        {.pipeline = {.model_path = std::string(TROUPE_SHARED_DIR) + "/models/stories260K/stories260K.gguf",
                      .stages = {{.first_layer = 0, .last_layer = -1, .threads = 1}},
                      .n_kv_blocks = 64}});
    ASSERT_TRUE(backend_->wait_loaded()) << backend_->load_state().stage;
    core_ = new ServerCore(*backend_, {});
  }
  static void TearDownTestSuite() {
    delete backend_;  // ends the pipeline first: its callbacks reach the core
    delete core_;
  }

  static json fixture() {
    std::ifstream in(std::string(TROUPE_FIXTURES_DIR) + "/stories260k_logits.json");
    return json::parse(in);
  }

  // The reply to one request, async or not (an error may come at once).
  static auto post(const std::string& target, const std::string& body, std::chrono::seconds limit) {
    RouteResult r = core_->handle({.method = "POST", .target = target, .body = body});
    if (!r.async) return r.reply;
    auto w = std::make_shared<RecordingWriter>();
    r.async->start(w);
    EXPECT_TRUE(w->wait(limit)) << target << " did not answer within " << limit.count() << " s";
    return w->reply;
  }

  static PipelineClient* backend_;
  static ServerCore* core_;
};

PipelineClient* PipelineRoutes::backend_ = nullptr;
ServerCore* PipelineRoutes::core_ = nullptr;

TEST_F(PipelineRoutes, ModelInfo) {
  const ServedModel info = backend_->served_model();
  EXPECT_EQ(info.id, "stories260K");
  // The file says 2048 tokens; the 64 KV pages of 16 tokens hold fewer.
  EXPECT_EQ(info.engine.context_length, 1024);
  EXPECT_EQ(info.engine.bos_text, "<s>");
  EXPECT_EQ(info.engine.n_vocab, 512);
  // K and V, f32, 5 layers of 64 channels (4 KV heads of... the model's kv_dim).
  EXPECT_GT(info.engine.kv_bytes_per_token, 0);
  EXPECT_EQ(backend_->memory_pools().kv_bytes, info.engine.kv_bytes_per_token * 1024);
}

uint64_t tokenizer_messages(const PipelineClient& b) {
  for (const ActorLoad& a : b.actor_loads()) {
    if (a.actor == "tokenizer") return a.messages;
  }
  return 0;
}

// The tokenizer's count once it reaches `want` (or after 10 s): an actor's
// meter counts a message when its handler returns, after the handler has
// passed the request on, so the count can trail the request's completion.
uint64_t tokenizer_messages_reaching(const PipelineClient& b, uint64_t want) {
  troupe::test::wait_until([&] { return tokenizer_messages(b) >= want; }, std::chrono::seconds(10));
  return tokenizer_messages(b);
}

TEST_F(PipelineRoutes, HttpChatAndWebSocketRequestsPassThroughTheTokenizerActor) {
  const uint64_t before = tokenizer_messages(*backend_);
  const json chat = {{"model", "stories260K"},
                     {"messages", {{{"role", "user"}, {"content", "Once upon a time"}}}},
                     {"max_tokens", 3}};
  RouteResult r = core_->handle({.method = "POST", .target = "/v1/chat/completions", .body = chat.dump()});
  ASSERT_TRUE(r.async) << r.reply.body;
  auto w = std::make_shared<RecordingWriter>();
  r.async->start(w);
  ASSERT_TRUE(w->wait());
  ASSERT_EQ(w->reply.status, 200) << w->reply.body;
  // The tokenizer actor took the request: its meter counts it (the
  // detokenizer, scheduler and sampler would not see a request it did not
  // pass on).
  const uint64_t after_http = tokenizer_messages_reaching(*backend_, before + 1);
  EXPECT_EQ(after_http, before + 1);

  auto out = std::make_shared<troupe::test::RecordingWsOutput>();
  auto conn = WsConnection::create(*core_, out);
  conn->on_message(R"({"type": "generate", "id": "w", "prompt": [1, 403, 407], "max_tokens": 3})");
  const bool ended = out->wait_for([](const std::vector<std::string>& frames) {
    return std::any_of(frames.begin(), frames.end(),
                       [](const std::string& f) { return f.find(R"("type":"final")") != std::string::npos; });
  }, std::chrono::seconds(30));
  ASSERT_TRUE(ended) << (out->snapshot().empty() ? std::string("no frames") : out->snapshot().back());
  conn->on_closed();
  EXPECT_EQ(tokenizer_messages_reaching(*backend_, after_http + 1), after_http + 1);
}

TEST_F(PipelineRoutes, GreedyTextAndLogprobsMatchTheReference) {
  const json cases = fixture()["cases"];
  for (const json& c : cases) {
    json body = {{"model", "stories260K"},
                 {"prompt", c["prompt_ids"]},
                 {"max_tokens", c["greedy_ids"].size()},
                 {"temperature", 0},
                 {"logprobs", 5},
                 {"ignore_eos", true}};
    RouteResult r = core_->handle({.method = "POST", .target = "/v1/completions", .body = body.dump()});
    ASSERT_TRUE(r.async) << r.reply.body;
    auto w = std::make_shared<RecordingWriter>();
    r.async->start(w);
    ASSERT_TRUE(w->wait(std::chrono::seconds(60)));
    ASSERT_EQ(w->reply.status, 200) << w->reply.body;
    const json out = json::parse(w->reply.body);
    const json& choice = out["choices"][0];
    EXPECT_EQ(choice["text"], c["greedy_text"]) << c["prompt_text"];
    EXPECT_EQ(out["usage"]["prompt_tokens"], c["prompt_ids"].size());

    // The first token's logprobs: log_softmax of the reference logits.
    std::vector<double> logits = c["last_logits"].get<std::vector<double>>();
    const double mx = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (double l : logits) sum += std::exp(l - mx);
    std::vector<double> ref;
    for (double l : logits) ref.push_back(l - mx - std::log(sum));
    std::sort(ref.rbegin(), ref.rend());
    const json& lp = choice["logprobs"];
    EXPECT_NEAR(lp["token_logprobs"][0].get<double>(), ref[0], 1e-4);
    std::vector<double> top;
    for (const auto& [tok, v] : lp["top_logprobs"][0].items()) top.push_back(v.get<double>());
    std::sort(top.rbegin(), top.rend());
    ASSERT_EQ(top.size(), 5u);
    for (size_t i = 0; i < 5; ++i) EXPECT_NEAR(top[i], ref[i], 1e-4) << i;
  }
}

TEST_F(PipelineRoutes, ResponseFormatJsonSchemaOverHttpAndWebSocket) {
  const json schema = {{"type", "object"},
                       {"properties",
                        {{"title", {{"type", "string"}, {"maxLength", 20}}},
                         {"year", {{"type", "integer"}, {"minimum", 1900}, {"maximum", 2100}}}}},
                       {"required", {"title", "year"}}};
  const json chat = {{"model", "stories260K"},
                     {"messages", {{{"role", "user"}, {"content", "Tell me about a book."}}}},
                     {"max_tokens", 800},
                     {"temperature", 0},
                     {"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "book"}, {"schema", schema}}}}}};
  const auto reply = post("/v1/chat/completions", chat.dump(), std::chrono::seconds(60));
  ASSERT_EQ(reply.status, 200) << reply.body;
  const json out = json::parse(reply.body);
  EXPECT_EQ(out["choices"][0]["finish_reason"], "stop");
  const std::string content = out["choices"][0]["message"]["content"].get<std::string>();
  const json doc = json::parse(content);
  ASSERT_TRUE(doc.is_object()) << content;
  EXPECT_EQ(doc.size(), 2u) << content;
  EXPECT_TRUE(doc["title"].is_string()) << content;
  ASSERT_TRUE(doc["year"].is_number_integer()) << content;
  EXPECT_GE(doc["year"].get<int>(), 1900);
  EXPECT_LE(doc["year"].get<int>(), 2100);

  // A schema the compiler refuses is a 400 naming response_format, before
  // the request takes a queue slot.
  json bad = chat;
  bad["response_format"]["json_schema"]["schema"] = {{"type", "string"}, {"pattern", "^x$"}};
  const auto refused = post("/v1/chat/completions", bad.dump(), std::chrono::seconds(30));
  EXPECT_EQ(refused.status, 400) << refused.body;
  const json err = json::parse(refused.body);
  EXPECT_EQ(err["error"]["param"], "response_format") << refused.body;
  EXPECT_NE(err["error"]["message"].get<std::string>().find("pattern"), std::string::npos) << refused.body;

  // The WebSocket takes the same field.
  auto ws_out = std::make_shared<troupe::test::RecordingWsOutput>();
  auto conn = WsConnection::create(*core_, ws_out);
  conn->on_message(R"({"type": "generate", "id": "j", "prompt": "Once upon a time", "max_tokens": 800,
                       "temperature": 0, "response_format": {"type": "json_schema", "json_schema":
                       {"name": "t", "schema": {"type": "object", "properties": {"ok": {"type": "boolean"},
                       "n": {"enum": [1, 2, 3]}}, "required": ["ok", "n"]}}}})");
  const bool ended = ws_out->wait_for([](const std::vector<std::string>& frames) {
    return std::any_of(frames.begin(), frames.end(),
                       [](const std::string& f) { return f.find(R"("type":"final")") != std::string::npos; });
  }, std::chrono::seconds(60));
  ASSERT_TRUE(ended);
  std::string text;
  for (const std::string& f : ws_out->snapshot()) {
    const json frame = json::parse(f);
    if (frame["type"] == "token") text += frame["text"].get<std::string>();
    if (frame["type"] == "final") {
      EXPECT_EQ(frame["finish_reason"], "stop") << f;
      text += frame["text"].get<std::string>();
    }
  }
  conn->on_closed();
  const json streamed = json::parse(text);
  EXPECT_TRUE(streamed["ok"].is_boolean()) << text;
  EXPECT_TRUE(streamed["n"] == 1 || streamed["n"] == 2 || streamed["n"] == 3) << text;
}

TEST_F(PipelineRoutes, ForcedToolCallsOverHttpAndWebSocket) {
  // stories260K's template (the built-in one) teaches no tool syntax: calls
  // are a JSON array of {"name", "arguments"}.
  EXPECT_EQ(backend_->served_model().engine.tool_call_syntax, grammar::ToolCallSyntax::json);
  const json tools = json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string", "maxLength": 12}, "unit": {"enum": ["c", "f"]}},
      "required": ["city", "unit"]}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
      "properties": {"zone": {"type": "integer", "minimum": -12, "maximum": 14}}, "required": ["zone"]}}}])");
  auto check_call = [](const json& call) {
    EXPECT_EQ(call["type"], "function");
    const json args = json::parse(call["function"]["arguments"].get<std::string>());
    if (call["function"]["name"] == "get_weather") {
      ASSERT_TRUE(args["city"].is_string()) << args;
      EXPECT_LE(args["city"].get<std::string>().size(), 12u * 4);
      EXPECT_TRUE(args["unit"] == "c" || args["unit"] == "f") << args;
    } else {
      EXPECT_EQ(call["function"]["name"], "get_time");
      ASSERT_TRUE(args["zone"].is_number_integer()) << args;
      EXPECT_GE(args["zone"].get<int>(), -12);
      EXPECT_LE(args["zone"].get<int>(), 14);
    }
  };
  json chat = {{"model", "stories260K"},
               {"messages", {{{"role", "user"}, {"content", "What is the weather in Oslo?"}}}},
               {"max_tokens", 600},
               {"temperature", 0},
               {"tools", tools},
               {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}};
  const auto named = post("/v1/chat/completions", chat.dump(), std::chrono::seconds(60));
  ASSERT_EQ(named.status, 200) << named.body;
  const json msg = json::parse(named.body)["choices"][0];
  EXPECT_EQ(msg["finish_reason"], "tool_calls") << named.body;
  EXPECT_TRUE(msg["message"]["content"].is_null()) << named.body;
  ASSERT_EQ(msg["message"]["tool_calls"].size(), 1u) << named.body;
  EXPECT_EQ(msg["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  check_call(msg["message"]["tool_calls"][0]);

  // "required", sampled, one call (a story model allowed parallel calls
  // keeps adding them until max_tokens): any of the tools, each valid.
  chat["tool_choice"] = "required";
  chat["parallel_tool_calls"] = false;
  chat["temperature"] = 1.0;
  std::set<std::string> called;
  for (int seed = 1; seed <= 4; ++seed) {
    chat["seed"] = seed;
    const auto required = post("/v1/chat/completions", chat.dump(), std::chrono::seconds(60));
    ASSERT_EQ(required.status, 200) << required.body;
    const json choice = json::parse(required.body)["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "tool_calls") << required.body;
    ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << required.body;
    check_call(choice["message"]["tool_calls"][0]);
    called.insert(choice["message"]["tool_calls"][0]["function"]["name"].get<std::string>());
  }
  EXPECT_EQ(called.size(), 2u);  // sampling reaches both tools

  // The WebSocket's final frame carries the calls.
  auto ws_out = std::make_shared<troupe::test::RecordingWsOutput>();
  auto conn = WsConnection::create(*core_, ws_out);
  json ws = chat;
  ws.erase("model");
  ws["type"] = "generate";
  ws["id"] = "t";
  ws["temperature"] = 0;
  ws["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_time"}}}};
  conn->on_message(ws.dump());
  const bool ended = ws_out->wait_for([](const std::vector<std::string>& frames) {
    return std::any_of(frames.begin(), frames.end(),
                       [](const std::string& f) { return f.find(R"("type":"final")") != std::string::npos; });
  }, std::chrono::seconds(60));
  ASSERT_TRUE(ended);
  for (const std::string& f : ws_out->snapshot()) {
    const json frame = json::parse(f);
    if (frame["type"] != "final") continue;
    EXPECT_EQ(frame["finish_reason"], "tool_calls") << f;
    ASSERT_EQ(frame["tool_calls"].size(), 1u) << f;
    EXPECT_EQ(frame["tool_calls"][0]["function"]["name"], "get_time");
    check_call(frame["tool_calls"][0]);
  }
  conn->on_closed();
}

TEST_F(PipelineRoutes, ActorLoadsReachTheMetrics) {
  // After the requests above (or this one), every metered actor has run.
  const json body = {{"model", "stories260K"}, {"prompt", "Hi"}, {"max_tokens", 4}};
  RouteResult r = core_->handle({.method = "POST", .target = "/v1/completions", .body = body.dump()});
  ASSERT_TRUE(r.async);
  auto w = std::make_shared<RecordingWriter>();
  r.async->start(w);
  ASSERT_TRUE(w->wait());
  // Once the pipeline is idle every mailbox drains to zero (the count
  // neither leaks nor goes negative). A handler's time and count are added
  // when it returns, which may be after the response it caused has reached
  // the client (the tokenizer forwards the request and then returns; on a
  // loaded machine the whole generation can finish first): wait for those
  // too.
  auto settled = [&] {
    for (const ActorLoad& a : backend_->actor_loads()) {
      if (a.mailbox_depth != 0 || a.messages == 0) return false;
    }
    return true;
  };
  for (int i = 0; i < 500 && !settled(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  std::set<std::string> names;
  for (const ActorLoad& a : backend_->actor_loads()) {
    names.insert(a.actor);
    EXPECT_EQ(a.mailbox_depth, 0) << a.actor;
    EXPECT_GT(a.busy_seconds, 0.0) << a.actor;
    EXPECT_GT(a.messages, 0u) << a.actor;
  }
  EXPECT_EQ(names, (std::set<std::string>{"tokenizer", "scheduler", "executor_0", "sampler", "detokenizer"}));
  const std::string text = core_->metrics_text();
  EXPECT_NE(text.find("troupe_actor_busy_seconds_total{actor=\"executor_0\"}"), std::string::npos);
  EXPECT_NE(text.find("troupe_actor_mailbox_depth{actor=\"scheduler\"}"), std::string::npos);
  EXPECT_NE(text.find("troupe_kv_blocks_peak "), std::string::npos);
}

// Ollama's routes drive the same pipeline as the OpenAI ones: greedy, the
// same prompt gives the same text, and the counters are the usage's.
TEST_F(PipelineRoutes, OllamaRoutesGenerateWhatTheOpenAiRoutesDo) {
  const json options = {{"temperature", 0}, {"num_predict", 20}};
  const json messages = {{{"role", "user"}, {"content", "Once upon a time"}}};
  const HttpReply openai_chat =
      post("/v1/chat/completions",
           json{{"model", "stories260K"}, {"messages", messages}, {"temperature", 0}, {"max_tokens", 20}}.dump(),
           std::chrono::seconds(60));
  ASSERT_EQ(openai_chat.status, 200) << openai_chat.body;
  const json o = json::parse(openai_chat.body);
  const HttpReply ollama_chat = post(
      "/api/chat",
      json{{"model", "stories260K:latest"}, {"messages", messages}, {"stream", false}, {"options", options}}.dump(),
      std::chrono::seconds(60));
  ASSERT_EQ(ollama_chat.status, 200) << ollama_chat.body;
  const json c = json::parse(ollama_chat.body);
  EXPECT_EQ(c["message"]["content"], o["choices"][0]["message"]["content"]);
  EXPECT_FALSE(c["message"]["content"].get<std::string>().empty());
  EXPECT_EQ(c["eval_count"], o["usage"]["completion_tokens"]);
  EXPECT_EQ(c["prompt_eval_count"], o["usage"]["prompt_tokens"]);

  // /api/generate raw, streamed: the text of /v1/completions.
  const HttpReply completion = post(
      "/v1/completions",
      json{{"model", "stories260K"}, {"prompt", "Once upon a time"}, {"temperature", 0}, {"max_tokens", 20}}.dump(),
      std::chrono::seconds(60));
  ASSERT_EQ(completion.status, 200) << completion.body;
  RouteResult r = core_->handle(
      {.method = "POST",
       .target = "/api/generate",
       .body =
           json{{"model", "stories260K"}, {"prompt", "Once upon a time"}, {"raw", true}, {"options", options}}.dump()});
  ASSERT_TRUE(r.async) << r.reply.body;
  auto w = std::make_shared<RecordingWriter>();
  r.async->start(w);
  ASSERT_TRUE(w->wait(std::chrono::seconds(60)));
  ASSERT_TRUE(w->head.has_value());
  EXPECT_EQ(w->head->content_type, "application/x-ndjson");
  std::string text;
  json last;
  for (const std::string& line : w->chunks) {
    last = json::parse(line);
    text += last["response"].get<std::string>();
  }
  EXPECT_EQ(text, json::parse(completion.body)["choices"][0]["text"]);
  EXPECT_EQ(last["done"], true);
  EXPECT_EQ(last["eval_count"], json::parse(completion.body)["usage"]["completion_tokens"]);
  EXPECT_EQ(core_->admission().in_flight(), 0);
}

// A client that leaves mid-stream frees its KV at once, whichever API's
// stream it read: each reply cancels its request.
TEST_F(PipelineRoutes, ClientLeavingMidStreamFreesItsKvAtOnce) {
  const json messages = {{{"role", "user"}, {"content", "Once upon a time"}}};
  const std::pair<const char*, json> asks[] = {
      {"/v1/completions",
       {{"model", "stories260K"},
        {"prompt", "Once upon a time"},
        {"max_tokens", 400},
        {"temperature", 0.8},
        {"ignore_eos", true},
        {"stream", true}}},
      {"/api/chat",
       {{"model", "stories260K"}, {"messages", messages}, {"options", {{"num_predict", 400}, {"temperature", 0.8}}}}},
      {"/v1/messages",
       {{"model", "stories260K"}, {"messages", messages}, {"max_tokens", 400}, {"temperature", 0.8}, {"stream", true}}},
      {"/v1/responses",
       {{"model", "stories260K"},
        {"input", "Once upon a time"},
        {"max_output_tokens", 400},
        {"temperature", 0.8},
        {"stream", true}}}};
  for (const auto& [target, body] : asks) {
    const uint64_t cancelled = backend_->stats().cancelled;
    RouteResult r = core_->handle({.method = "POST", .target = target, .body = body.dump()});
    ASSERT_TRUE(r.async) << target << ": " << r.reply.body;
    auto w = std::make_shared<RecordingWriter>();
    r.async->start(w);
    bool holding = false;
    for (int i = 0; i < 500 && !holding; ++i) {
      holding = backend_->stats().kv_blocks_used > 0;
      if (!holding) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ASSERT_TRUE(holding) << target;
    r.async->cancel();
    ASSERT_TRUE(w->wait()) << target;
    const PipelineStats s = backend_->stats();
    EXPECT_EQ(s.kv_blocks_used, 0) << target;
    EXPECT_EQ(s.running, 0) << target;
    EXPECT_EQ(s.cancelled, cancelled + 1) << target;
    EXPECT_EQ(core_->admission().in_flight(), 0) << target;
  }
}

}  // namespace
}  // namespace troupe::net

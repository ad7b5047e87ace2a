// The routes without sockets, over a scripted backend: status codes and
// OpenAI error bodies for bad input, authentication, overload (429 with
// Retry-After), JSON and SSE replies, UTF-8-safe chunks, cancellation when
// the client goes away or falls behind, and the /metrics exposition.
#include "net/routes.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cctype>
#include <set>
#include <sstream>

#include "tests/net/fake_engine.hpp"
#include "tests/net/route_env.hpp"

namespace troupe::net {
namespace {

using nlohmann::json;
using test::Env;
using test::FakeEngine;
using test::RecordingWriter;
using test::error_of;
using test::header;
using test::sse_data;

TEST(Routes, HealthReadyAndNotFound) {
  Env env;
  EXPECT_EQ(env.call("GET", "/health").status, 200);
  EXPECT_EQ(env.call("GET", "/ready").status, 200);
  env.backend.ready = false;
  const HttpReply loading = env.call("GET", "/ready");
  EXPECT_EQ(loading.status, 503);
  EXPECT_EQ(json::parse(loading.body)["status"], "loading");
  EXPECT_EQ(header(loading, "Retry-After"), "1");
  EXPECT_EQ(env.call("POST", "/v1/completions", R"({"model":"fake","prompt":"x"})").status, 503);
  env.backend.ready = true;

  const HttpReply missing = env.call("GET", "/nope");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(error_of(missing)["type"], "not_found_error");
  const HttpReply wrong = env.call("GET", "/v1/completions");
  EXPECT_EQ(wrong.status, 405);
  EXPECT_EQ(header(wrong, "Allow"), "POST");
  EXPECT_EQ(env.call("GET", "/v1/stream").status, 426);
}

TEST(Routes, ResponseIdsAreRandomThroughout) {
  std::set<std::string> ids;
  std::set<char> last_chars;
  for (int i = 0; i < 200; ++i) {
    const std::string id = new_response_id("cmpl-");
    ASSERT_EQ(id.size(), 5u + 24u);
    EXPECT_EQ(id.rfind("cmpl-", 0), 0u);
    for (char c : id.substr(5)) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << id;
    ids.insert(id);
    last_chars.insert(id.back());
  }
  EXPECT_EQ(ids.size(), 200u);
  EXPECT_GT(last_chars.size(), 20u);  // the tail is as random as the head
}

TEST(Routes, ChatPageIsServed) {
  Env env;
  const HttpReply page = env.call("GET", "/");
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.content_type.rfind("text/html", 0), 0u);
  EXPECT_NE(page.body.find("/app.js"), std::string::npos);
  EXPECT_EQ(env.call("GET", "/app.js").status, 200);
  EXPECT_EQ(env.call("GET", "/style.css").status, 200);
}

TEST(Routes, Models) {
  Env env;
  const json list = json::parse(env.call("GET", "/v1/models").body);
  EXPECT_EQ(list["data"][0]["id"], "fake");
  EXPECT_EQ(env.call("GET", "/v1/models/fake").status, 200);
  EXPECT_EQ(env.call("GET", "/v1/models/other").status, 404);
}

// llama-server's adapter list: ids in order, paths and scales as given at
// start; a POST (llama-server's way to change scales) is refused, saying why.
TEST(Routes, LoraAdaptersAreListed) {
  Env env;
  EXPECT_EQ(json::parse(env.call("GET", "/lora-adapters").body), json::array());
  env.backend.lora = {{.path = "a.gguf", .scale = 1.0f}, {.path = "dir/b", .scale = 0.5f}};
  const HttpReply list = env.call("GET", "/lora-adapters");
  ASSERT_EQ(list.status, 200) << list.body;
  EXPECT_EQ(json::parse(list.body), json::parse(R"([{"id": 0, "path": "a.gguf", "scale": 1.0},
                                                     {"id": 1, "path": "dir/b", "scale": 0.5}])"));
  const HttpReply set = env.call("POST", "/lora-adapters", R"([{"id": 0, "scale": 0.2}])");
  EXPECT_EQ(set.status, 405);
  EXPECT_EQ(header(set, "Allow"), "GET");
  EXPECT_NE(error_of(set)["message"].get<std::string>().find("set when the server starts"), std::string::npos);
  env.backend.ready = false;
  EXPECT_EQ(env.call("GET", "/lora-adapters").status, 503);
}

TEST(Routes, ApiKey) {
  Env env({.api_key = "s3cret"});
  const std::string body = R"({"model":"fake","prompt":"x","max_tokens":2})";
  const HttpReply none = env.call("POST", "/v1/completions", body);
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(header(none, "WWW-Authenticate"), "Bearer");
  EXPECT_EQ(error_of(none)["type"], "authentication_error");
  EXPECT_EQ(env.call("POST", "/v1/completions", body, "Bearer wrong").status, 401);
  EXPECT_EQ(env.call("POST", "/v1/completions", body, "Bearer s3cre").status, 401);
  EXPECT_EQ(env.call("GET", "/v1/models", {}, "Basic s3cret").status, 401);
  // Keys in URLs end up in logs: only the WebSocket upgrade takes one.
  EXPECT_EQ(env.call("GET", "/v1/models?api_key=s3cret").status, 401);
  EXPECT_EQ(env.call("POST", "/v1/completions", body, "Bearer s3cret").status, 200);
  // The scheme is case-insensitive (RFC 9110); the key is not.
  EXPECT_EQ(env.call("POST", "/v1/completions", body, "bearer s3cret").status, 200);
  EXPECT_EQ(env.call("POST", "/v1/completions", body, "BEARER s3cret").status, 200);
  EXPECT_EQ(env.call("POST", "/v1/completions", body, "Bearer S3CRET").status, 401);
  // Health and readiness stay open (for load balancers).
  EXPECT_EQ(env.call("GET", "/health").status, 200);
  // The WebSocket: the header, or the page's query parameter.
  EXPECT_EQ(env.core.check_upgrade({.method = "GET", .target = "/v1/stream"})->status, 401);
  EXPECT_FALSE(env.core.check_upgrade({.method = "GET", .target = "/v1/stream?api_key=s3cret"}).has_value());
  EXPECT_FALSE(
      env.core.check_upgrade({.method = "GET", .target = "/v1/stream", .authorization = "Bearer s3cret"}).has_value());
  EXPECT_EQ(env.core.check_upgrade({.method = "GET", .target = "/elsewhere"})->status, 404);
}

TEST(Routes, BadInputIs400NamingTheField) {
  Env env;
  struct Case {
    const char* target;
    const char* body;
    const char* param;  // null: no field (the JSON as a whole)
  };
  const Case cases[] = {
      {"/v1/completions", "{bad json", nullptr},
      {"/v1/completions", R"({"prompt": "x"})", "model"},
      {"/v1/completions", R"({"model": "gpt-4", "prompt": "x"})", "model"},
      {"/v1/completions", R"({"model": "fake", "prompt": "x", "temperature": "warm"})", "temperature"},
      {"/v1/completions", R"({"model": "fake", "prompt": "x", "max_tokens": 0})", "max_tokens"},
      {"/v1/completions", R"({"model": "fake", "prompt": "x", "max_tokens": 5000})", "max_tokens"},
      {"/v1/chat/completions", R"({"model": "fake"})", "messages"},
      {"/v1/chat/completions", R"({"model": "fake", "messages": [{"role": "user", "content": 1}]})",
       "messages[0].content"},
      {"/v1/completions", R"({"model": "fake", "prompt": [1, 2, 100000]})", "prompt[2]"},
  };
  for (const Case& c : cases) {
    const HttpReply r = env.call("POST", c.target, c.body);
    EXPECT_EQ(r.status, 400) << c.body;
    const json e = error_of(r);
    EXPECT_EQ(e["type"], "invalid_request_error") << c.body;
    if (c.param != nullptr) {
      EXPECT_EQ(e["param"], c.param) << c.body;
    } else {
      EXPECT_TRUE(e["param"].is_null()) << c.body;
    }
  }
  EXPECT_TRUE(env.backend.submitted.empty());
}

TEST(Routes, ContextLengthIsChecked) {
  Env env;
  env.backend.context_length = 16;
  // "Once upon a time" four times is well over 16 tokens.
  const HttpReply long_prompt =
      env.call("POST", "/v1/completions",
               R"({"model": "fake", "prompt": "Once upon a time Once upon a time Once upon a time Once upon a time"})");
  EXPECT_EQ(long_prompt.status, 400);
  EXPECT_EQ(error_of(long_prompt)["param"], "prompt");
  EXPECT_EQ(error_of(long_prompt)["code"], "context_length_exceeded");
  const HttpReply too_many =
      env.call("POST", "/v1/completions", R"({"model": "fake", "prompt": "Once", "max_tokens": 16})");
  EXPECT_EQ(too_many.status, 400);
  EXPECT_EQ(error_of(too_many)["param"], "max_tokens");
  // Absent max_tokens: what is left of the context, for chat.
  env.backend.context_length = 32;
  env.backend.script = {.texts = {"a"}};
  const HttpReply chat =
      env.call("POST", "/v1/chat/completions", R"({"model": "fake", "messages": [{"role": "user", "content": "Hi"}]})");
  EXPECT_EQ(chat.status, 200) << chat.body;
  ASSERT_EQ(env.backend.submitted.size(), 1u);
  const auto& s = env.backend.submitted[0];
  EXPECT_EQ(static_cast<int32_t>(s.prompt.size()) + s.params.max_new_tokens, 32);
}

TEST(Routes, UnknownFieldsAreIgnored) {
  Env env;
  env.backend.script = {.texts = {"ok"}};
  const HttpReply r = env.call("POST", "/v1/completions",
                               R"({"model": "fake", "prompt": "x", "max_tokens": 3, "frobnicate": [1, {}]})");
  EXPECT_EQ(r.status, 200);
}

TEST(Routes, CompletionJsonBody) {
  Env env;
  env.backend.script = {.texts = {"Once", " upon"}, .reason = EndReason::length};
  const HttpReply r = env.call("POST", "/v1/completions",
                               R"({"model": "fake", "prompt": "Hi", "max_tokens": 2, "seed": 7, "echo": true})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], "HiOnce upon");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 2);
  EXPECT_EQ(j["usage"]["prompt_tokens"], static_cast<int>(env.backend.submitted.at(0).prompt.size()));
  EXPECT_EQ(env.backend.submitted[0].params.max_new_tokens, 2);
  EXPECT_EQ(env.backend.submitted[0].params.sampling.seed, 7u);
  EXPECT_EQ(std::string(j["id"]).rfind("cmpl-", 0), 0u);
}

TEST(Routes, ChoicesGetTheirOwnSeeds) {
  Env env;
  env.backend.script = {.texts = {"a"}};
  const HttpReply r =
      env.call("POST", "/v1/completions", R"({"model": "fake", "prompt": ["x", "y"], "n": 2, "seed": 100})");
  ASSERT_EQ(r.status, 200);
  const json j = json::parse(r.body);
  ASSERT_EQ(j["choices"].size(), 4u);
  std::set<uint64_t> seeds;
  for (const auto& s : env.backend.submitted) seeds.insert(s.params.sampling.seed);
  EXPECT_EQ(seeds, (std::set<uint64_t>{100, 101, 102, 103}));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(j["choices"][i]["index"], i);
}

TEST(Routes, ChatStreamIsSseInOpenAiShape) {
  Env env;
  env.backend.script = {.texts = {"Hel", "lo"}};
  const HttpReply r = env.call("POST", "/v1/chat/completions",
                               R"({"model": "fake", "messages": [{"role": "user", "content": "Hi"}], "stream": true,
                                   "stream_options": {"include_usage": true}})");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type.rfind("text/event-stream", 0), 0u);
  EXPECT_TRUE(env.last_writer->ended);
  const std::vector<std::string> data = sse_data(r.body);
  ASSERT_GE(data.size(), 4u);
  EXPECT_EQ(data.back(), "[DONE]");
  std::string text;
  std::string finish;
  for (size_t i = 0; i + 2 < data.size(); ++i) {
    const json c = json::parse(data[i]);
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    EXPECT_TRUE(c["usage"].is_null());
    const json& delta = c["choices"][0]["delta"];
    if (i == 0) {
      EXPECT_EQ(delta["role"], "assistant");
    }
    if (delta.contains("content")) text += delta["content"];
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, "Hello");
  EXPECT_EQ(finish, "stop");
  const json usage = json::parse(data[data.size() - 2]);
  EXPECT_EQ(usage["choices"], json::array());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 2);
}

TEST(Routes, ChunksNeverSplitUtf8) {
  Env env;
  // "€" and "😀" cut across token events, as byte-fallback tokens do.
  env.backend.script = {.texts = {"a\xE2", "\x82", "\xAC", " \xF0\x9F", "\x98\x80", "!"}};
  const HttpReply r =
      env.call("POST", "/v1/completions", R"({"model": "fake", "prompt": "x", "max_tokens": 6, "stream": true})");
  ASSERT_EQ(r.status, 200);
  std::string text;
  for (const std::string& d : sse_data(r.body)) {
    if (d == "[DONE]") continue;
    const json c = json::parse(d);  // throws on invalid UTF-8
    text += c["choices"][0]["text"];
  }
  EXPECT_EQ(text, "a\xE2\x82\xAC \xF0\x9F\x98\x80!");
}

TEST(Routes, EngineErrorBeforeAnyTokenKeepsItsStatus) {
  Env env;
  env.backend.script = {.reason = EndReason::error, .error_code = Errc::out_of_memory, .error_message = "queue full"};
  const HttpReply r =
      env.call("POST", "/v1/completions", R"({"model": "fake", "prompt": "x", "max_tokens": 3, "stream": true})");
  EXPECT_EQ(r.status, 429);
  EXPECT_FALSE(env.last_writer->head.has_value());
  EXPECT_EQ(error_of(r)["message"], "queue full");
  EXPECT_FALSE(header(r, "Retry-After").empty());
}

TEST(Routes, OverloadIs429WithRetryAfter) {
  Env env({.admission = {.max_running = 1, .max_queue = 1, .resume_fraction = 0.5, .degraded_max_tokens = 0}});
  env.backend.script = {.texts = {"a"}, .hold = true};
  const std::string body = R"({"model": "fake", "prompt": "x", "max_tokens": 3})";
  std::vector<std::pair<std::shared_ptr<AsyncReply>, std::shared_ptr<RecordingWriter>>> held;
  for (int i = 0; i < 2; ++i) {
    RouteResult r = env.core.handle({.method = "POST", .target = "/v1/completions", .body = body});
    ASSERT_TRUE(r.async) << r.reply.body;
    auto w = std::make_shared<RecordingWriter>();
    r.async->start(w);
    held.emplace_back(r.async, w);
  }
  const HttpReply refused = env.call("POST", "/v1/completions", body);
  EXPECT_EQ(refused.status, 429);
  EXPECT_EQ(error_of(refused)["type"], "rate_limit_error");
  const int retry = std::stoi(header(refused, "Retry-After"));
  EXPECT_GE(retry, 1);
  EXPECT_LE(retry, 60);
  EXPECT_EQ(env.backend.submitted.size(), 2u);
  // The clients leave: their requests are cancelled, capacity returns.
  for (auto& [reply, writer] : held) {
    reply->cancel();
    EXPECT_TRUE(writer->wait());
  }
  EXPECT_EQ(env.core.admission().in_flight(), 0);
  env.backend.script = {.texts = {"b"}};
  EXPECT_EQ(env.call("POST", "/v1/completions", body).status, 200);
}

TEST(Routes, ClientGoneCancelsEveryChoice) {
  Env env;
  env.backend.script = {.texts = {"a"}, .hold = true};
  RouteResult r = env.core.handle({.method = "POST",
                                   .target = "/v1/completions",
                                   .body = R"({"model": "fake", "prompt": "x", "n": 3, "stream": true})"});
  ASSERT_TRUE(r.async);
  auto w = std::make_shared<RecordingWriter>();
  r.async->start(w);
  r.async->cancel();
  EXPECT_TRUE(w->wait());
  ASSERT_EQ(env.backend.submitted.size(), 3u);
  for (const auto& s : env.backend.submitted) EXPECT_TRUE(env.backend.is_cancelled(s.id)) << s.id;
  EXPECT_EQ(env.core.admission().in_flight(), 0);
}

// Graceful shutdown at the routes (net/server.cpp drives it): draining
// refuses new work and /ready, and the jobs still running end with a last
// chunk per choice (finish_reason "cancelled"), one error event and [DONE].
TEST(Routes, ShutdownDrainsAndEndsStreamsCleanly) {
  Env env;
  env.backend.script = {.texts = {"a"}, .hold = true};
  RouteResult r = env.core.handle({.method = "POST",
                                   .target = "/v1/completions",
                                   .body = R"({"model": "fake", "prompt": "x", "n": 2, "stream": true})"});
  ASSERT_TRUE(r.async);
  auto w = std::make_shared<RecordingWriter>();
  r.async->start(w);
  env.core.admission().begin_drain();
  const HttpReply ready = env.call("GET", "/ready");
  EXPECT_EQ(ready.status, 503);
  EXPECT_EQ(json::parse(ready.body)["status"], "draining");
  const HttpReply refused = env.call("POST", "/v1/completions", R"({"model": "fake", "prompt": "x", "max_tokens": 2})");
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(error_of(refused)["code"], "server_shutting_down");
  EXPECT_FALSE(header(refused, "Retry-After").empty());
  EXPECT_EQ(env.backend.submitted.size(), 2u);

  EXPECT_EQ(env.core.jobs().shutdown_all(), 1u);
  ASSERT_TRUE(w->wait());
  EXPECT_TRUE(w->ended);
  std::string body;
  for (const std::string& c : w->chunks) body += c;
  const std::vector<std::string> data = sse_data(body);
  ASSERT_GE(data.size(), 4u);
  EXPECT_EQ(data.back(), "[DONE]");
  std::set<int> finished;
  int errors = 0;
  for (size_t i = 0; i + 1 < data.size(); ++i) {
    const json c = json::parse(data[i]);
    if (c.contains("error")) {
      ++errors;
      EXPECT_EQ(c["error"]["code"], "server_shutting_down");
      continue;
    }
    const json& choice = c["choices"][0];
    if (!choice["finish_reason"].is_null()) {
      EXPECT_EQ(choice["finish_reason"], "cancelled");
      finished.insert(choice["index"].get<int>());
    }
  }
  EXPECT_EQ(finished, (std::set<int>{0, 1}));
  EXPECT_EQ(errors, 1);
  EXPECT_EQ(env.core.admission().in_flight(), 0);
}

TEST(Routes, SlowClientIsCancelled) {
  Env env;
  env.backend.script = {.texts = {"a", "b", "c"}, .hold = true};
  RouteResult r = env.core.handle(
      {.method = "POST", .target = "/v1/completions", .body = R"({"model": "fake", "prompt": "x", "stream": true})"});
  ASSERT_TRUE(r.async);
  auto w = std::make_shared<RecordingWriter>();
  w->refuse_chunks = true;  // the session's send queue is over its bound
  r.async->start(w);
  EXPECT_TRUE(w->wait());
  ASSERT_EQ(env.backend.submitted.size(), 1u);
  EXPECT_TRUE(env.backend.is_cancelled(env.backend.submitted[0].id));
}

TEST(Routes, MetricsExposition) {
  Env env;
  env.backend.script = {.texts = {"a", "b"}};
  ASSERT_EQ(env.call("POST", "/v1/completions", R"({"model": "fake", "prompt": "x", "max_tokens": 2})").status, 200);
  env.call("POST", "/v1/completions", "{oops");
  const HttpReply m = env.call("GET", "/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(m.content_type.rfind("text/plain; version=0.0.4", 0), 0u);
  // Every series is troupe_*, and there are at least 20 metric families.
  std::set<std::string> families;
  std::istringstream in(m.body);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# TYPE ", 0) == 0) families.insert(line.substr(7, line.find(' ', 7) - 7));
    if (!line.empty() && line[0] != '#') {
      EXPECT_EQ(line.rfind("troupe_", 0), 0u) << line;
    }
  }
  EXPECT_GE(families.size(), 20u);
  for (const char* name : {"troupe_time_to_first_token_seconds", "troupe_inter_token_latency_seconds",
                           "troupe_e2e_request_latency_seconds", "troupe_queue_time_seconds", "troupe_requests_running",
                           "troupe_requests_waiting", "troupe_kv_blocks", "troupe_prefix_cache_hit_rate",
                           "troupe_preemptions_total", "troupe_memory_pool_bytes", "troupe_kv_fragmentation_ratio",
                           "troupe_prompt_tokens_per_second", "troupe_generation_tokens_per_second"}) {
    EXPECT_TRUE(families.count(name)) << name;
  }
  auto value = [&](const std::string& series) {
    std::string key = "\n";
    key += series;
    key += ' ';
    const size_t at = m.body.find(key);
    return at == std::string::npos ? -1.0 : std::stod(m.body.substr(at + key.size()));
  };
  EXPECT_EQ(value("troupe_generation_tokens_total"), 2);
  EXPECT_EQ(value("troupe_requests_finished_total{reason=\"stop\"}"), 1);
  EXPECT_EQ(value("troupe_requests_rejected_total{reason=\"invalid\"}"), 1);
  EXPECT_EQ(value("troupe_kv_blocks{state=\"used\"}"), 10);
  EXPECT_EQ(value("troupe_time_to_first_token_seconds_count"), 1);
  EXPECT_EQ(value("troupe_inter_token_latency_seconds_count"), 1);
}

}  // namespace
}  // namespace troupe::net

// The routes over a FakeEngine without sockets: a ServerCore, a call that
// waits for an asynchronous reply, and readers of error bodies, headers and
// SSE events.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "net/routes.hpp"
#include "tests/net/fake_engine.hpp"

namespace troupe::net::test {

using nlohmann::json;
using troupe::test::FakeEngine;
using troupe::test::RecordingWriter;

struct Env {
  explicit Env(CoreOptions options = {}) : core(backend, std::move(options)) {}
  ~Env() { backend.drain(); }  // before the core the callbacks reach goes away

  // A reply, immediate or asynchronous, waited for.
  HttpReply call(const std::string& method, const std::string& target, const std::string& body = {},
                 const std::string& auth = {}) {
    RouteResult r = core.handle({.method = method, .target = target, .authorization = auth, .body = body});
    if (!r.async) return r.reply;
    auto w = std::make_shared<RecordingWriter>();
    r.async->start(w);
    EXPECT_TRUE(w->wait());
    last_writer = w;
    if (w->head) {
      HttpReply streamed = *w->head;
      for (const std::string& c : w->chunks) streamed.body += c;
      return streamed;
    }
    return w->reply;
  }

  FakeEngine backend;
  ServerCore core;
  std::shared_ptr<RecordingWriter> last_writer;
};

inline json error_of(const HttpReply& r) {
  EXPECT_EQ(r.content_type, "application/json");
  const json j = json::parse(r.body);
  EXPECT_TRUE(j.contains("error")) << r.body;
  for (const char* k : {"message", "type", "param", "code"}) EXPECT_TRUE(j["error"].contains(k)) << k;
  return j["error"];
}

inline std::string header(const HttpReply& r, const std::string& name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return {};
}

// The data payloads of an SSE body, in order.
inline std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    out.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end + 2;
  }
  return out;
}

// The named events of an SSE body ("event: <name>" and its "data: <json>":
// Anthropic's and the Responses API's streams); each event's name is its
// data's "type".
struct SseEvent {
  std::string name;
  json data;
};

inline std::vector<SseEvent> sse_events(const HttpReply& r) {
  EXPECT_EQ(r.content_type, "text/event-stream; charset=utf-8");
  std::vector<SseEvent> out;
  size_t pos = 0;
  while ((pos = r.body.find("event: ", pos)) != std::string::npos) {
    const size_t name_end = r.body.find('\n', pos);
    const size_t data = r.body.find("data: ", name_end);
    const size_t end = r.body.find("\n\n", data);
    out.push_back({r.body.substr(pos + 7, name_end - pos - 7), json::parse(r.body.substr(data + 6, end - data - 6))});
    EXPECT_EQ(out.back().name, out.back().data["type"]);
    pos = end + 2;
  }
  return out;
}

// A streamed chat choice as its chunks add up: the deltas' reasoning and
// content, the number of tool calls, and the finish_reason.
struct StreamedChat {
  std::string reasoning, content, finish;
  size_t calls = 0;
};

inline StreamedChat read_chat_stream(const std::string& body) {
  StreamedChat s;
  for (const std::string& d : sse_data(body)) {
    if (d == "[DONE]") continue;
    const json c = json::parse(d)["choices"][0];
    const json& delta = c["delta"];
    if (delta.contains("reasoning_content")) s.reasoning += delta["reasoning_content"].get<std::string>();
    if (delta.contains("content") && delta["content"].is_string()) s.content += delta["content"].get<std::string>();
    if (delta.contains("tool_calls")) s.calls += delta["tool_calls"].size();
    if (!c["finish_reason"].is_null()) s.finish = c["finish_reason"];
  }
  return s;
}

}  // namespace troupe::net::test

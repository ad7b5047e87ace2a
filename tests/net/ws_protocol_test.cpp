// The WebSocket protocol without a socket: several requests at once under
// the client's ids, token and final frames, cancel by id, errors as frames,
// and everything cancelled when the connection closes.
#include "net/ws_protocol.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "net/routes.hpp"
#include "tests/net/fake_engine.hpp"

namespace troupe::net {
namespace {

using nlohmann::json;
using test::FakeEngine;
using troupe::test::RecordingWsOutput;

struct WsEnv {
  explicit WsEnv(CoreOptions options = {})
      : core(backend, std::move(options)),
        out(std::make_shared<RecordingWsOutput>()),
        conn(WsConnection::create(core, out)) {}
  ~WsEnv() {
    conn->on_closed();
    backend.drain();
  }

  std::vector<json> frames() {
    std::vector<json> out_frames;
    for (const std::string& f : out->snapshot()) out_frames.push_back(json::parse(f));
    return out_frames;
  }
  // Waits until a frame of `type` for `id` has arrived.
  bool wait_frame(const std::string& type, const std::string& id) {
    return out->wait_for([&](const std::vector<std::string>& fs) {
      for (const std::string& f : fs) {
        const json j = json::parse(f);
        if (j["type"] == type && j["id"] == id) return true;
      }
      return false;
    });
  }

  FakeEngine backend;
  ServerCore core;
  std::shared_ptr<RecordingWsOutput> out;
  std::shared_ptr<WsConnection> conn;
};

TEST(WsProtocol, Hello) {
  WsEnv env;
  const json hello = json::parse(env.conn->hello());
  EXPECT_EQ(hello["type"], "hello");
  EXPECT_EQ(hello["model"], "fake");
}

TEST(WsProtocol, ConcurrentRequestsOnOneConnection) {
  WsEnv env;
  env.backend.script = {.texts = {"x", "y", "z"}, .reason = EndReason::length};
  env.conn->on_message(R"({"type": "generate", "id": "a", "prompt": "Once", "max_tokens": 3})");
  env.conn->on_message(
      R"({"type": "generate", "id": "b", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3})");
  ASSERT_TRUE(env.wait_frame("final", "a"));
  ASSERT_TRUE(env.wait_frame("final", "b"));
  std::map<std::string, std::string> text;
  std::map<std::string, int> finals;
  for (const json& f : env.frames()) {
    if (f["type"] == "token") text[f["id"]] += f["text"];
    if (f["type"] == "final") {
      ++finals[f["id"]];
      EXPECT_EQ(f["finish_reason"], "length");
      EXPECT_EQ(f["usage"]["completion_tokens"], 3);
    }
  }
  EXPECT_EQ(text["a"], "xyz");
  EXPECT_EQ(text["b"], "xyz");
  EXPECT_EQ(finals["a"], 1);
  EXPECT_EQ(finals["b"], 1);
  for (int i = 0; i < 1000 && env.conn->running() != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(env.conn->running(), 0u);
}

TEST(WsProtocol, CancelById) {
  WsEnv env;
  env.backend.script = {.texts = {"x"}, .hold = true};
  env.conn->on_message(R"({"type": "generate", "id": "keep", "prompt": "a"})");
  env.conn->on_message(R"({"type": "generate", "id": "stop-me", "prompt": "b"})");
  ASSERT_TRUE(env.wait_frame("token", "stop-me"));
  env.conn->on_message(R"({"type": "cancel", "id": "stop-me"})");
  ASSERT_TRUE(env.wait_frame("final", "stop-me"));
  for (const json& f : env.frames()) {
    if (f["type"] == "final") {
      EXPECT_EQ(f["id"], "stop-me");
      EXPECT_EQ(f["finish_reason"], "cancelled");
    }
  }
  // The request leaves the connection's table just after its final frame.
  for (int i = 0; i < 1000 && env.conn->running() != 1; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(env.conn->running(), 1u);
  // Cancelling an unknown or finished id is no error.
  env.conn->on_message(R"({"type": "cancel", "id": "never"})");
  for (const json& f : env.frames()) EXPECT_NE(f["type"], "error");
}

TEST(WsProtocol, ErrorsAreFrames) {
  WsEnv env({.limits = {.ws_max_requests = 1}});
  env.conn->on_message("{not json");
  env.conn->on_message(R"({"type": "generate", "id": "t", "prompt": "a", "temperature": 5})");
  env.conn->on_message(R"({"type": "generate", "id": "m", "model": "other", "prompt": "a"})");
  env.backend.script = {.texts = {"x"}, .hold = true};
  env.conn->on_message(R"({"type": "generate", "id": "r1", "prompt": "a"})");
  env.conn->on_message(R"({"type": "generate", "id": "r1", "prompt": "a"})");
  env.conn->on_message(R"({"type": "generate", "id": "r2", "prompt": "a"})");
  std::vector<json> errors;
  for (const json& f : env.frames()) {
    if (f["type"] == "error") errors.push_back(f);
  }
  ASSERT_EQ(errors.size(), 5u);
  EXPECT_TRUE(errors[0]["id"].is_null());
  EXPECT_EQ(errors[0]["error"]["code"], "invalid_json");
  EXPECT_EQ(errors[1]["id"], "t");
  EXPECT_EQ(errors[1]["error"]["param"], "temperature");
  EXPECT_EQ(errors[2]["id"], "m");
  EXPECT_EQ(errors[2]["error"]["param"], "model");
  EXPECT_EQ(errors[3]["id"], "r1");
  EXPECT_EQ(errors[3]["error"]["code"], "duplicate_id");
  EXPECT_EQ(errors[4]["id"], "r2");
  EXPECT_EQ(errors[4]["error"]["code"], "too_many_requests");
  EXPECT_GE(errors[4]["retry_after"], 1);
}

// Graceful shutdown: every running id gets its final ("cancelled"), and a
// new generate is refused with 503 server_shutting_down.
TEST(WsProtocol, ShutdownSendsAFinalForEveryRunningId) {
  WsEnv env;
  env.backend.script = {.texts = {"x"}, .hold = true};
  env.conn->on_message(R"({"type": "generate", "id": "a", "prompt": "Once"})");
  env.conn->on_message(R"({"type": "generate", "id": "b", "prompt": "Once"})");
  ASSERT_TRUE(env.wait_frame("token", "a"));
  ASSERT_TRUE(env.wait_frame("token", "b"));
  env.core.admission().begin_drain();
  env.conn->on_message(R"({"type": "generate", "id": "c", "prompt": "Once"})");
  EXPECT_EQ(env.core.jobs().shutdown_all(), 2u);
  ASSERT_TRUE(env.wait_frame("final", "a"));
  ASSERT_TRUE(env.wait_frame("final", "b"));
  for (const json& f : env.frames()) {
    if (f["type"] == "final") {
      EXPECT_EQ(f["finish_reason"], "cancelled");
    }
    if (f["type"] == "error") {
      EXPECT_EQ(f["id"], "c");
      EXPECT_EQ(f["error"]["code"], "server_shutting_down");
    }
  }
}

TEST(WsProtocol, ClosingCancelsEverything) {
  WsEnv env;
  env.backend.script = {.texts = {"x"}, .hold = true};
  env.conn->on_message(R"({"type": "generate", "id": "1", "prompt": "a"})");
  env.conn->on_message(R"({"type": "generate", "id": "2", "prompt": "b"})");
  ASSERT_EQ(env.backend.submitted.size(), 2u);
  env.conn->on_closed();
  for (const auto& s : env.backend.submitted) EXPECT_TRUE(env.backend.is_cancelled(s.id));
  // A message after the close starts nothing.
  env.conn->on_message(R"({"type": "generate", "id": "3", "prompt": "c"})");
  EXPECT_EQ(env.backend.submitted.size(), 2u);
}

}  // namespace
}  // namespace troupe::net

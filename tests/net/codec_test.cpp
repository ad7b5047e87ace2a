// Response JSON in the shapes of OpenAI's API reference (the fields its
// clients read), the WebSocket frames, HTTP reply bytes and chunk framing,
// and the UTF-8 joiner.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "net/openai_response.hpp"
#include "net/reply_bytes.hpp"
#include "net/utf8_joiner.hpp"

namespace troupe::net {
namespace {

using nlohmann::json;

const ResponseMeta kCompletion{.endpoint = Endpoint::completions, .id = "cmpl-1", .created = 17, .model = "m"};
const ResponseMeta kChat{.endpoint = Endpoint::chat, .id = "chatcmpl-1", .created = 17, .model = "m"};

TEST(ResponseJson, CompletionBody) {
  const json j = json::parse(response_body(kCompletion, {{.index = 0, .text = "Hi", .finish_reason = "length"}},
                                           {.prompt_tokens = 3, .completion_tokens = 2}));
  EXPECT_EQ(j["id"], "cmpl-1");
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["created"], 17);
  EXPECT_EQ(j["model"], "m");
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["text"], "Hi");
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"], (json{{"prompt_tokens", 3}, {"completion_tokens", 2}, {"total_tokens", 5}}));
}

TEST(ResponseJson, ChatBodyAndLogprobs) {
  ChoiceOutput c{.index = 0, .text = "Yo", .finish_reason = "stop", .with_logprobs = true};
  TokenLogprobs lp;
  lp.chosen = token_alternative("Y", -0.25f);
  lp.top = {token_alternative("Y", -0.25f), token_alternative("\xE2\x82", -2.0f)};
  c.logprobs.push_back(lp);
  const json j = json::parse(response_body(kChat, {c}, {.prompt_tokens = 1, .completion_tokens = 1}));
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"], (json{{"role", "assistant"}, {"content", "Yo"}}));
  const json& content = j["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 1u);
  EXPECT_EQ(content[0]["token"], "Y");
  EXPECT_FLOAT_EQ(content[0]["logprob"].get<float>(), -0.25f);
  EXPECT_EQ(content[0]["bytes"], json::array({89}));
  ASSERT_EQ(content[0]["top_logprobs"].size(), 2u);
  // A token that is half a character: its text repaired, its bytes exact.
  EXPECT_EQ(content[0]["top_logprobs"][1]["token"], "\xEF\xBF\xBD");
  EXPECT_EQ(content[0]["top_logprobs"][1]["bytes"], json::array({0xE2, 0x82}));
}

TEST(ResponseJson, CompletionLogprobs) {
  ChoiceOutput c{.index = 0, .text = "ab", .finish_reason = "stop", .with_logprobs = true};
  for (int i = 0; i < 2; ++i) {
    TokenLogprobs lp;
    lp.chosen = token_alternative(i == 0 ? "a" : "b", -1.0f * (i + 1));
    lp.top = {lp.chosen};
    lp.text_offset = i;
    c.logprobs.push_back(lp);
  }
  const json j = json::parse(response_body(kCompletion, {c}, {}));
  const json& lp = j["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json::array({"a", "b"}));
  EXPECT_EQ(lp["token_logprobs"], json::array({-1.0, -2.0}));
  EXPECT_EQ(lp["top_logprobs"][1], (json{{"b", -2.0}}));
  EXPECT_EQ(lp["text_offset"], json::array({0, 1}));
}

TEST(ResponseJson, StreamChunks) {
  const json first = json::parse(chunk_json(kChat, {.index = 0, .text = "", .role_first = true}));
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"], (json{{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  EXPECT_FALSE(first.contains("usage"));

  const json mid = json::parse(chunk_json(kChat, {.index = 1, .text = "x", .usage_null = true}));
  EXPECT_EQ(mid["choices"][0]["delta"], (json{{"content", "x"}}));
  EXPECT_EQ(mid["choices"][0]["index"], 1);
  EXPECT_TRUE(mid["usage"].is_null());

  const json last = json::parse(chunk_json(kChat, {.index = 0, .text = "", .finish_reason = "stop"}));
  EXPECT_EQ(last["choices"][0]["delta"], json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");

  const json text = json::parse(chunk_json(kCompletion, {.index = 0, .text = "z"}));
  EXPECT_EQ(text["object"], "text_completion");
  EXPECT_EQ(text["choices"][0]["text"], "z");

  const json usage = json::parse(usage_chunk_json(kChat, {.prompt_tokens = 4, .completion_tokens = 6}));
  EXPECT_EQ(usage["choices"], json::array());
  EXPECT_EQ(usage["usage"]["total_tokens"], 10);

  EXPECT_EQ(sse_event("{}"), "data: {}\n\n");
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
}

TEST(ResponseJson, ErrorBodyAndModels) {
  const json e = json::parse(error_body(invalid_field("temperature", "bad", "invalid_value")));
  EXPECT_EQ(
      e["error"],
      (json{
          {"message", "bad"}, {"type", "invalid_request_error"}, {"param", "temperature"}, {"code", "invalid_value"}}));
  const json e500 = json::parse(error_body(ApiError(500, "boom")));
  EXPECT_EQ(e500["error"]["type"], "server_error");
  EXPECT_TRUE(e500["error"]["param"].is_null());
  EXPECT_TRUE(e500["error"]["code"].is_null());
  EXPECT_EQ(ApiError(429, "x").type(), "rate_limit_error");
  EXPECT_EQ(ApiError(401, "x").type(), "authentication_error");

  const json list = json::parse(models_list_json("m", 5));
  EXPECT_EQ(list["object"], "list");
  EXPECT_EQ(list["data"][0], (json{{"id", "m"}, {"object", "model"}, {"created", 5}, {"owned_by", "troupe"}}));
}

TEST(ResponseJson, PipelineErrorKindsMapToStatuses) {
  EXPECT_EQ(api_error_from(Errc::invalid_argument, "x").status(), 400);
  EXPECT_EQ(api_error_from(Errc::out_of_memory, "x").status(), 429);
  EXPECT_GT(api_error_from(Errc::out_of_memory, "x").retry_after(), 0);
  EXPECT_EQ(api_error_from(Errc::internal, "x").status(), 500);
  EXPECT_EQ(api_error_from(Errc::cancelled, "x").status(), 503);
}

TEST(WsFrames, Shapes) {
  const json hello = json::parse(ws_hello("m", 1024, 4, true));
  EXPECT_EQ(hello, (json{{"type", "hello"},
                         {"protocol", "troupe.v1"},
                         {"model", "m"},
                         {"max_message_bytes", 1024},
                         {"max_requests", 4},
                         {"images", true}}));
  const json tok = json::parse(ws_token("r1", 3, 42, "hi", nullptr));
  EXPECT_EQ(tok, (json{{"type", "token"}, {"id", "r1"}, {"index", 3}, {"token", 42}, {"text", "hi"}}));
  const json fin = json::parse(ws_final({.id = "r1",
                                         .finish_reason = "length",
                                         .text = "!",
                                         .usage = {.prompt_tokens = 2, .completion_tokens = 11},
                                         .first_token_seconds = 0.5,
                                         .total_seconds = 1.5}));
  EXPECT_EQ(fin["type"], "final");
  EXPECT_EQ(fin["finish_reason"], "length");
  EXPECT_EQ(fin["usage"]["completion_tokens"], 11);
  // 10 tokens after the first, in the second after it.
  EXPECT_DOUBLE_EQ(fin["timing"]["tokens_per_second"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(fin["timing"]["first_token_ms"].get<double>(), 500.0);
  const json err = json::parse(ws_error("", ApiError(429, "full").with_retry_after(3)));
  EXPECT_TRUE(err["id"].is_null());
  EXPECT_EQ(err["error"]["message"], "full");
  EXPECT_EQ(err["retry_after"], 3);
}

TEST(ReplyBytes, WholeReply) {
  const HttpReply r{.status = 404, .content_type = "application/json", .headers = {{"Retry-After", "2"}}, .body = "{}"};
  EXPECT_EQ(serialize_reply(r, 11, true, false),
            "HTTP/1.1 404 Not Found\r\nServer: troupe\r\nContent-Type: application/json\r\nRetry-After: 2\r\n"
            "Content-Length: 2\r\n\r\n{}");
  EXPECT_EQ(serialize_reply(r, 11, false, false).find("Connection: close\r\n") != std::string::npos, true);
  EXPECT_EQ(serialize_reply(r, 10, true, false).rfind("HTTP/1.0 404", 0), 0u);
  EXPECT_NE(serialize_reply(r, 10, true, false).find("Connection: keep-alive\r\n"), std::string::npos);
}

TEST(ReplyBytes, ChunkedHeadAndChunks) {
  const HttpReply head{.status = 200, .content_type = "text/event-stream"};
  const std::string h = serialize_reply(head, 11, true, true);
  EXPECT_NE(h.find("Transfer-Encoding: chunked\r\n"), std::string::npos);
  EXPECT_EQ(h.find("Content-Length"), std::string::npos);
  EXPECT_EQ(h.substr(h.size() - 4), "\r\n\r\n");
  // HTTP/1.0 has no chunking: the body runs to the end of the connection.
  const std::string h10 = serialize_reply(head, 10, true, true);
  EXPECT_EQ(h10.find("Transfer-Encoding"), std::string::npos);
  EXPECT_EQ(h10.find("keep-alive"), std::string::npos);

  EXPECT_EQ(chunk_frame("hello"), "5\r\nhello\r\n");
  EXPECT_EQ(chunk_frame(std::string(26, 'x')), "1a\r\n" + std::string(26, 'x') + "\r\n");
  EXPECT_EQ(chunk_frame(""), "");
  EXPECT_EQ(kLastChunk, "0\r\n\r\n");
}

TEST(Utf8Joiner, HoldsBackSplitCharacters) {
  Utf8Joiner j;
  EXPECT_EQ(j.push("a\xE2"), "a");
  EXPECT_EQ(j.push("\x82"), "");
  EXPECT_EQ(j.held_bytes(), 2u);
  EXPECT_EQ(j.push("\xAC!"), "\xE2\x82\xAC!");  // €
  EXPECT_EQ(j.push("\xF0\x9F\x98"), "");        // 3 of the 4 bytes of 😀
  EXPECT_EQ(j.push("\x80"), "\xF0\x9F\x98\x80");
  // Bytes that can never become valid are replaced at once.
  EXPECT_EQ(j.push("\xFF"
                   "b"),
            "\xEF\xBF\xBD"
            "b");
  // An unfinished character at the end becomes U+FFFD.
  EXPECT_EQ(j.push("\xE2\x82"), "");
  EXPECT_EQ(j.finish(), "\xEF\xBF\xBD");
  EXPECT_EQ(j.held_bytes(), 0u);
  EXPECT_EQ(j.finish("x"), "x");
}

}  // namespace
}  // namespace troupe::net

// The OpenAI request parser: every malformed field is a 400 naming that
// field; unknown fields are ignored; each accepted form lands in the
// parsed request.
#include "net/request_parser.hpp"

#include <gtest/gtest.h>

#include <string>

#include "net/api_error.hpp"

namespace troupe::net {
namespace {

const RequestLimits kLimits{};

// The ApiError a completion body raises (fails the test when none).
ApiError completion_error(const std::string& body) {
  try {
    parse_completion_request(body, kLimits);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << body;
  return ApiError(0, "none");
}

ApiError chat_error(const std::string& body) {
  try {
    parse_chat_request(body, kLimits);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << body;
  return ApiError(0, "none");
}

TEST(RequestParser, MinimalCompletion) {
  const ParsedRequest r = parse_completion_request(R"({"model": "m", "prompt": "Hello"})", kLimits);
  EXPECT_EQ(r.endpoint, Endpoint::completions);
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0], "Hello");
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_EQ(r.params.sampling.penalty_last_n, -1);  // every token, as vLLM
  EXPECT_EQ(r.params.thinking_budget, -1);          // none
  EXPECT_EQ(r.n, 1);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.seed.has_value());
}

TEST(RequestParser, AllSamplingFields) {
  const ParsedRequest r = parse_completion_request(
      R"({"model": "m", "prompt": "x", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 40,
          "min_p": 0.1, "presence_penalty": -1, "frequency_penalty": 1.5, "repetition_penalty": 1.1,
          "repeat_last_n": 64, "thinking_token_budget": 256, "seed": 12345, "stop": ["a", "bc"], "n": 3, "stream": true, "stream_options": {"include_usage": true},
          "logprobs": 2, "echo": true, "ignore_eos": true})",
      kLimits);
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.params.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.params.sampling.top_p, 0.9f);
  EXPECT_EQ(r.params.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r.params.sampling.min_p, 0.1f);
  EXPECT_FLOAT_EQ(r.params.sampling.presence_penalty, -1.0f);
  EXPECT_FLOAT_EQ(r.params.sampling.frequency_penalty, 1.5f);
  EXPECT_FLOAT_EQ(r.params.sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(r.params.sampling.penalty_last_n, 64);
  EXPECT_EQ(r.params.thinking_budget, 256);
  EXPECT_EQ(r.seed, 12345u);
  EXPECT_EQ(r.params.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(r.n, 3);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 2);
  EXPECT_TRUE(r.params.sampling.logprobs);
  EXPECT_EQ(r.params.sampling.n_logprobs, 2);
  EXPECT_TRUE(r.echo);
  EXPECT_TRUE(r.params.ignore_eos);
}

TEST(RequestParser, UnknownFieldsAndNullsAreIgnored) {
  const ParsedRequest r = parse_completion_request(
      R"({"model": "m", "prompt": "x", "user": "u1", "something_new": {"a": [1, 2]}, "temperature": null,
          "max_tokens": null, "stop": null})",
      kLimits);
  EXPECT_FLOAT_EQ(r.params.sampling.temperature, 1.0f);  // the default
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_TRUE(r.params.stop.empty());
}

TEST(RequestParser, PromptForms) {
  const ParsedRequest batch = parse_completion_request(R"({"model": "m", "prompt": ["a", "b"]})", kLimits);
  EXPECT_EQ(batch.prompts, (std::vector<std::string>{"a", "b"}));
  const ParsedRequest ids = parse_completion_request(R"({"model": "m", "prompt": [1, 2, 3]})", kLimits);
  ASSERT_EQ(ids.token_prompts.size(), 1u);
  EXPECT_EQ(ids.token_prompts[0], (std::vector<int32_t>{1, 2, 3}));
  const ParsedRequest id_batch = parse_completion_request(R"({"model": "m", "prompt": [[1], [2, 3]]})", kLimits);
  EXPECT_EQ(id_batch.token_prompts.size(), 2u);
}

TEST(RequestParser, MalformedJsonIs400) {
  for (const char* body : {"{", "", "not json", R"({"model": "m",})", "[1, 2]", "\"text\""}) {
    const ApiError e = completion_error(body);
    EXPECT_EQ(e.status(), 400) << body;
    EXPECT_EQ(e.code(), "invalid_json") << body;
    EXPECT_NE(std::string(e.what()).find("JSON"), std::string::npos) << e.what();
  }
}

TEST(RequestParser, InvalidUtf8IsMalformedJson) {
  const ApiError e = completion_error("{\"model\": \"m\", \"prompt\": \"\xff\xfe\"}");
  EXPECT_EQ(e.status(), 400);
  EXPECT_EQ(e.code(), "invalid_json");
}

TEST(RequestParser, MissingFieldsAreNamed) {
  EXPECT_EQ(completion_error(R"({"prompt": "x"})").param(), "model");
  EXPECT_EQ(completion_error(R"({"model": "m"})").param(), "prompt");
  EXPECT_EQ(chat_error(R"({"model": "m"})").param(), "messages");
  EXPECT_EQ(chat_error(R"({"model": "m", "messages": [{"content": "hi"}]})").param(), "messages[0].role");
  EXPECT_EQ(chat_error(R"({"model": "m", "messages": [{"role": "user"}]})").param(), "messages[0].content");
  EXPECT_EQ(completion_error(R"({"prompt": "x"})").code(), "missing_field");
}

TEST(RequestParser, WrongTypesAreNamed) {
  struct Case {
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {R"({"model": 5, "prompt": "x"})", "model"},
      {R"({"model": "m", "prompt": 5})", "prompt"},
      {R"({"model": "m", "prompt": "x", "temperature": "hot"})", "temperature"},
      {R"({"model": "m", "prompt": "x", "max_tokens": 1.5})", "max_tokens"},
      {R"({"model": "m", "prompt": "x", "max_tokens": "10"})", "max_tokens"},
      {R"({"model": "m", "prompt": "x", "stream": "yes"})", "stream"},
      {R"({"model": "m", "prompt": "x", "stop": 3})", "stop"},
      {R"({"model": "m", "prompt": "x", "stop": ["a", 3]})", "stop[1]"},
      {R"({"model": "m", "prompt": "x", "seed": "s"})", "seed"},
      {R"({"model": "m", "prompt": "x", "n": true})", "n"},
      {R"({"model": "m", "prompt": ["a", 1]})", "prompt[1]"},
      {R"({"model": "m", "prompt": [1, "a"]})", "prompt[1]"},
      {R"({"model": "m", "prompt": "x", "stream_options": {"include_usage": 1}})", "stream_options.include_usage"},
  };
  for (const Case& c : cases) {
    const ApiError e = completion_error(c.body);
    EXPECT_EQ(e.status(), 400) << c.body;
    EXPECT_EQ(e.param(), c.param) << c.body;
    EXPECT_EQ(e.code(), "invalid_type") << c.body;
    EXPECT_NE(std::string(e.what()).find(c.param), std::string::npos) << e.what();
  }
  EXPECT_EQ(chat_error(R"({"model": "m", "messages": {"role": "user"}})").param(), "messages");
  EXPECT_EQ(chat_error(R"({"model": "m", "messages": ["hi"]})").param(), "messages[0]");
  EXPECT_EQ(chat_error(R"({"model": "m", "messages": [{"role": "user", "content": 5}]})").param(),
            "messages[0].content");
  EXPECT_EQ(chat_error(R"({"model": "m", "messages": [{"role": "user", "content": "a"}], "logprobs": 1})").param(),
            "logprobs");
}

TEST(RequestParser, OutOfRangeValuesAreNamed) {
  struct Case {
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {R"({"model": "m", "prompt": "x", "max_tokens": 0})", "max_tokens"},
      {R"({"model": "m", "prompt": "x", "max_tokens": 4097})", "max_tokens"},
      {R"({"model": "m", "prompt": "x", "max_tokens": -3})", "max_tokens"},
      {R"({"model": "m", "prompt": "x", "max_tokens": 18446744073709551615})", "max_tokens"},
      {R"({"model": "m", "prompt": "x", "temperature": 2.5})", "temperature"},
      {R"({"model": "m", "prompt": "x", "temperature": -0.1})", "temperature"},
      {R"({"model": "m", "prompt": "x", "top_p": 0})", "top_p"},
      {R"({"model": "m", "prompt": "x", "top_p": 1.01})", "top_p"},
      {R"({"model": "m", "prompt": "x", "presence_penalty": 3})", "presence_penalty"},
      {R"({"model": "m", "prompt": "x", "frequency_penalty": -2.5})", "frequency_penalty"},
      {R"({"model": "m", "prompt": "x", "n": 0})", "n"},
      {R"({"model": "m", "prompt": "x", "n": 9})", "n"},
      {R"({"model": "m", "prompt": "x", "logprobs": 6})", "logprobs"},
      {R"({"model": "m", "prompt": "x", "stop": ["a", "b", "c", "d", "e"]})", "stop"},
      {R"({"model": "m", "prompt": "x", "stop": ""})", "stop"},
      {R"({"model": "m", "prompt": []})", "prompt"},
      {R"({"model": "m", "prompt": [-1]})", "prompt[0]"},
      {R"({"model": "m", "prompt": "x", "top_k": -2})", "top_k"},
      {R"({"model": "m", "prompt": "x", "repeat_last_n": -2})", "repeat_last_n"},
      {R"({"model": "m", "prompt": "x", "repeat_last_n": 1.5})", "repeat_last_n"},
      {R"({"model": "m", "prompt": "x", "thinking_token_budget": -1})", "thinking_token_budget"},
  };
  for (const Case& c : cases) {
    const ApiError e = completion_error(c.body);
    EXPECT_EQ(e.status(), 400) << c.body;
    EXPECT_EQ(e.param(), c.param) << c.body;
  }
  EXPECT_EQ(chat_error(R"({"model": "m", "messages": []})").param(), "messages");
  EXPECT_EQ(chat_error(R"({"model": "m", "messages": [{"role": "wizard", "content": "a"}]})").param(),
            "messages[0].role");
  EXPECT_EQ(chat_error(R"({"model": "m", "messages": [{"role": "user", "content": "a"}], "top_logprobs": 21,
                          "logprobs": true})")
                .param(),
            "top_logprobs");
  EXPECT_EQ(chat_error(R"({"model": "m", "messages": [{"role": "user", "content": "a"}], "top_logprobs": 2})").param(),
            "top_logprobs");
}

// Image parts: their bytes go to the engine in order, and the turn's parts
// (each image as {"type": "image"}) are what the chat template reads.
TEST(RequestParser, ImagePartsBecomeTheTemplatesPartsAndTheirBytes) {
  const ParsedRequest r = parse_chat_request(
      R"({"model": "m", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": [
          {"type": "text", "text": "a"},
          {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGVsbG8=", "detail": "low"}},
          {"type": "text", "text": "b"},
          {"type": "image_url", "image_url": "data:image/jpeg;base64,d29y\nbGQ="}]}]})",
      kLimits);
  ASSERT_EQ(r.chat.images.size(), 2u);
  EXPECT_EQ(r.chat.images[0].bytes, "hello");
  EXPECT_EQ(r.chat.images[0].param, "messages[1].content[1].image_url");
  EXPECT_EQ(r.chat.images[1].bytes, "world");  // MIME line breaks skipped
  EXPECT_EQ(r.chat.images[1].param, "messages[1].content[3].image_url");
  EXPECT_EQ(r.chat.messages[0].fields_json, "");  // a text turn stays a string
  EXPECT_EQ(r.chat.messages[1].content, "ab");
  EXPECT_EQ(r.chat.messages[1].fields_json,
            R"({"content":[{"type":"text","text":"a"},{"type":"image"},{"type":"text","text":"b"},{"type":"image"}]})");
  EXPECT_EQ(chat_error(R"({"model": "m", "messages": [{"role": "user", "content":
                          [{"type": "image_url", "image_url": {"url": "data:image/png;base64,a$b="}}]}]})")
                .param(),
            "messages[0].content[0].image_url.url");
  EXPECT_EQ(chat_error(R"({"model": "m", "messages": [{"role": "user", "content":
                          [{"type": "image_url", "image_url": {"url": "data:text/html;base64,aGVsbG8="}}]}]})")
                .param(),
            "messages[0].content[0].image_url.url");
  EXPECT_EQ(chat_error(R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]})").param(),
            "messages[0].content[0].image_url");
}

TEST(RequestParser, UnsupportedFeaturesAreRefusedNotIgnored) {
  EXPECT_EQ(completion_error(R"({"model": "m", "prompt": "x", "suffix": "end"})").param(), "suffix");
  EXPECT_EQ(completion_error(R"({"model": "m", "prompt": "x", "best_of": 3})").param(), "best_of");
  EXPECT_EQ(chat_error(R"({"model": "m", "messages": [{"role": "user", "content": "a"}],
                          "response_format": {"type": "xml"}})")
                .param(),
            "response_format.type");
  EXPECT_EQ(chat_error(R"({"model": "m", "messages": [{"role": "user", "content":
                          [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]}]})")
                .param(),
            "messages[0].content[0].image_url.url");
  EXPECT_EQ(chat_error(R"({"model": "m", "messages": [{"role": "user", "content":
                          [{"type": "input_audio", "input_audio": {}}]}]})")
                .param(),
            "messages[0].content[0].type");
}

TEST(RequestParser, LogitBias) {
  const ParsedRequest r = parse_completion_request(
      R"({"model": "m", "prompt": "x", "logit_bias": {"5": 10, "70000": -100, "9": 0.5}})", kLimits);
  ASSERT_EQ(r.params.sampling.logit_bias.size(), 3u);
  float sum = 0;
  for (const TokenBias& b : r.params.sampling.logit_bias) {
    sum += b.bias;
    if (b.token == 70000) {
      EXPECT_EQ(b.bias, -100.0f);
    }
  }
  EXPECT_FLOAT_EQ(sum, -89.5f);
  EXPECT_EQ(completion_error(R"({"model": "m", "prompt": "x", "logit_bias": {"a": 1}})").param(), "logit_bias");
  EXPECT_EQ(completion_error(R"({"model": "m", "prompt": "x", "logit_bias": {"-1": 1}})").param(), "logit_bias");
  EXPECT_EQ(completion_error(R"({"model": "m", "prompt": "x", "logit_bias": {"3": 101}})").param(), "logit_bias.3");
  EXPECT_EQ(completion_error(R"({"model": "m", "prompt": "x", "logit_bias": {"3": "up"}})").param(), "logit_bias.3");
  EXPECT_EQ(completion_error(R"({"model": "m", "prompt": "x", "logit_bias": [1]})").param(), "logit_bias");
}

TEST(RequestParser, ResponseFormats) {
  const std::string chat = R"({"model": "m", "messages": [{"role": "user", "content": "a"}], )";
  EXPECT_FALSE(parse_chat_request(chat + R"("response_format": {"type": "text"}})", kLimits).params.format.constrained());
  const ParsedRequest j = parse_chat_request(chat + R"("response_format": {"type": "json_object"}})", kLimits);
  EXPECT_EQ(j.params.format.kind, OutputFormat::Kind::json_object);
  const ParsedRequest s = parse_chat_request(
      chat + R"("response_format": {"type": "json_schema", "json_schema": {"name": "p", "strict": true,
                "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}}})",
      kLimits);
  EXPECT_EQ(s.params.format.kind, OutputFormat::Kind::json_schema);
  EXPECT_EQ(s.params.format.schema, R"({"type":"object","properties":{"a":{"type":"integer"}}})");
  // llama.cpp's spelling and vLLM's guided_json.
  const ParsedRequest l = parse_chat_request(chat + R"("response_format": {"type": "json_object",
                                                      "schema": {"type": "array"}}})",
                                             kLimits);
  EXPECT_EQ(l.params.format.kind, OutputFormat::Kind::json_schema);
  EXPECT_EQ(l.params.format.schema, R"({"type":"array"})");
  const ParsedRequest v = parse_completion_request(R"({"model": "m", "prompt": "x", "guided_json": {"type": "string"}})",
                                                   kLimits);
  EXPECT_EQ(v.params.format.schema, R"({"type":"string"})");
  // Errors name the field.
  EXPECT_EQ(chat_error(chat + R"("response_format": {"type": "json_schema"}})").param(), "response_format.json_schema");
  EXPECT_EQ(chat_error(chat + R"("response_format": {"type": "json_schema", "json_schema": {"name": "x"}}})").param(),
            "response_format.json_schema.schema");
  EXPECT_EQ(chat_error(chat + R"("response_format": {"type": "json_schema", "json_schema": {"schema": 3}}})").param(),
            "response_format.json_schema.schema");
  EXPECT_EQ(chat_error(chat + R"("response_format": {}})").param(), "response_format.type");
  EXPECT_EQ(chat_error(chat + R"("response_format": "json"})").param(), "response_format");
  EXPECT_EQ(chat_error(chat + R"("response_format": {"type": "json_object"}, "guided_json": {}})").param(),
            "guided_json");
}

TEST(RequestParser, OtherServersConstraintFields) {
  const std::string base = R"({"model": "m", "prompt": "x", )";
  const ParsedRequest g = parse_completion_request(base + R"("grammar": "root ::= \"yes\" | \"no\""})", kLimits);
  EXPECT_EQ(g.params.format.kind, OutputFormat::Kind::gbnf);
  EXPECT_EQ(g.params.format.schema, R"(root ::= "yes" | "no")");
  EXPECT_EQ(g.params.format.param, "grammar");
  const ParsedRequest v = parse_completion_request(base + R"("guided_grammar": "root ::= [0-9]+"})", kLimits);
  EXPECT_EQ(v.params.format.kind, OutputFormat::Kind::gbnf);
  const ParsedRequest c = parse_completion_request(base + R"("guided_choice": ["red", "blue"]})", kLimits);
  EXPECT_EQ(c.params.format.kind, OutputFormat::Kind::choice);
  EXPECT_EQ(c.params.format.schema, R"(["red","blue"])");
  const ParsedRequest j = parse_completion_request(base + R"("json_schema": {"type": "integer"}})", kLimits);
  EXPECT_EQ(j.params.format.kind, OutputFormat::Kind::json_schema);
  EXPECT_EQ(j.params.format.param, "json_schema");
  EXPECT_EQ(completion_error(base + R"("grammar": {"root": 1}})").param(), "grammar");
  EXPECT_EQ(completion_error(base + R"("guided_choice": "red"})").param(), "guided_choice");
  EXPECT_EQ(completion_error(base + R"("grammar": "root ::= \"a\"", "guided_choice": ["a"]})").param(),
            "guided_choice");
}

TEST(RequestParser, PriorityByNameOrVllmInteger) {
  auto priority_of = [](const std::string& value) {
    return parse_completion_request(R"({"model": "m", "prompt": "x", "priority": )" + value + "}", kLimits)
        .params.priority;
  };
  EXPECT_EQ(parse_completion_request(R"({"model": "m", "prompt": "x"})", kLimits).params.priority,
            Priority::interactive);
  EXPECT_EQ(priority_of("null"), Priority::interactive);
  EXPECT_EQ(priority_of(R"("interactive")"), Priority::interactive);
  EXPECT_EQ(priority_of(R"("batch")"), Priority::batch);
  // vLLM: smaller is more urgent, 0 is its default.
  EXPECT_EQ(priority_of("0"), Priority::interactive);
  EXPECT_EQ(priority_of("-5"), Priority::interactive);
  EXPECT_EQ(priority_of("1"), Priority::batch);
  EXPECT_EQ(priority_of("18446744073709551615"), Priority::batch);
  EXPECT_EQ(parse_chat_request(R"({"model": "m", "messages": [{"role": "user", "content": "a"}],
                                   "priority": "batch"})",
                               kLimits)
                .params.priority,
            Priority::batch);

  const ApiError bad_name = completion_error(R"({"model": "m", "prompt": "x", "priority": "urgent"})");
  EXPECT_EQ(bad_name.status(), 400);
  EXPECT_EQ(bad_name.param(), "priority");
  EXPECT_NE(std::string(bad_name.what()).find("urgent"), std::string::npos) << bad_name.what();
  for (const char* v : {"1.5", "true", "[1]", R"({"level": 1})"}) {
    const ApiError e = completion_error(std::string(R"({"model": "m", "prompt": "x", "priority": )") + v + "}");
    EXPECT_EQ(e.status(), 400) << v;
    EXPECT_EQ(e.param(), "priority") << v;
    EXPECT_EQ(e.code(), "invalid_type") << v;
  }
}

TEST(RequestParser, ChatMessages) {
  const ParsedRequest r = parse_chat_request(
      R"({"model": "m", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Hello "}, {"type": "text", "text": "there"}]},
            {"role": "assistant", "content": null, "tool_calls": []},
            {"role": "user", "content": "Again", "name": "bob"}],
          "max_completion_tokens": 9, "logprobs": true, "top_logprobs": 3})",
      kLimits);
  EXPECT_EQ(r.endpoint, Endpoint::chat);
  ASSERT_EQ(r.chat.messages.size(), 4u);
  EXPECT_EQ(r.chat.messages[0].role, "system");
  EXPECT_EQ(r.chat.messages[1].content, "Hello there");
  EXPECT_EQ(r.chat.messages[2].content, "");
  EXPECT_EQ(r.chat.messages[3].content, "Again");
  EXPECT_EQ(r.max_tokens, 9);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
}

TEST(RequestParser, LimitsAreConfigurable) {
  const RequestLimits small{.max_tokens = 10, .max_n = 2, .max_prompts = 2, .max_stop = 1, .max_messages = 1};
  auto param_of = [&](const char* body, bool chat) {
    try {
      chat ? parse_chat_request(body, small) : parse_completion_request(body, small);
    } catch (const ApiError& e) {
      return e.param();
    }
    return std::string("(none)");
  };
  EXPECT_EQ(param_of(R"({"model": "m", "prompt": "x", "max_tokens": 11})", false), "max_tokens");
  EXPECT_EQ(param_of(R"({"model": "m", "prompt": "x", "n": 3})", false), "n");
  EXPECT_EQ(param_of(R"({"model": "m", "prompt": ["a", "b", "c"]})", false), "prompt");
  EXPECT_EQ(param_of(R"({"model": "m", "prompt": "x", "stop": ["a", "b"]})", false), "stop");
  EXPECT_EQ(param_of(R"({"model": "m", "messages": [{"role": "user", "content": "a"},
                         {"role": "user", "content": "b"}]})",
                     true),
            "messages");
  EXPECT_EQ(param_of(R"({"model": "m", "prompt": "x", "max_tokens": 10})", false), "(none)");
}

TEST(RequestParser, DeeplyNestedJsonIsRefused) {
  std::string body = R"({"model": "m", "prompt": "x", "extra": )";
  for (int i = 0; i < 200; ++i) body += "[";
  for (int i = 0; i < 200; ++i) body += "]";
  body += "}";
  EXPECT_EQ(completion_error(body).status(), 400);
}

TEST(WsMessages, GenerateAndCancel) {
  const WsClientMessage chat = parse_ws_message(
      R"({"type": "generate", "id": "a1", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5})", kLimits);
  EXPECT_EQ(chat.kind, WsClientMessage::Kind::generate);
  EXPECT_EQ(chat.id, "a1");
  EXPECT_EQ(chat.request.endpoint, Endpoint::chat);
  EXPECT_EQ(chat.request.max_tokens, 5);
  EXPECT_TRUE(chat.request.model.empty());

  const WsClientMessage text = parse_ws_message(R"({"type": "generate", "id": "b", "prompt": "Once"})", kLimits);
  EXPECT_EQ(text.request.endpoint, Endpoint::completions);
  EXPECT_EQ(text.request.prompts, std::vector<std::string>{"Once"});

  const WsClientMessage cancel = parse_ws_message(R"({"type": "cancel", "id": "a1"})", kLimits);
  EXPECT_EQ(cancel.kind, WsClientMessage::Kind::cancel);
  EXPECT_EQ(cancel.id, "a1");
}

TEST(WsMessages, ErrorsNameTheFieldAndKeepTheId) {
  auto error_of = [](const std::string& text, std::string* id) {
    try {
      parse_ws_message(text, kLimits, id);
    } catch (const ApiError& e) {
      return e;
    }
    ADD_FAILURE() << "no error for " << text;
    return ApiError(0, "none");
  };
  std::string id;
  EXPECT_EQ(error_of(R"({"id": "x"})", &id).param(), "type");
  EXPECT_EQ(error_of(R"({"type": "generate"})", &id).param(), "id");
  EXPECT_EQ(error_of(R"({"type": "generate", "id": 7})", &id).param(), "id");
  EXPECT_EQ(error_of(R"({"type": "generate", "id": ""})", &id).param(), "id");
  EXPECT_EQ(error_of(R"({"type": "dance", "id": "x"})", &id).param(), "type");
  id.clear();
  EXPECT_EQ(error_of(R"({"type": "generate", "id": "r9"})", &id).param(), "messages");
  EXPECT_EQ(id, "r9");
  EXPECT_EQ(error_of(R"({"type": "generate", "id": "r9", "prompt": ["a"]})", &id).param(), "prompt");
  EXPECT_EQ(error_of(R"({"type": "generate", "id": "r9", "prompt": "a", "n": 2})", &id).param(), "n");
  EXPECT_EQ(error_of(R"({"type": "generate", "id": "r9", "prompt": "a", "temperature": 9})", &id).param(),
            "temperature");
  EXPECT_EQ(error_of("{nope", &id).code(), "invalid_json");
}

}  // namespace
}  // namespace troupe::net

// <think> blocks returned apart from the answer: what a whole output splits
// into, the same when it streams in pieces cut anywhere, and the chat
// endpoint's reasoning_content beside content and tool calls.
#include "net/reasoning_split.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "tests/net/route_env.hpp"

namespace troupe::net {
namespace {

using nlohmann::json;
using test::Env;

struct Case {
  std::string text;
  bool starts_open;
  std::string reasoning, content;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c{
      {"<think>\nPlan it.\n</think>\n\nThe answer.", false, "Plan it.", "The answer."},
      {"  <think>a  b</think>c", false, "a  b", "c"},
      {"Plain <think>text</think>", false, "", "Plain <think>text</think>"},
      {"<thin", false, "", "<thin"},
      {"<think>cut by max_tokens", false, "cut by max_tokens", ""},
      {"<think></think>Only an answer.", false, "", "Only an answer."},
      {"\nStep one.\n\nStep two.\n</think>\n\nDone.", true, "Step one.\n\nStep two.", "Done."},
      {"<think>\nOpened twice.</think>ok", true, "Opened twice.", "ok"},
      // The repeated tag is dropped once: a third is reasoning, whole or
      // streamed (the tool_calls fuzzer found a stream dropping each one
      // that came before the first reasoning byte).
      {"<think><think>x</think>", true, "<think>x", ""},
      {"<think> <think>\n<think>x", false, "<think>x", ""},
      {"All thought, no answer", true, "All thought, no answer", ""},
      {"a < b </thinker> c</think> d", true, "a < b </thinker> c", "d"},
      {"", false, "", ""},
  };
  return c;
}

TEST(ReasoningSplit, SplitsAWholeOutput) {
  for (const Case& c : cases()) {
    const ReasoningParts p = split_reasoning(c.text, c.starts_open);
    EXPECT_EQ(p.reasoning, c.reasoning) << c.text;
    EXPECT_EQ(p.content, c.content) << c.text;
  }
}

TEST(ReasoningSplit, AStreamAgreesWhereverItIsCut) {
  for (const Case& c : cases()) {
    for (size_t cut = 0; cut <= c.text.size(); ++cut) {
      ReasoningStream s(c.starts_open);
      ReasoningParts all = s.push(c.text.substr(0, cut));
      for (const ReasoningParts& p : {s.push(c.text.substr(cut)), s.finish()}) {
        all.reasoning += p.reasoning;
        all.content += p.content;
      }
      EXPECT_EQ(all.reasoning, c.reasoning) << c.text << " cut at " << cut;
      EXPECT_EQ(all.content, c.content) << c.text << " cut at " << cut;
    }
    ReasoningStream bytes(c.starts_open);
    ReasoningParts all;
    for (char ch : c.text) {
      const ReasoningParts p = bytes.push(std::string(1, ch));
      all.reasoning += p.reasoning;
      all.content += p.content;
    }
    const ReasoningParts end = bytes.finish();
    EXPECT_EQ(all.reasoning + end.reasoning, c.reasoning) << c.text;
    EXPECT_EQ(all.content + end.content, c.content) << c.text;
  }
}

// Qwen3 thinks, then answers or calls a tool.
TEST(ReasoningRoutes, ReasoningContentBesideTheAnswerAndTheCalls) {
  Env env;
  env.backend.reasoning_tags = true;
  env.backend.script = {.texts = {"<thi", "nk>\nThe user greets", " me.\n</th", "ink>\n\nHello!"}};
  const std::string hi = R"({"model": "fake", "messages": [{"role": "user", "content": "Hi"}])";
  HttpReply r = env.call("POST", "/v1/chat/completions", hi + "}");
  ASSERT_EQ(r.status, 200) << r.body;
  json msg = json::parse(r.body)["choices"][0]["message"];
  EXPECT_EQ(msg["reasoning_content"], "The user greets me.");
  EXPECT_EQ(msg["content"], "Hello!");

  r = env.call("POST", "/v1/chat/completions", hi + R"(, "stream": true})");
  ASSERT_EQ(r.status, 200) << r.body;
  const test::StreamedChat streamed = test::read_chat_stream(r.body);
  const std::string& reasoning = streamed.reasoning;
  const std::string& content = streamed.content;
  EXPECT_EQ(reasoning, "The user greets me.");
  EXPECT_EQ(content, "Hello!");

  // Thinking, then a call: the call is parsed from the answer alone.
  env.backend.tool_call_syntax = grammar::ToolCallSyntax::hermes;
  env.backend.script = {.texts = {"<think>I need the time.</think>\n\n",
                                  "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"}};
  const std::string tools = R"(, "tools": [{"type": "function", "function": {"name": "now"}}])";
  for (const std::string stream : {"false", "true"}) {
    r = env.call("POST", "/v1/chat/completions", hi + tools + R"(, "stream": )" + stream + "}");
    ASSERT_EQ(r.status, 200) << r.body;
    if (stream == "false") {
      const json choice = json::parse(r.body)["choices"][0];
      EXPECT_EQ(choice["finish_reason"], "tool_calls");
      EXPECT_EQ(choice["message"]["reasoning_content"], "I need the time.");
      EXPECT_TRUE(choice["message"]["content"].is_null()) << r.body;
      EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "now");
      continue;
    }
    const test::StreamedChat chunks = test::read_chat_stream(r.body);
    const std::string& think = chunks.reasoning;
    const std::string& said = chunks.content;
    const std::string& finish = chunks.finish;
    const size_t calls = chunks.calls;
    EXPECT_EQ(think, "I need the time.");
    EXPECT_EQ(said, "");
    EXPECT_EQ(calls, 1u);
    EXPECT_EQ(finish, "tool_calls");
  }
}

// Qwen3's switch: chat_template_kwargs reach the template as variables.
TEST(ReasoningRoutes, ChatTemplateKwargsReachTheTemplate) {
  Env env;
  env.backend.context_length = 256;
  env.backend.chat_template =
      "{% for m in messages %}{{ m.content }}\n{% endfor %}"
      "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% endif %}";
  auto prompt_of = [&](const std::string& extra) {
    const HttpReply ids =
        env.call("POST", "/tokenize", R"({"messages": [{"role": "user", "content": "Hi"}])" + extra + "}");
    EXPECT_EQ(ids.status, 200) << ids.body;
    const json tokens = {{"tokens", json::parse(ids.body)["tokens"]}};
    return json::parse(env.call("POST", "/detokenize", tokens.dump()).body)["prompt"].get<std::string>();
  };
  EXPECT_EQ(prompt_of("").find("</think>"), std::string::npos);
  EXPECT_NE(prompt_of(R"(, "chat_template_kwargs": {"enable_thinking": false})").find("</think>"), std::string::npos);

  const std::string hi =
      R"({"model": "fake", "messages": [{"role": "user", "content": "Hi"}], "chat_template_kwargs": )";
  for (const std::string bad : {"[1]", R"({"messages": []})", R"({"add_generation_prompt": false})"}) {
    const HttpReply r = env.call("POST", "/v1/chat/completions", hi + bad + "}");
    EXPECT_EQ(r.status, 400) << bad;
    EXPECT_EQ(test::error_of(r)["param"], "chat_template_kwargs") << r.body;
  }
}

}  // namespace
}  // namespace troupe::net

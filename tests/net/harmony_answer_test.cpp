// gpt-oss's harmony turns read back into reasoning, content and calls: the
// turns gpt-oss's own chat template writes for known messages
// (tests/fixtures/harmony_turns.json, tools/fixtures/make_harmony_fixtures.py),
// the same when they stream cut anywhere, the forms the template does not
// write (a recipient after the channel, a missing <|end|>, plain text), and
// the chat endpoint over them.
#include "net/harmony_answer.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/net/route_env.hpp"

namespace troupe::net {
namespace {

using nlohmann::json;
using test::Env;

json fixture() {
  std::ifstream in(std::string(TROUPE_FIXTURES_DIR) + "/harmony_turns.json");
  EXPECT_TRUE(in.good()) << "missing tests/fixtures/harmony_turns.json";
  return json::parse(in);
}

struct Read {
  std::string reasoning, content;
  std::vector<grammar::ToolCall> calls;
};

// The whole text in pieces cut at `cuts` (ascending offsets).
Read stream(std::string_view text, const std::vector<std::string>& names, const std::vector<size_t>& cuts) {
  HarmonyStream s(names);
  Read r;
  size_t at = 0;
  auto add = [&](const HarmonyParts& p) {
    r.reasoning += p.reasoning;
    r.content += p.content;
  };
  for (size_t cut : cuts) {
    add(s.push(text.substr(at, cut - at)));
    at = cut;
  }
  add(s.push(text.substr(at)));
  add(s.finish(r.calls));
  return r;
}

void expect_turn(const json& turn, const Read& r, const std::string& how) {
  const std::string out = turn["output"];
  EXPECT_EQ(r.reasoning, turn["reasoning"]) << how << ": " << out;
  EXPECT_EQ(r.content, turn["content"]) << how << ": " << out;
  ASSERT_EQ(r.calls.size(), turn["tool_calls"].size()) << how << ": " << out;
  for (size_t i = 0; i < r.calls.size(); ++i) {
    EXPECT_EQ(r.calls[i].name, turn["tool_calls"][i]["name"]) << how;
    EXPECT_EQ(json::parse(r.calls[i].arguments), turn["tool_calls"][i]["arguments"]) << how;
  }
}

TEST(HarmonyAnswer, ReadsBackWhatTheTemplateWrote) {
  const json fx = fixture();
  const auto names = fx["tools"].get<std::vector<std::string>>();
  ASSERT_GE(fx["turns"].size(), 5u);
  for (const json& turn : fx["turns"]) {
    std::vector<grammar::ToolCall> calls;
    const HarmonyParts p = read_harmony(turn["output"].get<std::string>(), names, calls);
    expect_turn(turn, Read{p.reasoning, p.content, calls}, "whole");
  }
}

TEST(HarmonyAnswer, AStreamAgreesWhereverItIsCut) {
  const json fx = fixture();
  const auto names = fx["tools"].get<std::vector<std::string>>();
  for (const json& turn : fx["turns"]) {
    const std::string text = turn["output"];
    for (size_t cut = 0; cut <= text.size(); ++cut) {
      expect_turn(turn, stream(text, names, {cut}), "cut at " + std::to_string(cut));
      if (HasFatalFailure()) return;
    }
    std::vector<size_t> every(text.size());
    for (size_t i = 0; i < text.size(); ++i) every[i] = i;
    expect_turn(turn, stream(text, names, every), "byte by byte");
  }
}

TEST(HarmonyAnswer, FormsTheTemplateDoesNotWrite) {
  const std::vector<std::string> names{"get_weather"};
  std::vector<grammar::ToolCall> calls;
  // The model card's form: the recipient after the channel, <|constrain|>.
  HarmonyParts p = read_harmony(
      "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
      "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Oslo\"}",
      names, calls);
  EXPECT_EQ(p.reasoning, "Need weather.");
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].name, "get_weather");
  EXPECT_EQ(calls[0].arguments, "{\"city\":\"Oslo\"}");

  // A body the model did not close before the next header.
  calls.clear();
  p = read_harmony("<|channel|>analysis<|message|>think<|start|>assistant<|channel|>final<|message|>done", names,
                   calls);
  EXPECT_EQ(p.reasoning, "think");
  EXPECT_EQ(p.content, "done");

  // A call to a tool not offered, or with arguments that are not an
  // object, is text; so is output that is not harmony at all.
  for (const char* text : {"<|channel|>commentary to=functions.rm<|message|>{\"path\":\"/\"}",
                           "<|channel|>commentary to=functions.get_weather<|message|>[1, 2]"}) {
    calls.clear();
    p = read_harmony(text, names, calls);
    EXPECT_TRUE(calls.empty()) << text;
    EXPECT_EQ(p.content, std::string(text).substr(std::string(text).find("<|message|>") + 11)) << text;
  }
  calls.clear();
  p = read_harmony("Plain text < with | brackets", names, calls);
  EXPECT_EQ(p.content, "Plain text < with | brackets");
  // Cut by max_tokens inside a header: nothing of it is text.
  p = read_harmony("<|channel|>analysis<|message|>a<|end|><|start|>assistant<|chan", names, calls);
  EXPECT_EQ(p.reasoning, "a");
  EXPECT_EQ(p.content, "");
  // Only the first bytes of a header that never came: text.
  p = read_harmony(" t", names, calls);
  EXPECT_EQ(p.content, " t");
}

// A whole output longer than the longest header is still read as harmony
// (chat_answer.cpp reads a non-streamed answer in one piece), and a header
// too long to be one is text, whole or streamed. The tool_calls fuzzer's
// input, "<|channel|>" opening 1 KiB with no <|message|>, looped forever;
// so did any whole output over 1 KiB that opened with "<|channel|>".
TEST(HarmonyAnswer, LongOutputsAndHeadersTooLongToBeOne) {
  const std::vector<std::string> names{"get_weather"};
  std::vector<grammar::ToolCall> calls;
  const std::string thought(3000, 't'), answer(2000, 'a');
  HarmonyParts p = read_harmony(
      "<|channel|>analysis<|message|>" + thought + "<|end|><|start|>assistant<|channel|>final<|message|>" + answer,
      names, calls);
  EXPECT_EQ(p.reasoning, thought);
  EXPECT_EQ(p.content, answer);

  for (const std::string& text :
       {"<|channel|>" + std::string(1100, 'x') + "<|message|>hi<|end|>", "<|channel|>" + std::string(1100, 'x'),
        "<|channel|><|channel|>" + std::string(1100, 'x') + "<|start|>z"}) {
    calls.clear();
    const HarmonyParts whole = read_harmony(text, names, calls);
    EXPECT_TRUE(calls.empty());
    EXPECT_EQ(whole.reasoning, "");
    EXPECT_FALSE(whole.content.empty()) << text.substr(0, 40);
    std::vector<size_t> every(text.size());
    for (size_t i = 0; i < text.size(); ++i) every[i] = i;
    const Read bytes = stream(text, names, every);
    EXPECT_EQ(bytes.content, whole.content) << text.substr(0, 40);
    EXPECT_EQ(bytes.reasoning, whole.reasoning);
  }
}

// gpt-oss through the chat endpoint: reasoning_content, content and calls,
// whole and streamed; a forced tool_choice is refused.
TEST(HarmonyRoutes, ChannelsBecomeReasoningContentAndCalls) {
  Env env;
  env.backend.harmony = true;
  env.backend.script = {.texts = {"<|channel|>analysis<|mes", "sage|>The user greets.<|end|><|st",
                                  "art|>assistant<|channel|>final<|message|>Hello!"}};
  const std::string hi = R"({"model": "fake", "messages": [{"role": "user", "content": "Hi"}])";
  HttpReply r = env.call("POST", "/v1/chat/completions", hi + "}");
  ASSERT_EQ(r.status, 200) << r.body;
  json msg = json::parse(r.body)["choices"][0]["message"];
  EXPECT_EQ(msg["reasoning_content"], "The user greets.");
  EXPECT_EQ(msg["content"], "Hello!");

  r = env.call("POST", "/v1/chat/completions", hi + R"(, "stream": true})");
  ASSERT_EQ(r.status, 200) << r.body;
  const test::StreamedChat streamed = test::read_chat_stream(r.body);
  const std::string& reasoning = streamed.reasoning;
  const std::string& content = streamed.content;
  EXPECT_EQ(reasoning, "The user greets.");
  EXPECT_EQ(content, "Hello!");

  env.backend.script = {.texts = {"<|channel|>analysis<|message|>I need the time.<|end|>",
                                  "<|start|>assistant to=functions.now<|channel|>commentary json<|message|>{}"}};
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
      EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["arguments"], "{}");
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

  r = env.call("POST", "/v1/chat/completions", hi + tools + R"(, "tool_choice": "required"})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(test::error_of(r)["param"], "tool_choice") << r.body;
}

// A non-streamed answer is read in one piece (chat_answer.cpp). One over
// 1 KiB that opened with <|channel|>, as gpt-oss answers do, was taken for
// an overlong header, handed to the body reader, which ended the body at
// that same <|channel|> and handed it back: the request spun forever.
TEST(HarmonyRoutes, AWholeAnswerOverOneKibIsStillRead) {
  Env env;
  env.backend.harmony = true;
  const std::string thought(1500, 't');
  env.backend.script = {.texts = {"<|channel|>analysis<|message|>", thought,
                                  "<|end|><|start|>assistant<|channel|>final<|message|>Hello!"}};
  const HttpReply r =
      env.call("POST", "/v1/chat/completions", R"({"model": "fake", "messages": [{"role": "user", "content": "Hi"}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json msg = json::parse(r.body)["choices"][0]["message"];
  EXPECT_EQ(msg["reasoning_content"], thought);
  EXPECT_EQ(msg["content"], "Hello!");
}

// OpenAI's reasoning_effort reaches the template as gpt-oss's reads it;
// chat_template_kwargs, if it names one too, wins.
TEST(HarmonyRoutes, ReasoningEffortReachesTheTemplate) {
  Env env;
  env.backend.context_length = 256;
  env.backend.chat_template =
      "{% for m in messages %}{{ m.content }}\n{% endfor %}Reasoning: {{ reasoning_effort | default('medium') }}";
  auto prompt_of = [&](const std::string& extra) {
    const HttpReply ids =
        env.call("POST", "/tokenize", R"({"messages": [{"role": "user", "content": "Hi"}])" + extra + "}");
    EXPECT_EQ(ids.status, 200) << ids.body;
    const json tokens = {{"tokens", json::parse(ids.body)["tokens"]}};
    return json::parse(env.call("POST", "/detokenize", tokens.dump()).body)["prompt"].get<std::string>();
  };
  EXPECT_NE(prompt_of("").find("Reasoning: medium"), std::string::npos);
  EXPECT_NE(prompt_of(R"(, "reasoning_effort": "high")").find("Reasoning: high"), std::string::npos);
  EXPECT_NE(prompt_of(R"(, "reasoning_effort": "high", "chat_template_kwargs": {"reasoning_effort": "low"})")
                .find("Reasoning: low"),
            std::string::npos);
  const HttpReply r = env.call("POST", "/v1/chat/completions",
                               R"({"model": "fake", "messages": [{"role": "user", "content": "Hi"}], )"
                               R"("reasoning_effort": 3})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(test::error_of(r)["param"], "reasoning_effort") << r.body;
}

}  // namespace
}  // namespace troupe::net

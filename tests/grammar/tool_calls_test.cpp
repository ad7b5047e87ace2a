// Tool calls found in model output, and the grammar a forcing tool_choice
// compiles to. The reference is Qwen3's own chat template as Hugging Face
// renders it (tests/fixtures/chat_templates.json, made by
// tools/fixtures/make_chat_template_fixtures.py): the assistant turns it
// writes for messages with tool_calls are the text a Qwen3 model is trained
// to produce, so the parser must read them back into those calls and the
// grammar must accept them.
#include "grammar/tool_calls.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "grammar/lazy_token_grammar.hpp"
#include "grammar/tool_call_grammar.hpp"
#include "tests/grammar/grammar_test_util.hpp"

namespace troupe::grammar {
namespace {

using json = nlohmann::ordered_json;
using test::accepts;

json load_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return json::parse(in);
}

json fixture() { return load_json(std::string(TROUPE_FIXTURES_DIR) + "/chat_templates.json"); }

std::string shared_template(const std::string& name) {
  const json cfg = load_json(std::string(TROUPE_SHARED_DIR) + "/tokenizers/" + name + "/tokenizer_config.json");
  return cfg.at("chat_template").get<std::string>();
}

const std::vector<std::string> kWeather{"get_weather"};

// The tools of the fixture's Qwen3 cases.
json weather_tools() {
  const json f = fixture();
  for (const json& c : f.at("cases")) {
    if (c.at("name") == "qwen3/tools_and_calls") return c.at("tools");
  }
  ADD_FAILURE() << "no qwen3/tools_and_calls case";
  return json::array();
}

TEST(ToolCallSyntax, FollowsTheChatTemplate) {
  EXPECT_EQ(detect_tool_call_syntax(shared_template("qwen3")), ToolCallSyntax::hermes);
  // Llama 3's first template and SmolLM2's teach no tool calls.
  EXPECT_EQ(detect_tool_call_syntax(shared_template("llama3")), ToolCallSyntax::json);
  EXPECT_EQ(detect_tool_call_syntax(fixture().at("templates").at("smollm2").at("source").get<std::string>()),
            ToolCallSyntax::json);
  // The sentences Llama 3.1's and Mistral's templates carry.
  EXPECT_EQ(
      detect_tool_call_syntax(
          R"({{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }})"),
      ToolCallSyntax::llama3_json);
  EXPECT_EQ(detect_tool_call_syntax("{{- '[TOOL_CALLS]' + tool_calls|tojson }}"), ToolCallSyntax::mistral);
  for (ToolCallSyntax s :
       {ToolCallSyntax::json, ToolCallSyntax::hermes, ToolCallSyntax::llama3_json, ToolCallSyntax::mistral}) {
    EXPECT_EQ(tool_call_syntax_named(to_string(s)), s);
  }
  EXPECT_FALSE(tool_call_syntax_named("pythonic").has_value());
}

// Each assistant turn with tool_calls that Qwen3's template rendered: the
// text between "<|im_start|>assistant\n" and "<|im_end|>", and the message.
struct RenderedTurn {
  std::string text;
  json message;
};

std::vector<RenderedTurn> rendered_qwen3_calls() {
  std::vector<RenderedTurn> turns;
  const json f = fixture();
  for (const json& c : f.at("cases")) {
    if (c.at("template") != "qwen3" || !c.at("expected").is_string()) continue;
    const std::string expected = c.at("expected").get<std::string>();
    size_t at = 0;
    for (const json& m : c.at("messages")) {
      if (m.at("role") != "assistant") continue;
      const size_t start = expected.find("<|im_start|>assistant\n", at);
      if (start == std::string::npos) break;
      const size_t body = start + std::string("<|im_start|>assistant\n").size();
      const size_t end = expected.find("<|im_end|>", body);
      at = end;
      if (m.contains("tool_calls")) turns.push_back({expected.substr(body, end - body), m});
    }
  }
  return turns;
}

TEST(ToolCalls, ReadsBackWhatQwen3sTemplateWrites) {
  const std::vector<RenderedTurn> turns = rendered_qwen3_calls();
  ASSERT_GE(turns.size(), 2u);
  for (const RenderedTurn& t : turns) {
    const ToolCallOutput out = parse_tool_calls(ToolCallSyntax::hermes, t.text, kWeather);
    const json& calls = t.message.at("tool_calls");
    ASSERT_EQ(out.calls.size(), calls.size()) << t.text;
    for (size_t k = 0; k < calls.size(); ++k) {
      const json& fn = calls[k].at("function");
      EXPECT_EQ(out.calls[k].name, fn.at("name").get<std::string>());
      const json args =
          fn.at("arguments").is_string() ? json::parse(fn.at("arguments").get<std::string>()) : fn.at("arguments");
      EXPECT_EQ(json::parse(out.calls[k].arguments), args) << t.text;
    }
    EXPECT_EQ(out.content, t.message.value("content", std::string())) << t.text;
  }
}

// The calls of a rendered turn: from its first <tool_call> on.
std::string calls_of(const std::string& turn) { return turn.substr(turn.find("<tool_call>")); }

TEST(ToolCallGrammar, AcceptsWhatQwen3sTemplateWrites) {
  const std::string tools = weather_tools().dump();
  const auto any = tool_call_grammar(tool_choice_format(ToolCallSyntax::hermes, tools, "", true));
  const auto one = tool_call_grammar(tool_choice_format(ToolCallSyntax::hermes, tools, "", false));
  const auto named = tool_call_grammar(tool_choice_format(ToolCallSyntax::hermes, tools, "get_weather", true));
  size_t multi = 0;
  for (const RenderedTurn& t : rendered_qwen3_calls()) {
    const std::string text = calls_of(t.text);
    const bool several = t.message.at("tool_calls").size() > 1;
    multi += several ? 1 : 0;
    EXPECT_TRUE(accepts(any, text)) << text;
    // Without parallel calls, and for a named function, one call only.
    EXPECT_EQ(accepts(one, text), !several) << text;
    EXPECT_EQ(accepts(named, text), !several) << text;
  }
  EXPECT_GE(multi, 1u);
}

TEST(ToolCallGrammar, HoldsCallsToTheirFunctionsAndSyntax) {
  const std::string tools = R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
      "required": ["city"]}}},
    {"type": "function", "function": {"name": "now"}}])";
  const auto hermes = tool_call_grammar(tool_choice_format(ToolCallSyntax::hermes, tools, "", true));
  EXPECT_TRUE(accepts(hermes, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_TRUE(accepts(hermes,
                      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>\n"
                      "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"));
  // A required argument missing, a value outside its enum, an unknown function.
  EXPECT_FALSE(accepts(hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(accepts(
      hermes,
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": \"k\"}}\n</tool_call>"));
  EXPECT_FALSE(accepts(hermes, "<tool_call>\n{\"name\": \"later\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(accepts(hermes, ""));  // a forced choice calls at least once

  const auto llama = tool_call_grammar(tool_choice_format(ToolCallSyntax::llama3_json, tools, "", true));
  EXPECT_TRUE(
      accepts(llama, R"({"name": "now", "parameters": {}}; {"name": "get_weather", "parameters": {"city": "Rome"}})"));
  EXPECT_FALSE(accepts(llama, R"({"name": "now", "arguments": {}})"));

  const auto named = tool_call_grammar(tool_choice_format(ToolCallSyntax::json, tools, "now", true));
  EXPECT_TRUE(accepts(named, R"([{"name": "now", "arguments": {}}])"));
  EXPECT_FALSE(accepts(named, R"([{"name": "get_weather", "arguments": {"city": "Rome"}}])"));
  EXPECT_FALSE(accepts(named, R"([{"name": "now", "arguments": {}}, {"name": "now", "arguments": {}}])"));

  // What each grammar accepts, the parser of its syntax reads back.
  const std::vector<std::string> names{"get_weather", "now"};
  const ToolCallOutput read = parse_tool_calls(
      ToolCallSyntax::llama3_json,
      R"({"name": "now", "parameters": {}}; {"name": "get_weather", "parameters": {"city": "Rome"}})", names);
  ASSERT_EQ(read.calls.size(), 2u);
  EXPECT_EQ(read.calls[1].arguments, R"({"city":"Rome"})");
}

TEST(ToolCallGrammar, NamesTheToolWhoseSchemaItCannotEnforce) {
  const std::string tools = R"([{"type": "function", "function": {"name": "ok"}},
    {"type": "function", "function": {"name": "zip", "parameters": {"type": "object",
      "properties": {"code": {"type": "string", "pattern": "^[0-9]{5}$"}}}}}])";
  test::expect_refused(
      [&](const std::string& t) { (void)tool_call_grammar(tool_choice_format(ToolCallSyntax::hermes, t, "", true)); },
      tools, "tools[1] ('zip') parameters: json_schema #/properties/code: the keyword 'pattern'");
  // Named: only that function's schema is compiled.
  EXPECT_NO_THROW((void)tool_call_grammar(tool_choice_format(ToolCallSyntax::hermes, tools, "ok", true)));
}

TEST(ToolCalls, EachSyntaxParsesItsCallsAndKeepsTheRestAsText) {
  const std::vector<std::string> names{"get_weather", "now"};
  auto parse = [&](ToolCallSyntax s, const std::string& text) { return parse_tool_calls(s, text, names); };

  ToolCallOutput h = parse(ToolCallSyntax::hermes,
                           "Checking.\n<tool_call>\n{\"name\": \"now\", \"arguments\": \"{}\"}\n</tool_call>\nDone?");
  ASSERT_EQ(h.calls.size(), 1u);
  EXPECT_EQ(h.calls[0].arguments, "{}");  // arguments given as text are read as JSON
  EXPECT_EQ(h.content, "Checking.\nDone?");
  // The last call may lack its close (the model ended there).
  EXPECT_EQ(parse(ToolCallSyntax::hermes, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}").calls.size(), 1u);
  // Unknown function, broken JSON, arguments that are no object: plain text.
  for (const std::string& bad :
       std::vector<std::string>{"<tool_call>{\"name\": \"later\", \"arguments\": {}}</tool_call>",
                                "<tool_call>{\"name\": \"now\", \"arguments\": {</tool_call>",
                                "<tool_call>{\"name\": \"now\", \"arguments\": [1]}</tool_call>"}) {
    const ToolCallOutput out = parse(ToolCallSyntax::hermes, bad);
    EXPECT_TRUE(out.calls.empty()) << bad;
    EXPECT_EQ(out.content, bad);
  }

  ToolCallOutput l = parse(ToolCallSyntax::llama3_json,
                           "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"a;b\"}}");
  ASSERT_EQ(l.calls.size(), 1u);
  EXPECT_EQ(l.calls[0].arguments, R"({"city":"a;b"})");
  EXPECT_EQ(l.content, "");
  EXPECT_TRUE(parse(ToolCallSyntax::llama3_json, "Sure: {\"name\": \"now\", \"parameters\": {}}").calls.empty());
  EXPECT_TRUE(parse(ToolCallSyntax::llama3_json, "{\"name\": \"now\", \"parameters\": {}} and more").calls.empty());

  ToolCallOutput m = parse(ToolCallSyntax::mistral,
                           "[TOOL_CALLS][{\"name\": \"now\", \"arguments\": {}}, {\"name\": \"get_weather\", "
                           "\"arguments\": {\"city\": \"x\"}}]");
  ASSERT_EQ(m.calls.size(), 2u);
  EXPECT_EQ(m.calls[1].name, "get_weather");
  EXPECT_EQ(parse(ToolCallSyntax::mistral, " [{\"name\": \"now\", \"arguments\": {}}]").calls.size(), 1u);
  // Bare, each syntax's calls open as its model writes them: a llama3_json
  // list and a mistral object are text (the stream passes them as such).
  EXPECT_TRUE(parse(ToolCallSyntax::llama3_json, "[{\"name\": \"now\", \"parameters\": {}}]").calls.empty());
  EXPECT_TRUE(parse(ToolCallSyntax::mistral, "{\"name\": \"now\", \"arguments\": {}}").calls.empty());

  EXPECT_EQ(parse(ToolCallSyntax::json, "{\"name\": \"now\", \"arguments\": {}}").calls.size(), 1u);
  EXPECT_EQ(parse(ToolCallSyntax::json, "[{\"name\": \"now\"}]").calls.size(), 1u);  // no arguments: none
  EXPECT_TRUE(parse(ToolCallSyntax::json, "[]").calls.empty());
  EXPECT_TRUE(parse(ToolCallSyntax::json, "The answer is {\"name\": \"now\"}").calls.empty());
}

// Streamed in pieces cut at every byte, an output gives the same content
// and calls as parsed whole, and no marker byte leaks into the content.
TEST(ToolCallStream, AgreesWithTheWholeParseWhereverPiecesAreCut) {
  const std::vector<std::string> names{"get_weather", "now"};
  struct Case {
    ToolCallSyntax syntax;
    std::string text;
  };
  const std::vector<Case> cases{
      {ToolCallSyntax::hermes, "Let me look.\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>"},
      {ToolCallSyntax::hermes, "a <tool b <tool_cal"},  // marker prefixes that never complete
      {ToolCallSyntax::hermes, "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>"},
      {ToolCallSyntax::llama3_json, "  {\"name\": \"now\", \"parameters\": {}}"},
      {ToolCallSyntax::llama3_json, "Plain {text}."},
      // Found by the tool_calls fuzzer: the whole parse read a list with
      // no tag as calls, which the stream had passed on as text.
      {ToolCallSyntax::llama3_json, "[{\"name\": \"now\", \"x\": {}}, {\"name\": \"now\"}]"},
      {ToolCallSyntax::mistral, "{\"name\": \"now\", \"arguments\": {}}"},
      {ToolCallSyntax::mistral, "[TOOL_CALLS][{\"name\": \"now\", \"arguments\": {}}]"},
      {ToolCallSyntax::json, "[{\"name\": \"now\", \"arguments\": {}}]"},
      {ToolCallSyntax::json, "no calls here"},
  };
  for (const Case& c : cases) {
    const ToolCallOutput whole = parse_tool_calls(c.syntax, c.text, names);
    for (size_t cut = 0; cut <= c.text.size(); ++cut) {
      ToolCallStream stream(c.syntax, names);
      std::string content = stream.push(c.text.substr(0, cut));
      content += stream.push(c.text.substr(cut));
      const ToolCallOutput end = stream.finish();
      content += end.content;
      EXPECT_EQ(content, whole.content) << c.text << " cut at " << cut;
      ASSERT_EQ(end.calls.size(), whole.calls.size()) << c.text;
      for (size_t k = 0; k < end.calls.size(); ++k) EXPECT_EQ(end.calls[k].arguments, whole.calls[k].arguments);
    }
  }
  // Text before a marker passes as soon as it cannot be the marker's start.
  ToolCallStream s(ToolCallSyntax::hermes, names);
  EXPECT_EQ(s.push("Hi <to"), "Hi");  // and the space, which may precede a call
  EXPECT_EQ(s.push("day"), " <today");
  EXPECT_EQ(s.push(" <tool_call>{"), "");
  EXPECT_EQ(s.push("\"name\": \"now\"}</tool_call>"), "");
  const ToolCallOutput end = s.finish();
  EXPECT_EQ(end.calls.size(), 1u);
  EXPECT_EQ(end.content, "");
}

}  // namespace
}  // namespace troupe::grammar

namespace troupe::grammar {
namespace {

// tool_choice "auto" with a trigger: free text, then from "<tool_call>" on
// only what the tools allow, found across token boundaries and inside one.
class LazyToolCalls : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::vector<std::string> pieces{"<s>",
                                          "Hi",
                                          " there",
                                          "<tool",
                                          "_call",
                                          ">",
                                          "<tool_call>",
                                          "<tool_call>\n",
                                          ">oops",
                                          "\n",
                                          "{\"name\": \"now\", \"arguments\": {}}",
                                          "\n</tool_call>",
                                          "oops",
                                          "{",
                                          "<think>",
                                          "</think>",
                                          "</s>"};
    for (const std::string& p : pieces) {
      ids_[p] = static_cast<int32_t>(bytes_.size());
      bytes_.push_back(p);
      text_.push_back(p != "<s>" && p != "</s>");
    }
    trie_ = std::make_shared<const TokenTrie>(bytes_, text_, std::vector<int32_t>{ids_.at("</s>")});
    const std::string tools = R"([{"type": "function", "function": {"name": "now"}},
      {"type": "function", "function": {"name": "zip", "parameters": {"type": "object",
        "properties": {"code": {"type": "string", "pattern": "^[0-9]+$"}}}}}])";
    format_ = tool_choice_format(ToolCallSyntax::hermes, tools, "", true, /*lazy=*/true);
  }

  std::unique_ptr<LazyTokenGrammar> make() const {
    return std::make_unique<LazyTokenGrammar>(tool_call_format_trigger(format_).text, tool_call_grammar(format_),
                                              trie_);
  }
  int32_t id(const std::string& p) const { return ids_.at(p); }

  // mask() agrees with allows() on every token.
  void expect_mask_agrees(LazyTokenGrammar& g) const {
    std::vector<float> logits(bytes_.size(), 0.0f);
    g.mask(logits);
    for (size_t t = 0; t < bytes_.size(); ++t) {
      EXPECT_EQ(std::isfinite(logits[t]), g.allows(static_cast<int32_t>(t))) << "'" << bytes_[t] << "'";
    }
  }

  std::vector<std::string> bytes_;
  std::vector<bool> text_;
  std::map<std::string, int32_t> ids_;
  std::shared_ptr<const TokenTrie> trie_;
  std::string format_;
};

TEST_F(LazyToolCalls, TextIsFreeUntilTheTriggerThenTheCallIsHeld) {
  // A schema the grammar cannot enforce does not refuse "auto": that tool's
  // arguments may be any object.
  EXPECT_EQ(tool_call_format_trigger(format_).text, "<tool_call>");
  auto g = make();
  for (const char* p : {"Hi", " there", "oops", "{", "</s>", "<s>"}) EXPECT_TRUE(g->allows(id(p))) << p;
  EXPECT_TRUE(g->allows(id(">oops")));  // no trigger before it
  for (const char* p : {"Hi", " there"}) g->accept(id(p));
  g->accept(id("<tool"));
  g->accept(id("_call"));
  EXPECT_FALSE(g->active());
  // ">oops" would complete the trigger, then write what no call starts with.
  EXPECT_FALSE(g->allows(id(">oops")));
  EXPECT_TRUE(g->allows(id("Hi")));
  expect_mask_agrees(*g);
  g->accept(id(">"));  // the trigger, across three tokens
  ASSERT_TRUE(g->active());
  EXPECT_FALSE(g->allows(id("oops")));
  EXPECT_FALSE(g->allows(id("</s>")));  // a call cannot stop half-way
  EXPECT_TRUE(g->allows(id("\n")));
  expect_mask_agrees(*g);
  for (const char* p : {"\n", "{\"name\": \"now\", \"arguments\": {}}", "\n</tool_call>"}) {
    ASSERT_TRUE(g->allows(id(p))) << p;
    g->accept(id(p));
  }
  EXPECT_TRUE(g->allows(id("</s>")));  // the call is whole: the output may end
  EXPECT_FALSE(g->allows(id("oops")));
  expect_mask_agrees(*g);
}

TEST_F(LazyToolCalls, ATriggerInsideAThinkBlockIsThinkingAloud) {
  auto g = make();
  for (const char* p : {"<think>", "<tool_call>\n", "oops", "</think>", "Hi"}) {
    ASSERT_TRUE(g->allows(id(p))) << p;
    g->accept(id(p));
    EXPECT_FALSE(g->active()) << p;
  }
  g->accept(id("<tool_call>"));
  EXPECT_TRUE(g->active());  // after the block, a trigger opens a call
  // A template that opened the block: the output begins inside it.
  auto open = std::make_unique<LazyTokenGrammar>("<tool_call>", tool_call_grammar(format_), trie_, nullptr,
                                                 /*think_open=*/true);
  open->accept(id("<tool_call>"));
  EXPECT_FALSE(open->active());
  open->accept(id("</think>"));
  open->accept(id("<tool_call>\n"));
  EXPECT_TRUE(open->active());
}

TEST_F(LazyToolCalls, ATriggerInsideOneTokenStartsTheGrammarOnTheRestOfIt) {
  auto g = make();
  g->accept(id("<tool_call>\n"));
  ASSERT_TRUE(g->active());
  EXPECT_FALSE(g->allows(id("\n")));  // the token's own "\n" was the grammar's first byte
  EXPECT_TRUE(g->allows(id("{\"name\": \"now\", \"arguments\": {}}")));
}

}  // namespace
}  // namespace troupe::grammar

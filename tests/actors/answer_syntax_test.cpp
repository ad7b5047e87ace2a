// How the engine reads its model's chat answers, from the chat template
// in use: the tool-call syntax and the <think> block, Qwen3's real
// template (../shared/tokenizers/qwen3) among them, and what the
// deployment's config overrides.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "actors/pipeline_model_info.hpp"
#include "core/error.hpp"

namespace troupe {
namespace {

std::string shared_template(const std::string& name) {
  std::ifstream in(std::string(TROUPE_SHARED_DIR) + "/tokenizers/" + name + "/tokenizer_config.json");
  EXPECT_TRUE(in.good()) << name;
  return nlohmann::json::parse(in).at("chat_template").get<std::string>();
}

ModelInfo info_of(const std::string& tpl, PipelineConfig config = {}) {
  ModelInfo info;
  set_answer_syntax(info, ChatPrompter(tpl, "", "", "<|im_end|>"), config);
  return info;
}

TEST(AnswerSyntax, FollowsTheChatTemplate) {
  // Qwen3 (hybrid): thinks in <think> blocks it opens itself, calls in <tool_call>.
  const ModelInfo qwen3 = info_of(shared_template("qwen3"));
  EXPECT_TRUE(qwen3.reasoning_tags);
  EXPECT_FALSE(qwen3.reasoning_starts_open);
  EXPECT_EQ(qwen3.tool_call_syntax, grammar::ToolCallSyntax::hermes);
  // Llama 3: neither.
  const ModelInfo llama3 = info_of(shared_template("llama3"));
  EXPECT_FALSE(llama3.reasoning_tags);
  EXPECT_EQ(llama3.tool_call_syntax, grammar::ToolCallSyntax::json);
  // A template that opens the block in the prompt, as DeepSeek-R1's and
  // Qwen3 Thinking's do.
  const std::string opens =
      "{% for m in messages %}<|{{ m.role }}|>{{ m.content | replace('</think>', '') }}{% endfor %}"
      "{% if add_generation_prompt %}<|assistant|><think>\n{% endif %}";
  const ModelInfo r1 = info_of(opens);
  EXPECT_TRUE(r1.reasoning_tags);
  EXPECT_TRUE(r1.reasoning_starts_open);
  EXPECT_FALSE(r1.harmony);
  // gpt-oss's template (tests/fixtures/chat_templates.json): harmony
  // messages, whose reasoning is a channel rather than a <think> block.
  std::ifstream in(std::string(TROUPE_FIXTURES_DIR) + "/chat_templates.json");
  const std::string gpt_oss =
      nlohmann::json::parse(in).at("templates").at("gpt_oss").at("source").get<std::string>();
  const ModelInfo oss = info_of(gpt_oss);
  EXPECT_TRUE(oss.harmony);
  EXPECT_FALSE(oss.reasoning_tags);
  EXPECT_FALSE(qwen3.harmony);
  EXPECT_FALSE(llama3.harmony);
}

TEST(AnswerSyntax, TheConfigOverridesTheTemplate) {
  EXPECT_FALSE(info_of(shared_template("qwen3"), {.reasoning_format = "none"}).reasoning_tags);
  EXPECT_TRUE(info_of(shared_template("llama3"), {.reasoning_format = "deepseek"}).reasoning_tags);
  EXPECT_EQ(info_of(shared_template("llama3"), {.tool_call_parser = "llama3_json"}).tool_call_syntax,
            grammar::ToolCallSyntax::llama3_json);
  EXPECT_THROW(info_of(shared_template("llama3"), {.tool_call_parser = "pythonic"}), Error);
  EXPECT_THROW(info_of(shared_template("llama3"), {.reasoning_format = "hidden"}), Error);
}

}  // namespace
}  // namespace troupe

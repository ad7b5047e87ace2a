// Which chat template renders: the deployment's, else the model's, else the
// built-in one; and no doubled BOS when a template writes it.
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "tokenizer/chat_prompter.hpp"
#include "tokenizer/tokenizer.hpp"

namespace troupe {
namespace {

ChatRenderInput conversation(std::initializer_list<std::pair<const char*, const char*>> turns) {
  ChatRenderInput in;
  in.add_generation_prompt = true;
  for (const auto& [role, content] : turns) {
    ChatMessage m;
    m.role = role;
    m.content = content;
    in.messages.push_back(std::move(m));
  }
  return in;
}

TEST(ChatPrompter, BuiltinTemplateForModelsWithoutOne) {
  const ChatPrompter p("", "", "<s>", "</s>");
  EXPECT_EQ(p.origin(), "builtin");
  EXPECT_EQ(p.render(conversation({{"system", "Be kind."}, {"user", "Hi"}, {"assistant", "Hello"}, {"user", "Bye"}})),
            "Be kind.\n\nUser: Hi\nAssistant: Hello\nUser: Bye\nAssistant:");
}

TEST(ChatPrompter, ModelTemplateWinsOverBuiltinAndConfigOverModel) {
  const std::string model = "{{ messages[0]['content'] }}!";
  EXPECT_EQ(ChatPrompter("", model, "", "").origin(), "model");
  EXPECT_EQ(ChatPrompter("", model, "", "").render(conversation({{"user", "x"}})), "x!");
  const ChatPrompter config("{{ messages[0]['content'] }}?", model, "", "");
  EXPECT_EQ(config.origin(), "config");
  EXPECT_EQ(config.render(conversation({{"user", "x"}})), "x?");
  EXPECT_THROW(ChatPrompter("{% for %}", model, "", ""), Error);
}

TEST(ChatPrompter, BosAndEosTextsReachTheTemplate) {
  const ChatPrompter p("{{ bos_token }}{{ messages[0]['content'] }}{{ eos_token }}", "", "<s>", "</s>");
  EXPECT_EQ(p.render(conversation({{"user", "x"}})), "<s>x</s>");
}

}  // namespace
}  // namespace troupe

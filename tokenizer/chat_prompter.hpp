// Which chat template renders a conversation: the one the deployment gave
// (PipelineConfig::chat_template, `troupe serve --chat-template`), else the
// model's own, else a plain built-in one for models without one (base and
// toy models). Parsed once; rendered from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/chat_template.hpp"

namespace troupe {

class Tokenizer;

// "System text\n\nUser: ...\nAssistant: ...\n" ending in "Assistant:".
const std::string& builtin_chat_template();

class ChatPrompter {
 public:
  // override_source / model_source: empty when absent. bos_text / eos_text:
  // the tokenizer's special-token texts (empty: undefined in the template).
  // Throws Error naming the template when it does not parse.
  ChatPrompter(const std::string& override_source, const std::string& model_source, std::string bos_text,
               std::string eos_text);

  // The prompt text (bos_token/eos_token filled in). Throws what
  // ChatTemplate::render throws: Error(invalid_argument) for messages the
  // template refuses (raise_exception), Error(unsupported) for a construct
  // reached at run time that the interpreter lacks.
  std::string render(ChatRenderInput input) const;

  // Which template is in use: "config", "model" or "builtin".
  const std::string& origin() const { return origin_; }
  // Its source text.
  const std::string& source() const { return source_; }

 private:
  std::unique_ptr<ChatTemplate> tpl_;
  std::string origin_;
  std::string source_;
  std::string bos_, eos_;
};

}  // namespace troupe

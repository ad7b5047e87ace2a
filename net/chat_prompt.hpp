// Chat messages -> prompt token ids with a Jinja chat template: the one the
// server was given, else the model's own, else a plain built-in template
// (for models without one, such as base and toy models).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "net/backend.hpp"
#include "net/request_parser.hpp"

namespace troupe {
class ChatTemplate;
}

namespace troupe::net {

// "System text\n\nUser: ...\nAssistant: ...\n" ending in "Assistant:".
const std::string& builtin_chat_template();

class ChatPrompter {
 public:
  // override_source: a template given to the server (empty: none). Throws
  // Error naming the template when it does not parse.
  ChatPrompter(const std::string& override_source, const ModelInfo& model);
  ~ChatPrompter();

  // The rendered prompt's tokens; BOS only when the template did not write
  // it. Throws ApiError(400) for messages the template refuses.
  std::vector<int32_t> encode(const Tokenizer& tokenizer, const std::vector<ChatMessage>& messages) const;
  std::string render(const std::vector<ChatMessage>& messages) const;

  // Which template is in use: "server", "model" or "builtin".
  const std::string& origin() const { return origin_; }

 private:
  std::unique_ptr<ChatTemplate> tpl_;
  std::string origin_;
  std::string bos_, eos_;
};

}  // namespace troupe::net

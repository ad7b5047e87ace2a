// Template choice and rendering; tokenizer/chat_template does the Jinja and
// the BOS guard (a template that writes BOS itself gets no second one).
#include "net/chat_prompt.hpp"

#include "net/api_error.hpp"
#include "tokenizer/chat_template.hpp"
#include "tokenizer/tokenizer.hpp"

namespace troupe::net {

const std::string& builtin_chat_template() {
  // No whitespace control: HF renders with trim_blocks/lstrip_blocks,
  // which leave the newlines after expressions alone.
  static const std::string tpl =
      "{% for m in messages %}"
      "{% if m['role'] == 'system' or m['role'] == 'developer' %}{{ m['content'] }}\n\n"
      "{% elif m['role'] == 'user' %}User: {{ m['content'] }}\n"
      "{% elif m['role'] == 'assistant' %}Assistant: {{ m['content'] }}\n"
      "{% else %}Tool: {{ m['content'] }}\n"
      "{% endif %}"
      "{% endfor %}"
      "{% if add_generation_prompt %}Assistant:{% endif %}";
  return tpl;
}

ChatPrompter::ChatPrompter(const std::string& override_source, const ModelInfo& model)
    : bos_(model.bos_text), eos_(model.eos_text) {
  const std::string* source = &builtin_chat_template();
  origin_ = "builtin";
  if (!override_source.empty()) {
    source = &override_source;
    origin_ = "server";
  } else if (!model.chat_template.empty()) {
    source = &model.chat_template;
    origin_ = "model";
  }
  tpl_ = std::make_unique<ChatTemplate>(ChatTemplate::parse(*source));
}

ChatPrompter::~ChatPrompter() = default;

std::string ChatPrompter::render(const std::vector<ChatMessage>& messages) const {
  ChatRenderInput in;
  in.add_generation_prompt = true;
  if (!bos_.empty()) in.bos_token = bos_;
  if (!eos_.empty()) in.eos_token = eos_;
  for (const ChatMessage& m : messages) {
    troupe::ChatMessage cm;
    cm.role = m.role;
    cm.content = m.content;
    in.messages.push_back(std::move(cm));
  }
  try {
    return tpl_->render(in);
  } catch (const Error& e) {
    // raise_exception() in a template refuses the conversation (roles out of
    // order, say): the client's messages are at fault.
    if (e.code() == Errc::invalid_argument) throw invalid_field("messages", e.what());
    throw ApiError(500, std::string("chat template: ") + e.what(), {}, "template_error");
  }
}

std::vector<int32_t> ChatPrompter::encode(const Tokenizer& tokenizer, const std::vector<ChatMessage>& messages) const {
  return encode_chat(tokenizer, render(messages));
}

}  // namespace troupe::net

// Template choice; tokenizer/chat_template does the Jinja and the BOS guard.
#include "tokenizer/chat_prompter.hpp"

namespace troupe {

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

ChatPrompter::ChatPrompter(const std::string& override_source, const std::string& model_source, std::string bos_text,
                           std::string eos_text)
    : bos_(std::move(bos_text)), eos_(std::move(eos_text)) {
  const std::string* source = &builtin_chat_template();
  origin_ = "builtin";
  if (!override_source.empty()) {
    source = &override_source;
    origin_ = "config";
  } else if (!model_source.empty()) {
    source = &model_source;
    origin_ = "model";
  }
  source_ = *source;
  tpl_ = std::make_unique<ChatTemplate>(ChatTemplate::parse(source_));
}

std::string ChatPrompter::render(ChatRenderInput input) const {
  if (!bos_.empty()) input.bos_token = bos_;
  if (!eos_.empty()) input.eos_token = eos_;
  return tpl_->render(input);
}

}  // namespace troupe

// Chat templates: turns a conversation into the prompt text a model was
// trained on, by running the model's Jinja chat template (from
// tokenizer_config.json or a GGUF's tokenizer.chat_template) the way Hugging
// Face transformers' apply_chat_template does, byte for byte.
//
// The interpreter (tokenizer/jinja_*) covers what chat templates use: text,
// {{ }}, {% %}, {# #}, whitespace control with trim_blocks and lstrip_blocks,
// if/elif/else, for (loop.*, else, `if` filter, break/continue), set (also
// block set and namespace attributes), namespace(), macros, with, filter
// blocks, {% generation %}, raw; Jinja's tests and filters (tojson as
// transformers defines it), str/dict/list methods, slicing, Python
// arithmetic, comparison and printing; raise_exception and strftime_now.
// Refused with Error(unsupported) naming the construct and its line:col:
// include/import/extends/block, call blocks, recursive loops, filters such
// as groupby/batch/format, printf-style '%' on strings, str.format, \N{}
// escapes. Case mapping is Unicode's one-to-one mapping: the few one-to-many
// cases Python applies ("ß".upper() == "SS") are not.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe {

class Tokenizer;
namespace jinja {
struct Template;
}

struct ChatMessage {
  std::string role;                     // "system", "user", "assistant", "tool"
  std::optional<std::string> content;   // absent for an assistant turn that only calls tools
  // The OpenAI-style list [{"type": "function", "function": {"name", "arguments"}}]; null: none.
  nlohmann::ordered_json tool_calls;
  // More fields a template may read ("reasoning_content", "name", "tool_call_id"), in
  // order; fields whose value is null are dropped, as transformers drops them. A
  // "content" here (a list of multimodal parts) replaces the string content.
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
};

struct ChatRenderInput {
  std::vector<ChatMessage> messages;  // at least one
  bool add_generation_prompt = false;
  // The tokenizer's special-token texts; an absent one is undefined in the template.
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  nlohmann::ordered_json tools;  // a list of JSON schemas; null: the template sees None
  // More template variables, e.g. {"enable_thinking": false}; they override
  // bos_token/eos_token but may not name messages, tools, documents or
  // add_generation_prompt.
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
};

class ChatTemplate {
 public:
  // Parses once; rendering may then run any number of times, from any thread.
  // Throws Error(bad_format) for a syntax error and Error(unsupported) for a
  // construct this interpreter lacks, naming it and its line:col.
  static ChatTemplate parse(std::string_view source);

  // The prompt text. Throws Error(invalid_argument) for bad input (no
  // messages, invalid UTF-8) and for the template's own raise_exception(msg)
  // (the message names msg verbatim), and Error(unsupported) for an
  // unsupported function or method reached at run time.
  std::string render(const ChatRenderInput& input) const;

  // Renders with exactly these variables (a JSON object), for templates
  // used outside chat and for tests.
  std::string render_with(const nlohmann::ordered_json& variables) const;

  const std::string& source() const { return *source_; }

 private:
  ChatTemplate() = default;  // only parse() makes one, so a template always holds a parsed tree
  std::shared_ptr<const jinja::Template> tpl_;
  std::shared_ptr<const std::string> source_;
};

// The "chat_template" of a parsed tokenizer_config.json: a string, or a list
// of {"name", "template"} from which `name` is taken. Throws Error(bad_format)
// when the config has none (Llama 2's base tokenizer, for one) or no template
// of that name.
std::string chat_template_from_config(const nlohmann::ordered_json& config, std::string_view name = "default");

// Whether a rendered prompt already starts with the tokenizer's BOS text
// (templates such as Llama 3's write "<|begin_of_text|>" themselves).
bool template_emits_bos(const Tokenizer& tokenizer, std::string_view rendered);

// Token ids of a rendered prompt. Control tokens the template wrote
// (<|im_start|>, <s>) are read as tokens. BOS is prepended only when the
// tokenizer adds BOS and the prompt does not already begin with it, so a
// template that writes BOS never yields a doubled BOS; EOS is never
// appended, since the model continues the prompt.
std::vector<int32_t> encode_chat(const Tokenizer& tokenizer, std::string_view rendered);

}  // namespace troupe

// ChatTemplate: the chat-facing side of the Jinja interpreter. It builds the
// variables transformers' apply_chat_template passes (messages with null
// fields dropped and reasoning aliased, tools, documents, add_generation_prompt,
// the special-token texts, extra keyword arguments) and guards against a
// doubled BOS when the rendered prompt is tokenized.
#include "tokenizer/chat_template.hpp"

#include "core/error.hpp"
#include "tokenizer/jinja_eval.hpp"
#include "tokenizer/jinja_json.hpp"
#include "tokenizer/jinja_parser.hpp"
#include "tokenizer/tokenizer.hpp"
#include "tokenizer/utf8.hpp"

namespace troupe {
namespace {

void check_utf8(const nlohmann::ordered_json& j, const std::string& where) {
  if (j.is_string()) {
    if (!utf8::is_valid(j.get_ref<const std::string&>())) {
      throw Error(Errc::invalid_argument, "chat template input: " + where + " is not valid UTF-8");
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) check_utf8(j[i], where + "[" + std::to_string(i) + "]");
  } else if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      if (!utf8::is_valid(k)) {
        throw Error(Errc::invalid_argument, "chat template input: a key in " + where + " is not valid UTF-8");
      }
      check_utf8(v, where + "." + k);
    }
  }
}

// Input JSON as a template value; what JSON holds but Python does not
// (binary data) is the caller's error.
jinja::Value to_value(const nlohmann::ordered_json& j, const std::string& where) {
  try {
    return jinja::from_json(j);
  } catch (const jinja::Failure& f) {
    throw Error(Errc::invalid_argument, "chat template input: " + where + ": " + f.what());
  }
}

// Names under which a message's reasoning may come; transformers copies the
// first present one to "thinking" (first) and "reasoning_content" (last).
constexpr const char* kReasoningFields[] = {"reasoning_content", "thinking", "reasoning"};

jinja::Value message_value(const ChatMessage& m, size_t index) {
  const std::string where = "messages[" + std::to_string(index) + "]";
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["role"] = m.role;
  if (m.content) j["content"] = *m.content;
  if (!m.tool_calls.is_null()) j["tool_calls"] = m.tool_calls;
  if (!m.extra.is_object()) {
    throw Error(Errc::invalid_argument, "chat template input: " + where + ".extra must be an object");
  }
  for (const auto& [k, v] : m.extra.items()) {
    if (!v.is_null()) j[k] = v;
  }
  check_utf8(j, where);
  for (const char* field : kReasoningFields) {
    if (!j.contains(field)) continue;
    const nlohmann::ordered_json reasoning = j[field];
    nlohmann::ordered_json aliased = nlohmann::ordered_json::object();
    aliased["thinking"] = reasoning;
    for (const auto& [k, v] : j.items()) aliased[k] = v;
    aliased["reasoning_content"] = reasoning;
    j = std::move(aliased);
    break;
  }
  return to_value(j, where);
}

std::string run(const jinja::Template& tpl, const std::vector<std::pair<std::string, jinja::Value>>& vars) {
  jinja::Interpreter interp(tpl);
  try {
    return interp.render(vars);
  } catch (const jinja::Failure& f) {  // from outside any statement (none expected): no position to give
    throw Error(f.code(), "chat template: " + std::string(f.what()));
  }
}

}  // namespace

ChatTemplate ChatTemplate::parse(std::string_view source) {
  ChatTemplate t;
  t.tpl_ = std::make_shared<const jinja::Template>(jinja::parse(source));
  t.source_ = std::make_shared<const std::string>(source);
  return t;
}

std::string ChatTemplate::render(const ChatRenderInput& input) const {
  if (input.messages.empty()) {
    throw Error(Errc::invalid_argument, "chat template input: a conversation needs at least one message");
  }
  std::vector<jinja::Value> messages;
  for (size_t i = 0; i < input.messages.size(); ++i) messages.push_back(message_value(input.messages[i], i));
  check_utf8(input.tools, "tools");
  check_utf8(input.extra, "extra");
  std::vector<std::pair<std::string, jinja::Value>> vars;
  vars.emplace_back("messages", jinja::Value::sequence(std::move(messages)));
  vars.emplace_back("tools", to_value(input.tools, "tools"));
  vars.emplace_back("documents", jinja::Value::none());
  vars.emplace_back("add_generation_prompt", jinja::Value(input.add_generation_prompt));
  for (const auto& [name, token] : {std::pair{"bos_token", &input.bos_token}, std::pair{"eos_token", &input.eos_token}}) {
    if (!*token) continue;
    if (!utf8::is_valid(**token)) {
      throw Error(Errc::invalid_argument, std::string("chat template input: ") + name + " is not valid UTF-8");
    }
    vars.emplace_back(name, jinja::Value(**token));
  }
  if (!input.extra.is_object()) throw Error(Errc::invalid_argument, "chat template input: extra must be a JSON object");
  for (const auto& [k, v] : input.extra.items()) {
    if (k == "messages" || k == "tools" || k == "documents" || k == "add_generation_prompt") {
      throw Error(Errc::invalid_argument, "chat template input: extra may not set '" + k + "'");
    }
    vars.emplace_back(k, to_value(v, "extra." + k));  // later entries win: extras override the special tokens
  }
  return run(*tpl_, vars);
}

std::string ChatTemplate::render_with(const nlohmann::ordered_json& variables) const {
  if (!variables.is_object()) throw Error(Errc::invalid_argument, "chat template variables must be a JSON object");
  check_utf8(variables, "variables");
  std::vector<std::pair<std::string, jinja::Value>> vars;
  for (const auto& [k, v] : variables.items()) vars.emplace_back(k, to_value(v, k));
  return run(*tpl_, vars);
}

std::string chat_template_from_config(const nlohmann::ordered_json& config, std::string_view name) {
  const auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) {
    throw Error(Errc::bad_format, "tokenizer_config.json has no chat_template");
  }
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    for (const auto& entry : *it) {
      if (entry.is_object() && entry.value("name", "") == name && entry.contains("template") &&
          entry["template"].is_string()) {
        return entry["template"].get<std::string>();
      }
    }
    throw Error(Errc::bad_format, "tokenizer_config.json has no chat_template named '" + std::string(name) + "'");
  }
  throw Error(Errc::bad_format, "tokenizer_config.json: chat_template must be a string or a list of named templates");
}

bool template_emits_bos(const Tokenizer& tokenizer, std::string_view rendered) {
  const int32_t bos = tokenizer.bos();
  if (bos < 0) return false;
  const std::string text = tokenizer.token_to_bytes(bos, /*render_special=*/true);
  return !text.empty() && rendered.substr(0, text.size()) == text;
}

std::vector<int32_t> encode_chat(const Tokenizer& tokenizer, std::string_view rendered) {
  std::vector<int32_t> ids = tokenizer.encode(rendered, /*add_special=*/false, /*parse_special=*/true);
  const int32_t bos = tokenizer.bos();
  const bool has_bos = template_emits_bos(tokenizer, rendered) || (!ids.empty() && ids.front() == bos);
  if (tokenizer.vocab().add_bos && bos >= 0 && !has_bos) ids.insert(ids.begin(), bos);
  return ids;
}

}  // namespace troupe

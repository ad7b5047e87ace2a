// Boost.JSON -> ParsedRequest for Anthropic's Messages API. A user's image
// blocks (base64) go to a vision-language model as OpenAI's image parts do;
// documents and Anthropic's server tools (web search, code execution) are
// refused by name rather than dropped.
#include "net/anthropic_request.hpp"

#include <algorithm>
#include <boost/json/serialize.hpp>
#include <limits>
#include <optional>
#include <string>

#include "model/sampler.hpp"
#include "net/api_error.hpp"
#include "net/image_input.hpp"
#include "net/request_field.hpp"
#include "net/request_tools.hpp"

namespace troupe::net {
namespace {

namespace json = boost::json;

// Stop sequences one request may give (Anthropic documents no bound; the
// matching cost wants one).
constexpr size_t kMaxStopSequences = 16;

[[noreturn]] void missing(const std::string& param) {
  throw invalid_field(param, "'" + param + "' is required", "missing_field");
}

const json::value& required(const json::object& o, const char* key, const std::string& param) {
  const json::value* v = field(o, key);
  if (v == nullptr) missing(param);
  return *v;
}

// A block's text: "text" blocks only (a tool_result's content may be a
// string or such blocks).
std::string text_of(const json::value& content, const std::string& param) {
  if (content.is_string()) return str(content.as_string());
  if (!content.is_array()) wrong_type(param, "a string or an array of text blocks", content);
  std::string text;
  const json::array& blocks = content.as_array();
  for (size_t k = 0; k < blocks.size(); ++k) {
    const std::string p = param + "[" + std::to_string(k) + "]";
    if (!blocks[k].is_object()) wrong_type(p, "an object", blocks[k]);
    const std::string type = required_string(blocks[k].as_object(), "type", p + ".type");
    if (type != "text") {
      throw invalid_field(p + ".type", "'" + p + ".type' '" + type + "' is not supported here (only 'text')",
                          "unsupported_value");
    }
    if (!text.empty()) text += "\n\n";
    text += required_string(blocks[k].as_object(), "text", p + ".text");
  }
  return text;
}

// An image block's bytes: {"type": "image", "source": {"type": "base64",
// "media_type", "data"}}. A url or file source would need a fetch.
std::string image_block(const json::object& block, const std::string& b) {
  const json::value& source = required(block, "source", b + ".source");
  if (!source.is_object()) wrong_type(b + ".source", "an object", source);
  const std::string type = required_string(source.as_object(), "type", b + ".source.type");
  if (type != "base64") {
    throw invalid_field(b + ".source.type",
                        "image sources of type '" + type +
                            "' are not supported (only 'base64'): the server does not "
                            "fetch images",
                        "unsupported_value");
  }
  const std::string media = required_string(source.as_object(), "media_type", b + ".source.media_type");
  if (!media.starts_with("image/")) {
    throw invalid_field(b + ".source.media_type",
                        "'" + b + ".source.media_type' must be an image type, got '" + media + "'");
  }
  return base64_image(required_string(source.as_object(), "data", b + ".source.data"), b + ".source.data");
}

// One message's blocks as turns. A user's tool_result blocks become "tool"
// turns (tool_call_id as OpenAI's templates read it) and its text and images
// between them user turns (with images, as content parts: {"type": "image"}
// for each, its bytes in `images`); an assistant's text, thinking and
// tool_use blocks make one turn (content, reasoning_content, tool_calls with
// object arguments).
void read_message(const json::object& m, const std::string& p, std::vector<ChatTurn>& turns,
                  std::vector<ChatImage>& images) {
  const std::string role = required_string(m, "role", p + ".role");
  if (role != "user" && role != "assistant") {
    throw invalid_field(p + ".role", "'" + p + ".role' must be 'user' or 'assistant', got '" + role + "'");
  }
  const json::value& content = required(m, "content", p + ".content");
  if (content.is_string()) {
    turns.push_back({.role = role, .content = str(content.as_string())});
    return;
  }
  if (!content.is_array()) wrong_type(p + ".content", "a string or an array of content blocks", content);
  std::string text, reasoning;
  json::array calls;
  json::array parts;  // a user turn's text and images, in order
  bool has_text = false;
  bool has_image = false;
  auto flush_user_text = [&] {
    if (has_text || has_image) {
      ChatTurn turn{.role = "user", .content = std::move(text)};
      if (has_image) turn.fields_json = json::serialize(json::object{{"content", std::move(parts)}});
      turns.push_back(std::move(turn));
    }
    text.clear();
    parts.clear();
    has_text = false;
    has_image = false;
  };
  const json::array& blocks = content.as_array();
  for (size_t k = 0; k < blocks.size(); ++k) {
    const std::string b = p + ".content[" + std::to_string(k) + "]";
    if (!blocks[k].is_object()) wrong_type(b, "an object", blocks[k]);
    const json::object& block = blocks[k].as_object();
    const std::string type = required_string(block, "type", b + ".type");
    if (type == "text") {
      if (has_text) text += "\n\n";
      const std::string t = required_string(block, "text", b + ".text");
      text += t;
      parts.push_back(json::object{{"type", "text"}, {"text", t}});
      has_text = true;
    } else if (type == "image" && role == "user") {
      images.push_back({.bytes = image_block(block, b), .param = b + ".source.data"});
      parts.push_back(json::object{{"type", "image"}});
      has_image = true;
    } else if (type == "tool_result" && role == "user") {
      flush_user_text();
      const std::string id = required_string(block, "tool_use_id", b + ".tool_use_id");
      const json::value* c = field(block, "content");
      ChatTurn tool{.role = "tool", .content = c != nullptr ? text_of(*c, b + ".content") : std::string()};
      tool.fields_json = json::serialize(json::object{{"tool_call_id", id}});
      turns.push_back(std::move(tool));
    } else if (type == "tool_use" && role == "assistant") {
      const std::string id = required_string(block, "id", b + ".id");
      const std::string name = required_string(block, "name", b + ".name");
      const json::value* input = field(block, "input");
      if (input != nullptr && !input->is_object()) wrong_type(b + ".input", "an object", *input);
      calls.push_back(json::object{
          {"id", id},
          {"type", "function"},
          {"function", json::object{{"name", name}, {"arguments", input != nullptr ? *input : json::object()}}}});
    } else if (type == "thinking" && role == "assistant") {
      reasoning += required_string(block, "thinking", b + ".thinking");
    } else if (type == "redacted_thinking" && role == "assistant") {
      // Encrypted by Anthropic's servers: nothing a local template can read.
    } else {
      throw invalid_field(b + ".type",
                          "content blocks of type '" + type + "' are not supported in a" +
                              (role == "user" ? " user" : "n assistant") +
                              " message (text, image, tool_use, tool_result, thinking)",
                          "unsupported_value");
    }
  }
  if (role == "user") {
    flush_user_text();
    return;
  }
  ChatTurn turn{.role = "assistant", .content = std::move(text), .has_content = has_text || calls.empty()};
  json::object fields;
  if (!reasoning.empty()) fields["reasoning_content"] = reasoning;
  if (!calls.empty()) fields["tool_calls"] = std::move(calls);
  if (!fields.empty()) turn.fields_json = json::serialize(fields);
  turns.push_back(std::move(turn));
}

void read_anthropic_messages(const json::object& o, const RequestLimits& limits, ParsedRequest& r) {
  if (const json::value* system = field(o, "system")) {
    r.chat.messages.push_back({.role = "system", .content = text_of(*system, "system")});
  }
  const json::value& v = required(o, "messages", "messages");
  if (!v.is_array()) wrong_type("messages", "an array", v);
  const json::array& a = v.as_array();
  if (a.empty()) throw invalid_field("messages", "'messages' must not be empty");
  if (a.size() > static_cast<size_t>(limits.max_messages)) {
    out_of_range("messages", "an array of at most " + std::to_string(limits.max_messages) + " messages");
  }
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string p = "messages[" + std::to_string(i) + "]";
    if (!a[i].is_object()) wrong_type(p, "an object", a[i]);
    read_message(a[i].as_object(), p, r.chat.messages, r.chat.images);
  }
  // A conversation that ends in the assistant's words: the reply goes on
  // from them (Anthropic's prefill).
  const ChatTurn& last = r.chat.messages.back();
  if (last.role == "assistant" && !last.content.empty() && last.fields_json.empty()) {
    r.chat.continue_final_message = true;
    r.chat.add_generation_prompt = false;
  }
}

// "tools" ({"name", "description", "input_schema"}) and "tool_choice"
// ({"type": "auto" | "any" | "tool" | "none", "name",
// "disable_parallel_tool_use"}) as OpenAI's fields, for read_tools.
void read_tools_and_choice(const json::object& o, ParsedRequest& r) {
  json::object openai;
  if (const json::value* v = field(o, "tools")) {
    if (!v->is_array()) wrong_type("tools", "an array", *v);
    json::array tools;
    const json::array& a = v->as_array();
    for (size_t i = 0; i < a.size(); ++i) {
      const std::string p = "tools[" + std::to_string(i) + "]";
      if (!a[i].is_object()) wrong_type(p, "an object", a[i]);
      const json::object& t = a[i].as_object();
      if (auto type = get_string(t, "type"); type && *type != "custom") {
        throw invalid_field(p + ".type",
                            "'" + p + ".type' '" + *type +
                                "' is one of Anthropic's server tools, which this server does not run; "
                                "declare client tools with name and input_schema",
                            "unsupported_value");
      }
      const std::string name = required_string(t, "name", p + ".name");
      const json::value& schema = required(t, "input_schema", p + ".input_schema");
      if (!schema.is_object()) wrong_type(p + ".input_schema", "an object", schema);
      json::object fn{{"name", name}, {"parameters", schema}};
      if (auto d = get_string(t, "description")) fn["description"] = *d;
      tools.push_back(json::object{{"type", "function"}, {"function", std::move(fn)}});
    }
    if (!tools.empty()) openai["tools"] = std::move(tools);
  }
  if (const json::value* v = field(o, "tool_choice")) {
    if (!v->is_object()) wrong_type("tool_choice", "an object", *v);
    const json::object& c = v->as_object();
    const std::string type = required_string(c, "type", "tool_choice.type");
    if (type == "auto") {
      openai["tool_choice"] = "auto";
    } else if (type == "any") {
      openai["tool_choice"] = "required";
    } else if (type == "none") {
      openai["tool_choice"] = "none";
    } else if (type == "tool") {
      openai["tool_choice"] = json::object{
          {"type", "function"}, {"function", json::object{{"name", required_string(c, "name", "tool_choice.name")}}}};
    } else {
      throw invalid_field("tool_choice.type",
                          "'tool_choice.type' must be 'auto', 'any', 'tool' or 'none', got '" + type + "'");
    }
    if (auto d = get_bool(c, "disable_parallel_tool_use")) openai["parallel_tool_calls"] = !*d;
  }
  const json::value* choice = openai.if_contains("tool_choice");
  if (choice != nullptr && !openai.contains("tools") && !(choice->is_string() && choice->as_string() == "none")) {
    throw invalid_field("tool_choice", "'tool_choice' needs 'tools'");
  }
  read_tools(openai, r);
}

// "thinking": {"type": "enabled" | "between_tools", "budget_tokens"} sets
// the template's enable_thinking (Qwen3's), "disabled" clears it,
// "adaptive" leaves the template's default. The budget holds where the
// model thinks in a <think> block: the sampler closes the block once the
// budget is spent (grammar/thinking_budget.hpp).
void read_thinking(const json::object& o, AnthropicRequest& out, json::object& kwargs) {
  const json::value* v = field(o, "thinking");
  if (v == nullptr) return;
  if (!v->is_object()) wrong_type("thinking", "an object", *v);
  const std::string type = required_string(v->as_object(), "type", "thinking.type");
  if (type != "enabled" && type != "between_tools" && type != "disabled" && type != "adaptive") {
    throw invalid_field("thinking.type",
                        "'thinking.type' must be 'enabled', 'adaptive', 'between_tools' or "
                        "'disabled', got '" +
                            type + "'");
  }
  const std::optional<int64_t> budget =
      get_int(v->as_object(), "budget_tokens", 0, std::numeric_limits<int32_t>::max());
  if (type == "adaptive") return;
  out.thinking = type != "disabled";
  if (out.thinking && budget) out.request.params.thinking_budget = static_cast<int32_t>(*budget);
  kwargs["enable_thinking"] = out.thinking;
}

// "output_config": {"format": {"type": "json_schema", "schema"}, "effort"}
// (and the beta's top-level "output_format"): the schema holds the reply
// as response_format does; the effort is the template's reasoning_effort
// (gpt-oss's).
void read_output_config(const json::object& o, ParsedRequest& r, json::object& kwargs) {
  const json::value* format = nullptr;
  std::string param = "output_format";
  if (const json::value* config = field(o, "output_config")) {
    if (!config->is_object()) wrong_type("output_config", "an object", *config);
    if (auto effort = get_string(config->as_object(), "effort")) kwargs["reasoning_effort"] = *effort;
    format = field(config->as_object(), "format");
    param = "output_config.format";
  }
  if (format == nullptr) {
    format = field(o, "output_format");
    param = "output_format";
  }
  if (format == nullptr) return;
  if (!format->is_object()) wrong_type(param, "an object", *format);
  const std::string type = required_string(format->as_object(), "type", param + ".type");
  if (type != "json_schema") {
    throw invalid_field(param + ".type", "'" + param + ".type' must be 'json_schema', got '" + type + "'");
  }
  const json::value* schema = field(format->as_object(), "schema");
  if (schema == nullptr) throw invalid_field(param + ".schema", "'" + param + ".schema' is required", "missing_field");
  if (!schema->is_object()) wrong_type(param + ".schema", "an object", *schema);
  r.params.format =
      OutputFormat{.kind = OutputFormat::Kind::json_schema, .schema = json::serialize(*schema), .param = param};
}

AnthropicRequest read_conversation(const json::object& o, const RequestLimits& limits) {
  AnthropicRequest out;
  ParsedRequest& r = out.request;
  r.endpoint = Endpoint::chat;
  r.model = required_string(o, "model", "model");
  if (r.model.empty()) missing("model");
  read_anthropic_messages(o, limits, r);
  json::object kwargs;
  read_thinking(o, out, kwargs);
  read_output_config(o, r, kwargs);  // before the tools: a forced call is refused beside a format
  read_tools_and_choice(o, r);
  if (!kwargs.empty()) r.chat.template_kwargs_json = json::serialize(kwargs);
  return out;
}

}  // namespace

AnthropicRequest parse_anthropic_messages(std::string_view body, const RequestLimits& limits) {
  const json::object o = parse_object(body, "the request body");
  AnthropicRequest out = read_conversation(o, limits);
  ParsedRequest& r = out.request;
  const json::value& max = required(o, "max_tokens", "max_tokens");
  if (!max.is_int64() && !max.is_uint64()) wrong_type("max_tokens", "an integer", max);
  if (max.is_int64() && max.as_int64() < 1) out_of_range("max_tokens", "at least 1");
  const int64_t asked = max.is_uint64() ? std::numeric_limits<int64_t>::max() : max.as_int64();
  r.max_tokens = static_cast<int32_t>(std::min<int64_t>(asked, limits.max_tokens));
  r.stream = get_bool(o, "stream").value_or(false);
  SamplingParams& s = r.params.sampling;
  if (auto t = get_number(o, "temperature", 0.0, 1.0)) s.temperature = *t;
  if (auto p = get_number(o, "top_p", 0.0, 1.0, /*lo_open=*/true)) s.top_p = *p;
  if (auto k = get_int(o, "top_k", 0, std::numeric_limits<int32_t>::max())) s.top_k = static_cast<int32_t>(*k);
  if (const json::value* stop = field(o, "stop_sequences")) {
    if (!stop->is_array()) wrong_type("stop_sequences", "an array of strings", *stop);
    const json::array& a = stop->as_array();
    if (a.size() > kMaxStopSequences) {
      out_of_range("stop_sequences", "at most " + std::to_string(kMaxStopSequences) + " strings");
    }
    for (size_t i = 0; i < a.size(); ++i) {
      const std::string p = "stop_sequences[" + std::to_string(i) + "]";
      if (!a[i].is_string()) wrong_type(p, "a string", a[i]);
      if (a[i].as_string().empty()) throw invalid_field(p, "'" + p + "' must not be empty");
      r.params.stop.push_back(str(a[i].as_string()));
    }
  }
  try {
    check_sampling(s);
  } catch (const RequestError& e) {
    throw invalid_field(e.param(), e.what());
  }
  return out;
}

AnthropicRequest parse_anthropic_count_tokens(std::string_view body, const RequestLimits& limits) {
  return read_conversation(parse_object(body, "the request body"), limits);
}

}  // namespace troupe::net

// The Responses request translated to a chat request's fields, then read by
// parse_chat_request: one set of rules for sampling, tools and formats.
// Items a stateless server cannot serve (files, hosted tools,
// previous_response_id) are refused by name; images are read as the chat
// route reads them.
#include "net/responses_request.hpp"

#include <boost/json/serialize.hpp>
#include <string>

#include "net/api_error.hpp"
#include "net/image_input.hpp"
#include "net/request_field.hpp"

namespace troupe::net {
namespace {

namespace json = boost::json;

[[noreturn]] void unsupported_part(const std::string& param, const std::string& why) {
  throw invalid_field(param, "'" + param + "' " + why, "unsupported_value");
}

// A message's or an output's text: a string, or text parts (input_text,
// output_text) joined as a chat request's content parts are.
std::string content_text(const json::value& content, const std::string& param) {
  if (content.is_string()) return str(content.as_string());
  if (!content.is_array()) wrong_type(param, "a string or an array of content parts", content);
  std::string text;
  const json::array& parts = content.as_array();
  for (size_t j = 0; j < parts.size(); ++j) {
    const std::string p = param + "[" + std::to_string(j) + "]";
    if (!parts[j].is_object()) wrong_type(p, "an object", parts[j]);
    const std::string type = required_string(parts[j].as_object(), "type", p + ".type");
    if (type != "input_text" && type != "output_text" && type != "text") {
      unsupported_part(p + ".type", "'" + type + "' is not supported: the served model reads text only");
    }
    text += required_string(parts[j].as_object(), "text", p + ".text");
  }
  return text;
}

// A message's content for the chat request: its text, or, with input_image
// parts ({"type": "input_image", "image_url": "data:..."}), the chat's
// content parts (text and image_url), whose images a vision-language model
// reads. Only data: URLs and no file_id: the server fetches and stores
// nothing.
json::value content_of(const json::value& content, const std::string& param) {
  if (!content.is_array()) return json::value(content_text(content, param));
  json::array parts;
  bool any_image = false;
  const json::array& a = content.as_array();
  for (size_t j = 0; j < a.size(); ++j) {
    const std::string p = param + "[" + std::to_string(j) + "]";
    if (!a[j].is_object()) wrong_type(p, "an object", a[j]);
    const json::object& part = a[j].as_object();
    const std::string type = required_string(part, "type", p + ".type");
    if (type != "input_image") {
      if (type != "input_text" && type != "output_text" && type != "text") {
        unsupported_part(p + ".type",
                         "'" + type + "' is not supported: parts are input_text, output_text and input_image");
      }
      parts.push_back(json::object{{"type", "text"}, {"text", required_string(part, "text", p + ".text")}});
      continue;
    }
    if (field(part, "file_id") != nullptr) unsupported_part(p + ".file_id", "is not supported: send the image_url");
    const std::string url = required_string(part, "image_url", p + ".image_url");
    data_url_image(url, p + ".image_url");  // refused here, under the Responses API's names
    parts.push_back(json::object{{"type", "image_url"}, {"image_url", json::object{{"url", url}}}});
    any_image = true;
  }
  if (!any_image) return json::value(content_text(content, param));
  return parts;
}

// "input": a text (the user's), or items: messages, function_call
// (joined to the assistant turn before it), function_call_output (a tool
// turn), reasoning (dropped: templates drop earlier turns' reasoning).
json::array read_input(const json::object& o) {
  const json::value* v = field(o, "input");
  if (v == nullptr) throw invalid_field("input", "'input' is required", "missing_field");
  json::array messages;
  if (v->is_string()) {
    messages.push_back(json::object{{"role", "user"}, {"content", *v}});
    return messages;
  }
  if (!v->is_array()) wrong_type("input", "a string or an array of items", *v);
  const json::array& items = v->as_array();
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string p = "input[" + std::to_string(i) + "]";
    if (!items[i].is_object()) wrong_type(p, "an object", items[i]);
    const json::object& item = items[i].as_object();
    const std::string type = field(item, "type") != nullptr ? required_string(item, "type", p + ".type") : "message";
    if (type == "message") {
      const std::string role = required_string(item, "role", p + ".role");
      if (role != "user" && role != "system" && role != "developer" && role != "assistant") {
        throw invalid_field(p + ".role",
                            "'" + p + ".role' must be user, system, developer or assistant; got '" + role + "'");
      }
      const json::value* content = field(item, "content");
      if (content == nullptr) throw invalid_field(p + ".content", "'" + p + ".content' is required", "missing_field");
      messages.push_back(json::object{{"role", role}, {"content", content_of(*content, p + ".content")}});
    } else if (type == "function_call") {
      json::object call{
          {"id", required_string(item, "call_id", p + ".call_id")},
          {"type", "function"},
          {"function", json::object{{"name", required_string(item, "name", p + ".name")},
                                    {"arguments", required_string(item, "arguments", p + ".arguments")}}}};
      json::object* last = messages.empty() ? nullptr : &messages.back().as_object();
      if (last == nullptr || (*last)["role"].as_string() != "assistant") {
        messages.push_back(json::object{{"role", "assistant"}, {"content", nullptr}});
        last = &messages.back().as_object();
      }
      json::value& calls = (*last)["tool_calls"];
      if (!calls.is_array()) calls = json::array();
      calls.as_array().push_back(std::move(call));
    } else if (type == "function_call_output") {
      const json::value* output = field(item, "output");
      if (output == nullptr) throw invalid_field(p + ".output", "'" + p + ".output' is required", "missing_field");
      messages.push_back(json::object{{"role", "tool"},
                                      {"tool_call_id", required_string(item, "call_id", p + ".call_id")},
                                      {"content", content_text(*output, p + ".output")}});
    } else if (type != "reasoning") {
      unsupported_part(p + ".type", "'" + type +
                                        "' is not supported: input items are messages, function_call, "
                                        "function_call_output and reasoning (this server keeps no items to refer to)");
    }
  }
  if (messages.empty()) throw invalid_field("input", "'input' must hold at least one message");
  return messages;
}

// Function tools ({"type": "function", "name", "description",
// "parameters", "strict"}) in the chat's shape; hosted tools are refused.
json::array response_tools(const json::value& v) {
  if (!v.is_array()) wrong_type("tools", "an array", v);
  json::array out;
  const json::array& tools = v.as_array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string p = "tools[" + std::to_string(i) + "]";
    if (!tools[i].is_object()) wrong_type(p, "an object", tools[i]);
    const json::object& t = tools[i].as_object();
    const std::string type = required_string(t, "type", p + ".type");
    if (type != "function") {
      unsupported_part(p + ".type",
                       "'" + type + "' is a hosted tool, which this server does not run; declare functions");
    }
    json::object fn{{"name", required_string(t, "name", p + ".name")}};
    for (const char* key : {"description", "parameters", "strict"}) {
      if (const json::value* x = field(t, key)) fn[key] = *x;
    }
    out.push_back(json::object{{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

json::value read_tool_choice(const json::value& v) {
  if (v.is_string()) return v;  // auto, none, required: the chat's own
  if (!v.is_object()) wrong_type("tool_choice", "a string or an object", v);
  const std::string type = required_string(v.as_object(), "type", "tool_choice.type");
  if (type != "function") {
    unsupported_part("tool_choice.type", "'" + type + "' is not supported: choose a function, or auto, none, required");
  }
  return json::object{{"type", "function"},
                      {"function", json::object{{"name", required_string(v.as_object(), "name", "tool_choice.name")}}}};
}

// "text": {"format": {"type": "text" | "json_object" | "json_schema",
// "name", "schema", "strict"}} as the chat's response_format.
void read_text_format(const json::object& o, json::object& chat) {
  const json::value* text = field(o, "text");
  if (text == nullptr) return;
  if (!text->is_object()) wrong_type("text", "an object", *text);
  const json::value* format = field(text->as_object(), "format");
  if (format == nullptr) return;
  if (!format->is_object()) wrong_type("text.format", "an object", *format);
  const json::object& f = format->as_object();
  const std::string type = required_string(f, "type", "text.format.type");
  if (type == "json_object") {
    chat["response_format"] = json::object{{"type", "json_object"}};
  } else if (type == "json_schema") {
    const json::value* schema = field(f, "schema");
    if (schema == nullptr) {
      throw invalid_field("text.format.schema", "'text.format.schema' is required", "missing_field");
    }
    json::object js{{"name", field(f, "name") != nullptr ? *field(f, "name") : json::value("response")},
                    {"schema", *schema}};
    chat["response_format"] = json::object{{"type", "json_schema"}, {"json_schema", std::move(js)}};
  } else if (type != "text") {
    throw invalid_field("text.format.type",
                        "'text.format.type' must be 'text', 'json_object' or 'json_schema', got '" + type + "'");
  }
}

}  // namespace

ResponsesRequest parse_responses_request(std::string_view body, const RequestLimits& limits) {
  const json::object o = parse_object(body, "the request body");
  for (const char* stateful : {"previous_response_id", "conversation", "prompt"}) {
    if (field(o, stateful) != nullptr) {
      unsupported_part(stateful,
                       "is not supported: this server keeps no responses, conversations or prompts; send the "
                       "whole conversation as input");
    }
  }
  if (get_bool(o, "background").value_or(false)) {
    unsupported_part("background", "is not supported: stream the response instead");
  }
  if (auto t = get_int(o, "top_logprobs", 0, 20); t && *t > 0) {
    unsupported_part("top_logprobs", "is not supported on /v1/responses; /v1/chat/completions reports logprobs");
  }
  json::object chat{{"messages", read_input(o)}};
  json::object echo{{"tools", json::array()},
                    {"tool_choice", "auto"},
                    {"parallel_tool_calls", true},
                    {"temperature", 1.0},
                    {"top_p", 1.0},
                    {"max_output_tokens", nullptr},
                    {"instructions", nullptr},
                    {"text", json::object{{"format", json::object{{"type", "text"}}}}},
                    {"reasoning", nullptr},
                    {"metadata", json::object()},
                    {"previous_response_id", nullptr},
                    {"store", false},
                    {"truncation", "disabled"}};
  if (auto instructions = get_string(o, "instructions")) {
    chat["messages"].as_array().insert(chat["messages"].as_array().begin(),
                                       json::object{{"role", "system"}, {"content", *instructions}});
    echo["instructions"] = *instructions;
  }
  if (auto m = get_string(o, "model")) chat["model"] = *m;
  if (auto n = get_int(o, "max_output_tokens", 1, limits.max_tokens)) {
    chat["max_tokens"] = *n;
    echo["max_output_tokens"] = *n;
  }
  for (const char* key : {"temperature", "top_p", "stream", "parallel_tool_calls", "seed", "stop"}) {
    if (const json::value* x = field(o, key)) {
      chat[key] = *x;
      if (echo.contains(key)) echo[key] = *x;
    }
  }
  if (const json::value* tools = field(o, "tools")) {
    chat["tools"] = response_tools(*tools);
    echo["tools"] = *tools;
  }
  if (const json::value* choice = field(o, "tool_choice")) {
    chat["tool_choice"] = read_tool_choice(*choice);
    echo["tool_choice"] = *choice;
  }
  read_text_format(o, chat);
  if (const json::value* text = field(o, "text")) echo["text"] = *text;
  if (const json::value* reasoning = field(o, "reasoning")) {
    if (!reasoning->is_object()) wrong_type("reasoning", "an object", *reasoning);
    if (auto effort = get_string(reasoning->as_object(), "effort")) chat["reasoning_effort"] = *effort;
    echo["reasoning"] = *reasoning;
  }
  if (const json::value* metadata = field(o, "metadata")) echo["metadata"] = *metadata;
  ResponsesRequest out{.request = parse_chat_request(json::serialize(chat), limits),
                       .echo_json = json::serialize(echo)};
  return out;
}

}  // namespace troupe::net

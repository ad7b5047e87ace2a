// Boost.JSON -> ParsedRequest. Each field has one reader that knows its type
// and range, so every error names the field the way a client wrote it
// ("messages[2].content", "stop[1]") and says what was wrong.
#include "net/request_parser.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include "net/api_error.hpp"
#include "net/image_input.hpp"
#include "net/request_field.hpp"
#include "net/request_tools.hpp"

namespace troupe::net {
namespace {

namespace json = boost::json;

// The bytes of an image part: OpenAI's {"type": "image_url", "image_url":
// {"url": ..., "detail"?}} (the url also as a plain string, as vLLM takes
// it). Only data: URLs: the server fetches nothing on a client's behalf.
std::string image_part_bytes(const json::object& part, const std::string& p) {
  const json::value* v = field(part, "image_url");
  if (v == nullptr) throw invalid_field(p + ".image_url", "'" + p + ".image_url' is required", "missing_field");
  const json::value* url = v;
  std::string param = p + ".image_url";
  if (v->is_object()) {
    url = field(v->as_object(), "url");
    param += ".url";
    if (url == nullptr) throw invalid_field(param, "'" + param + "' is required", "missing_field");
  }
  if (!url->is_string()) wrong_type(param, "a string", *url);
  return data_url_image(std::string_view(url->as_string().data(), url->as_string().size()), param);
}

// A message's content: a string, or parts. Text parts are joined into the
// content; with image parts, `parts` gets the list the chat template reads
// (text parts as they are, each image as {"type": "image"}, as transformers'
// processors pass them) and `images` each image's bytes, in order.
std::string message_content(const json::value& c, const std::string& param, bool may_be_null, json::array& parts,
                            std::vector<ChatImage>& images) {
  if (c.is_null()) {
    if (!may_be_null) throw invalid_field(param, "'" + param + "' is required", "missing_field");
    return {};
  }
  if (c.is_string()) return std::string(c.as_string().data(), c.as_string().size());
  if (!c.is_array()) wrong_type(param, "a string or an array of content parts", c);
  std::string text;
  const json::array& a = c.as_array();
  json::array read;
  bool any_image = false;
  for (size_t j = 0; j < a.size(); ++j) {
    const std::string p = param + "[" + std::to_string(j) + "]";
    if (!a[j].is_object()) wrong_type(p, "an object", a[j]);
    const json::object& part = a[j].as_object();
    const json::value* type = field(part, "type");
    if (type == nullptr) throw invalid_field(p + ".type", "'" + p + ".type' is required", "missing_field");
    if (!type->is_string()) wrong_type(p + ".type", "a string", *type);
    if (type->as_string() == "image_url") {
      images.push_back({.bytes = image_part_bytes(part, p), .param = p + ".image_url"});
      read.push_back(json::object{{"type", "image"}});
      any_image = true;
      continue;
    }
    if (type->as_string() != "text") {
      throw invalid_field(p + ".type",
                          "content parts of type '" + std::string(type->as_string().data(), type->as_string().size()) +
                              "' are not supported (only 'text' and 'image_url')",
                          "unsupported_value");
    }
    const json::value* t = field(part, "text");
    if (t == nullptr) throw invalid_field(p + ".text", "'" + p + ".text' is required", "missing_field");
    if (!t->is_string()) wrong_type(p + ".text", "a string", *t);
    text.append(t->as_string().data(), t->as_string().size());
    read.push_back(json::object{{"type", "text"}, {"text", *t}});
  }
  if (any_image) parts = std::move(read);
  return text;
}

void read_messages(const json::object& o, const RequestLimits& limits, ParsedRequest& r) {
  const json::value* v = field(o, "messages");
  if (v == nullptr) throw invalid_field("messages", "'messages' is required", "missing_field");
  if (!v->is_array()) wrong_type("messages", "an array", *v);
  const json::array& a = v->as_array();
  if (a.empty()) throw invalid_field("messages", "'messages' must not be empty");
  if (a.size() > static_cast<size_t>(limits.max_messages)) {
    out_of_range("messages", "an array of at most " + std::to_string(limits.max_messages) + " messages");
  }
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string p = "messages[" + std::to_string(i) + "]";
    if (!a[i].is_object()) wrong_type(p, "an object", a[i]);
    const json::object& m = a[i].as_object();
    const json::value* role = field(m, "role");
    if (role == nullptr) throw invalid_field(p + ".role", "'" + p + ".role' is required", "missing_field");
    if (!role->is_string()) wrong_type(p + ".role", "a string", *role);
    const std::string role_s(role->as_string().data(), role->as_string().size());
    if (role_s != "system" && role_s != "developer" && role_s != "user" && role_s != "assistant" && role_s != "tool") {
      throw invalid_field(
          p + ".role",
          "'" + p + ".role' must be one of system, developer, user, assistant, tool; got '" + role_s + "'");
    }
    const json::value* content = m.if_contains("content");
    if (content == nullptr && role_s != "assistant") {
      throw invalid_field(p + ".content", "'" + p + ".content' is required", "missing_field");
    }
    static const json::value null_value;
    json::array parts;
    ChatTurn turn{.role = role_s,
                  .content = message_content(content != nullptr ? *content : null_value, p + ".content",
                                             role_s == "assistant", parts, r.chat.images),
                  .has_content = content != nullptr && !content->is_null()};
    // Everything else a template may read (tool_calls, name, tool_call_id,
    // reasoning_content) goes to the engine as it came; a content with
    // images goes as its parts.
    json::object fields;
    for (const auto& kv : m) {
      if (kv.key() != "role" && kv.key() != "content") fields.emplace(kv.key(), kv.value());
    }
    if (!parts.empty()) fields.emplace("content", std::move(parts));
    if (!fields.empty()) turn.fields_json = json::serialize(fields);
    r.chat.messages.push_back(std::move(turn));
  }
  read_tools(o, r);
  const std::optional<bool> generation_prompt = get_bool(o, "add_generation_prompt");
  if (generation_prompt) r.chat.add_generation_prompt = *generation_prompt;
  // vLLM's prefill: the reply goes on from the last (assistant) message.
  if (get_bool(o, "continue_final_message").value_or(false)) {
    if (generation_prompt.value_or(false)) {
      throw invalid_field("continue_final_message",
                          "'continue_final_message' and 'add_generation_prompt' cannot both be true");
    }
    if (r.chat.messages.back().role != "assistant") {
      throw invalid_field("continue_final_message",
                          "'continue_final_message' needs the last message to be the assistant's");
    }
    r.chat.continue_final_message = true;
    r.chat.add_generation_prompt = false;
  }
  // vLLM's, SGLang's and llama.cpp's way to set template variables
  // (Qwen3's enable_thinking).
  json::object kwargs;
  if (const json::value* kw = field(o, "chat_template_kwargs")) {
    if (!kw->is_object()) wrong_type("chat_template_kwargs", "an object", *kw);
    kwargs = kw->as_object();
  }
  // OpenAI's reasoning_effort ("low", "medium", "high"): gpt-oss's template
  // reads it as a variable, as vLLM passes it; chat_template_kwargs wins.
  if (const json::value* effort = field(o, "reasoning_effort")) {
    if (!effort->is_string()) wrong_type("reasoning_effort", "a string", *effort);
    if (!kwargs.contains("reasoning_effort")) kwargs.emplace("reasoning_effort", *effort);
  }
  if (!kwargs.empty()) r.chat.template_kwargs_json = json::serialize(kwargs);
}

// "priority": "interactive" | "batch", or vLLM's integer, where smaller is
// more urgent: 0 (its default) and below are interactive, anything above is
// batch. Two classes are all the scheduler knows (actors/scheduler_policy.hpp).
void read_priority(const json::object& o, ParsedRequest& r) {
  const json::value* v = field(o, "priority");
  if (v == nullptr) return;
  if (v->is_string()) {
    const json::string& s = v->as_string();
    if (s == "interactive") {
      r.params.priority = Priority::interactive;
    } else if (s == "batch") {
      r.params.priority = Priority::batch;
    } else {
      throw invalid_field("priority", "'priority' must be 'interactive', 'batch' or an integer, got '" +
                                          std::string(s.data(), s.size()) + "'");
    }
  } else if (v->is_int64()) {
    r.params.priority = v->as_int64() > 0 ? Priority::batch : Priority::interactive;
  } else if (v->is_uint64()) {
    r.params.priority = Priority::batch;  // beyond int64: certainly > 0
  } else {
    wrong_type("priority", "'interactive', 'batch' or an integer", *v);
  }
}

void read_stop(const json::object& o, const RequestLimits& limits, ParsedRequest& r) {
  const json::value* v = field(o, "stop");
  if (v == nullptr) return;
  auto add = [&](const json::value& s, const std::string& param) {
    if (!s.is_string()) wrong_type(param, "a string", s);
    if (s.as_string().empty()) throw invalid_field(param, "'" + param + "' must not be empty");
    r.params.stop.emplace_back(s.as_string().data(), s.as_string().size());
  };
  if (v->is_string()) {
    add(*v, "stop");
    return;
  }
  if (!v->is_array()) wrong_type("stop", "a string or an array of strings", *v);
  const json::array& a = v->as_array();
  if (a.size() > static_cast<size_t>(limits.max_stop)) {
    out_of_range("stop", "at most " + std::to_string(limits.max_stop) + " strings");
  }
  for (size_t i = 0; i < a.size(); ++i) add(a[i], "stop[" + std::to_string(i) + "]");
}

// "logit_bias": {"<token id>": bias in [-100, 100], ...}, as OpenAI's API.
// The ids' vocabulary bound is the engine's rule (check_logit_bias).
void read_logit_bias(const json::object& o, ParsedRequest& r) {
  const json::value* lb = field(o, "logit_bias");
  if (lb == nullptr) return;
  if (!lb->is_object()) wrong_type("logit_bias", "an object", *lb);
  if (lb->as_object().size() > kMaxLogitBias) {
    out_of_range("logit_bias", "an object of at most " + std::to_string(kMaxLogitBias) + " tokens");
  }
  for (const auto& [key, value] : lb->as_object()) {
    const std::string param = "logit_bias." + std::string(key);
    int64_t id = -1;
    const bool digits = !key.empty() && key.size() <= 10 &&
                        std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (digits) id = std::stoll(std::string(key));
    if (!digits || id > std::numeric_limits<int32_t>::max()) {
      throw invalid_field("logit_bias", "'logit_bias' keys must be token ids, got '" + std::string(key) + "'",
                          "invalid_value");
    }
    if (!value.is_number()) wrong_type(param, "a number", value);
    const double b = value.to_number<double>();
    if (!(b >= -100.0 && b <= 100.0)) out_of_range(param, "a number in [-100, 100]");
    r.params.sampling.logit_bias.push_back({.token = static_cast<int32_t>(id), .bias = static_cast<float>(b)});
  }
}

// A schema given as an object (or, for vLLM's guided_json, a JSON string),
// kept as text: the engine compiles it (check_output_format).
std::string schema_text(const json::value& v, const std::string& param) {
  if (v.is_object() || v.is_bool()) return json::serialize(v);
  if (v.is_string()) return std::string(v.as_string().data(), v.as_string().size());
  wrong_type(param, "an object", v);
}

// "response_format": OpenAI's {"type": "text" | "json_object" |
// "json_schema", "json_schema": {"name", "schema", "strict"}}; llama.cpp's
// {"type": "json_object", "schema": {...}}, "json_schema" and "grammar"
// (GBNF); vLLM's "guided_json", "guided_grammar" and "guided_choice".
void read_response_format(const json::object& o, ParsedRequest& r) {
  OutputFormat& f = r.params.format;
  if (const json::value* rf = field(o, "response_format")) {
    if (!rf->is_object()) wrong_type("response_format", "an object", *rf);
    const json::object& ro = rf->as_object();
    const json::value* type = field(ro, "type");
    if (type == nullptr) throw invalid_field("response_format.type", "'response_format.type' is required", "missing_field");
    if (!type->is_string()) wrong_type("response_format.type", "a string", *type);
    const std::string_view t(type->as_string().data(), type->as_string().size());
    if (t == "json_object") {
      f.kind = OutputFormat::Kind::json_object;
      if (const json::value* schema = field(ro, "schema")) {
        f.kind = OutputFormat::Kind::json_schema;
        f.schema = schema_text(*schema, "response_format.schema");
      }
    } else if (t == "json_schema") {
      const json::value* js = field(ro, "json_schema");
      if (js == nullptr) {
        throw invalid_field("response_format.json_schema", "'response_format.json_schema' is required", "missing_field");
      }
      if (!js->is_object()) wrong_type("response_format.json_schema", "an object", *js);
      const json::value* schema = field(js->as_object(), "schema");
      if (schema == nullptr) {
        throw invalid_field("response_format.json_schema.schema", "'response_format.json_schema.schema' is required",
                            "missing_field");
      }
      f.kind = OutputFormat::Kind::json_schema;
      f.schema = schema_text(*schema, "response_format.json_schema.schema");
    } else if (t != "text") {
      throw invalid_field("response_format.type",
                          "'response_format.type' must be 'text', 'json_object' or 'json_schema', got '" +
                              std::string(t) + "'",
                          "invalid_value");
    }
  }
  // The other servers' spellings, each a constraint of its own: at most
  // one constraint a request.
  auto other = [&](const char* key, OutputFormat::Kind kind) {
    const json::value* v = field(o, key);
    if (v == nullptr) return;
    if (f.constrained()) {
      throw invalid_field(key, std::string("'") + key + "' and another output constraint cannot both be given");
    }
    f.kind = kind;
    f.param = key;
    if (kind == OutputFormat::Kind::choice) {
      if (!v->is_array()) wrong_type(key, "an array of strings", *v);
      f.schema = json::serialize(*v);
    } else if (kind == OutputFormat::Kind::gbnf) {
      if (!v->is_string()) wrong_type(key, "a string", *v);
      f.schema = std::string(v->as_string().data(), v->as_string().size());
    } else {
      f.schema = schema_text(*v, key);
    }
  };
  other("guided_json", OutputFormat::Kind::json_schema);  // vLLM
  other("json_schema", OutputFormat::Kind::json_schema);  // llama.cpp's server
  other("grammar", OutputFormat::Kind::gbnf);             // llama.cpp's server
  other("guided_grammar", OutputFormat::Kind::gbnf);      // vLLM (its EBNF is GBNF's)
  other("guided_choice", OutputFormat::Kind::choice);     // vLLM
}

// Fields shared by both endpoints and the WebSocket: length, sampling,
// stop strings, seed, n.
void read_common(const json::object& o, const RequestLimits& limits, ParsedRequest& r) {
  if (auto m = get_string(o, "model")) r.model = *m;
  r.stream = get_bool(o, "stream").value_or(false);
  if (const json::value* so = field(o, "stream_options")) {
    if (!so->is_object()) wrong_type("stream_options", "an object", *so);
    const json::value* iu = field(so->as_object(), "include_usage");
    if (iu != nullptr && !iu->is_bool()) wrong_type("stream_options.include_usage", "a boolean", *iu);
    r.include_usage = iu != nullptr && iu->as_bool();
  }
  if (auto n = get_int(o, "n", 1, limits.max_n)) r.n = static_cast<int32_t>(*n);
  if (auto b = get_int(o, "best_of", 1, limits.max_n); b && *b != r.n) {
    throw invalid_field("best_of", "'best_of' other than n is not supported", "unsupported_value");
  }
  if (auto m = get_int(o, "max_tokens", 1, limits.max_tokens)) r.max_tokens = static_cast<int32_t>(*m);
  SamplingParams& s = r.params.sampling;
  if (auto t = get_number(o, "temperature", 0.0, 2.0)) s.temperature = *t;
  if (auto p = get_number(o, "top_p", 0.0, 1.0, /*lo_open=*/true)) s.top_p = *p;
  if (auto k = get_int(o, "top_k", -1, std::numeric_limits<int32_t>::max()))
    s.top_k = static_cast<int32_t>(std::max<int64_t>(*k, 0));
  if (auto m = get_number(o, "min_p", 0.0, 1.0)) s.min_p = *m;
  if (auto p = get_number(o, "presence_penalty", -2.0, 2.0)) s.presence_penalty = *p;
  if (auto f = get_number(o, "frequency_penalty", -2.0, 2.0)) s.frequency_penalty = *f;
  if (auto rp = get_number(o, "repetition_penalty", 0.0, 10.0, /*lo_open=*/true)) s.repetition_penalty = *rp;
  if (auto n = get_int(o, "repeat_last_n", -1, 1 << 30)) s.penalty_last_n = static_cast<int32_t>(*n);
  if (auto n = get_int(o, "thinking_token_budget", 0, std::numeric_limits<int32_t>::max())) {
    r.params.thinking_budget = static_cast<int32_t>(*n);
  }
  if (const json::value* seed = field(o, "seed")) {
    if (seed->is_int64()) {
      r.seed = static_cast<uint64_t>(seed->as_int64());
    } else if (seed->is_uint64()) {
      r.seed = seed->as_uint64();
    } else {
      wrong_type("seed", "an integer", *seed);
    }
  }
  read_stop(o, limits, r);
  r.params.ignore_eos = get_bool(o, "ignore_eos").value_or(false);
  // false: this request decodes one token per step even where the server
  // runs speculative decoding.
  r.params.speculative = get_bool(o, "speculative").value_or(true);
  read_priority(o, r);
  read_logit_bias(o, r);
  read_response_format(o, r);
}

void read_chat_fields(const json::object& o, const RequestLimits& limits, ParsedRequest& r) {
  r.endpoint = Endpoint::chat;
  read_messages(o, limits, r);
  // The newer name wins when both are given.
  if (auto m = get_int(o, "max_completion_tokens", 1, limits.max_tokens)) r.max_tokens = static_cast<int32_t>(*m);
  r.logprobs = get_bool(o, "logprobs").value_or(false);
  if (auto t = get_int(o, "top_logprobs", 0, 20)) {
    if (!r.logprobs && *t > 0) {
      throw invalid_field("top_logprobs", "'top_logprobs' needs 'logprobs' set to true");
    }
    r.top_logprobs = static_cast<int32_t>(*t);
  }
}

void read_completion_fields(const json::object& o, const RequestLimits& limits, ParsedRequest& r) {
  r.endpoint = Endpoint::completions;
  read_prompts(o, "prompt", limits.max_prompts, r.prompts, r.token_prompts);
  r.echo = get_bool(o, "echo").value_or(false);
  if (auto lp = get_int(o, "logprobs", 0, 5)) {
    r.logprobs = true;
    r.top_logprobs = static_cast<int32_t>(*lp);
  }
  // The legacy API's scoring: echoed prompt tokens come with logprobs too.
  r.params.prompt_logprobs = r.echo && r.logprobs;
  if (auto suffix = get_string(o, "suffix"); suffix && !suffix->empty()) {
    throw invalid_field("suffix", "'suffix' is not supported", "unsupported_value");
  }
}

void finish(const json::object& o, ParsedRequest& r) {
  r.params.sampling.logprobs = r.logprobs;
  r.params.sampling.n_logprobs = r.top_logprobs;
  r.return_tokens_as_token_ids = get_bool(o, "return_tokens_as_token_ids").value_or(false);
  // The sampler's own rule, on the values as it will see them (floats: a
  // top_p of 1e-300 that passed as a double is 0 as a float).
  try {
    check_sampling(r.params.sampling);
  } catch (const RequestError& e) {
    throw invalid_field(e.param(), e.what());
  }
}

void require_model(const ParsedRequest& r) {
  if (r.model.empty()) throw invalid_field("model", "'model' is required", "missing_field");
}

}  // namespace

ParsedRequest parse_completion_request(std::string_view body, const RequestLimits& limits) {
  const json::object o = parse_object(body, "the request body");
  ParsedRequest r;
  read_common(o, limits, r);
  require_model(r);
  read_completion_fields(o, limits, r);
  finish(o, r);
  return r;
}

ParsedRequest parse_chat_request(std::string_view body, const RequestLimits& limits) {
  const json::object o = parse_object(body, "the request body");
  ParsedRequest r;
  read_common(o, limits, r);
  require_model(r);
  read_chat_fields(o, limits, r);
  finish(o, r);
  return r;
}

TokenizeRequest parse_tokenize_request(std::string_view body, const RequestLimits& limits) {
  const json::object o = parse_object(body, "the request body");
  TokenizeRequest t;
  if (auto m = get_string(o, "model")) t.model = *m;
  t.return_token_strs = get_bool(o, "return_token_strs").value_or(false);
  if (field(o, "messages") != nullptr) {
    ParsedRequest r;
    read_messages(o, limits, r);
    t.prompt = EngineRequest::from_chat(std::move(r.chat));
    return t;
  }
  const auto text = get_string(o, "prompt");
  if (!text) throw invalid_field("prompt", "a /tokenize request needs 'prompt' (text) or 'messages' (chat)", "missing_field");
  t.prompt = EngineRequest::from_text(
      {.text = *text, .add_special = get_bool(o, "add_special_tokens").value_or(true), .parse_special = true});
  return t;
}

TokenizeRequest parse_detokenize_request(std::string_view body) {
  const json::object o = parse_object(body, "the request body");
  TokenizeRequest t;
  t.detokenize = true;
  if (auto m = get_string(o, "model")) t.model = *m;
  const json::value* v = field(o, "tokens");
  if (v == nullptr) throw invalid_field("tokens", "'tokens' is required", "missing_field");
  if (!v->is_array()) wrong_type("tokens", "an array of token ids", *v);
  t.prompt = EngineRequest::from_tokens(token_list(v->as_array(), "tokens"));
  return t;
}

WsClientMessage parse_ws_message(std::string_view text, const RequestLimits& limits, std::string* id_out) {
  const json::object o = parse_object(text, "the message");
  WsClientMessage m;
  const auto type = get_string(o, "type");
  if (!type) throw invalid_field("type", "'type' is required ('generate' or 'cancel')", "missing_field");
  const json::value* id = field(o, "id");
  if (id == nullptr) throw invalid_field("id", "'id' is required", "missing_field");
  if (!id->is_string()) wrong_type("id", "a string", *id);
  if (id->as_string().empty() || id->as_string().size() > 128) out_of_range("id", "a string of 1 to 128 bytes");
  m.id.assign(id->as_string().data(), id->as_string().size());
  if (id_out != nullptr) *id_out = m.id;
  if (*type == "cancel") {
    m.kind = WsClientMessage::Kind::cancel;
    return m;
  }
  if (*type != "generate") {
    throw invalid_field("type", "'type' must be 'generate' or 'cancel', got '" + *type + "'");
  }
  m.kind = WsClientMessage::Kind::generate;
  ParsedRequest& r = m.request;
  read_common(o, limits, r);
  if (r.n != 1) out_of_range("n", "1 over the WebSocket (send one message per request)");
  if (field(o, "messages") != nullptr) {
    read_chat_fields(o, limits, r);
  } else if (field(o, "prompt") != nullptr) {
    // One prompt: a string or token ids (no batches: one message per request).
    const json::value* p = field(o, "prompt");
    const bool ids = p->is_array() && (p->as_array().empty() || p->as_array()[0].is_number());
    if (!p->is_string() && !ids) wrong_type("prompt", "a string or an array of token ids", *p);
    read_completion_fields(o, limits, r);
  } else {
    throw invalid_field("messages", "a generate message needs 'messages' (chat) or 'prompt' (text)", "missing_field");
  }
  r.stream = true;
  finish(o, r);
  return m;
}

}  // namespace troupe::net

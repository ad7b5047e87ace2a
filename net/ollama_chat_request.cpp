// Boost.JSON -> ParsedRequest for Ollama's /api/chat and /api/generate.
// Fields Ollama reads at load time (num_ctx, num_gpu, num_thread, ...) are
// the server's, fixed at start: they are accepted and not used, as
// keep_alive is. Images go to a vision-language model as content parts.
// What Troupe cannot do (Go templates, suffix,
// mirostat, typical_p) is refused by name rather than ignored.
#include "net/ollama_chat_request.hpp"

#include <boost/json/serialize.hpp>
#include <limits>
#include <string>

#include "model/sampler.hpp"
#include "net/api_error.hpp"
#include "net/image_input.hpp"
#include "net/request_field.hpp"
#include "net/request_tools.hpp"

namespace troupe::net {
namespace {

namespace json = boost::json;

// The most stop strings an Ollama request may give: its clients (Continue,
// Open WebUI) send a template's end markers, often more than OpenAI's 4.
constexpr size_t kMaxOllamaStop = 16;

// Reads `key` of the options object with get_*; an error names
// "options.<key>".
template <class Read>
auto option(const std::string& key, Read read) {
  try {
    return read();
  } catch (const ApiError& e) {
    std::string message = e.what();
    const std::string quoted = "'" + key + "'";
    if (const size_t at = message.find(quoted); at != std::string::npos) {
      message.replace(at, quoted.size(), "'options." + key + "'");
    }
    throw ApiError(e.status(), message, "options." + key, e.code());
  }
}

[[noreturn]] void unsupported(const std::string& param, const std::string& why) {
  throw invalid_field(param, "'" + param + "' is not supported: " + why, "unsupported_value");
}

void read_stop(const json::value& v, ParsedRequest& r) {
  auto add = [&](const json::value& s, const std::string& param) {
    if (!s.is_string()) wrong_type(param, "a string", s);
    if (s.as_string().empty()) throw invalid_field(param, "'" + param + "' must not be empty");
    r.params.stop.emplace_back(s.as_string().data(), s.as_string().size());
  };
  if (v.is_string()) {
    add(v, "options.stop");
    return;
  }
  if (!v.is_array()) wrong_type("options.stop", "a string or an array of strings", v);
  const json::array& a = v.as_array();
  if (a.size() > kMaxOllamaStop) out_of_range("options.stop", "at most " + std::to_string(kMaxOllamaStop) + " strings");
  for (size_t i = 0; i < a.size(); ++i) add(a[i], "options.stop[" + std::to_string(i) + "]");
}

// "options": Ollama's Modelfile parameters. num_predict -1 (no limit) and
// -2 (fill the context) both leave max_tokens to the context, as the
// OpenAI routes do when it is absent.
void read_options(const json::object& o, const RequestLimits& limits, ParsedRequest& r) {
  SamplingParams& s = r.params.sampling;
  s.temperature = kOllamaTemperature;
  s.top_k = kOllamaTopK;
  s.top_p = kOllamaTopP;
  s.penalty_last_n = kOllamaRepeatLastN;
  const json::value* v = field(o, "options");
  if (v == nullptr) return;
  if (!v->is_object()) wrong_type("options", "an object", *v);
  const json::object& opts = v->as_object();
  if (auto n = option("num_predict", [&] { return get_int(opts, "num_predict", -2, limits.max_tokens); })) {
    if (*n == 0) out_of_range("options.num_predict", "-1 (no limit), -2 (fill the context) or a positive count");
    if (*n > 0) r.max_tokens = static_cast<int32_t>(*n);
  }
  if (auto t = option("temperature", [&] { return get_number(opts, "temperature", 0.0, 100.0); })) s.temperature = *t;
  if (auto k = option("top_k", [&] { return get_int(opts, "top_k", 0, std::numeric_limits<int32_t>::max()); })) {
    s.top_k = static_cast<int32_t>(*k);
  }
  if (auto p = option("top_p", [&] { return get_number(opts, "top_p", 0.0, 1.0); })) {
    s.top_p = *p > 0.0f ? *p : 1.0f;  // llama.cpp's rule: 0 turns the filter off
  }
  if (auto m = option("min_p", [&] { return get_number(opts, "min_p", 0.0, 1.0); })) s.min_p = *m;
  if (auto rp = option("repeat_penalty", [&] { return get_number(opts, "repeat_penalty", 0.0, 10.0, true); })) {
    s.repetition_penalty = *rp;
  }
  // The penalties' window, as llama.cpp reads it: -1 the whole context, 0
  // no penalty at all.
  if (auto n = option("repeat_last_n", [&] { return get_int(opts, "repeat_last_n", -1, 1 << 30); })) {
    s.penalty_last_n = static_cast<int32_t>(*n);
  }
  if (auto p = option("presence_penalty", [&] { return get_number(opts, "presence_penalty", -2.0, 2.0); })) {
    s.presence_penalty = *p;
  }
  if (auto f = option("frequency_penalty", [&] { return get_number(opts, "frequency_penalty", -2.0, 2.0); })) {
    s.frequency_penalty = *f;
  }
  if (const json::value* seed = field(opts, "seed")) {
    // Ollama's -1 (its default): a random seed.
    if (seed->is_int64()) {
      if (seed->as_int64() >= 0) r.seed = static_cast<uint64_t>(seed->as_int64());
    } else if (seed->is_uint64()) {
      r.seed = seed->as_uint64();
    } else {
      wrong_type("options.seed", "an integer", *seed);
    }
  }
  if (const json::value* stop = field(opts, "stop")) read_stop(*stop, r);
  if (auto m = option("mirostat", [&] { return get_int(opts, "mirostat", 0, 2); }); m && *m != 0) {
    unsupported("options.mirostat", "Troupe samples with temperature, top_k, top_p and min_p");
  }
  if (auto t = option("typical_p", [&] { return get_number(opts, "typical_p", 0.0, 1.0); }); t && *t < 1.0f) {
    unsupported("options.typical_p", "Troupe samples with temperature, top_k, top_p and min_p");
  }
}

// "format": "" (text), "json", or a JSON schema object.
void read_format(const json::object& o, ParsedRequest& r) {
  const json::value* v = field(o, "format");
  if (v == nullptr) return;
  OutputFormat& f = r.params.format;
  f.param = "format";
  if (v->is_string()) {
    const json::string& s = v->as_string();
    if (s.empty()) return;
    if (s != "json") {
      throw invalid_field("format", "'format' must be \"json\" or a JSON schema object, got \"" +
                                        std::string(s.data(), s.size()) + "\"");
    }
    f.kind = OutputFormat::Kind::json_object;
    return;
  }
  if (!v->is_object()) wrong_type("format", "\"json\" or a JSON schema object", *v);
  f.kind = OutputFormat::Kind::json_schema;
  f.schema = json::serialize(*v);
}

// "think": true/false, or a level ("low", "medium", "high"), as template
// variables: Qwen3's enable_thinking, gpt-oss's reasoning_effort.
void read_think(const json::object& o, OllamaGenerateRequest& out) {
  const json::value* v = field(o, "think");
  if (v == nullptr) return;
  json::object kwargs;
  if (v->is_bool()) {
    out.think = v->as_bool();
    kwargs["enable_thinking"] = out.think;
  } else if (v->is_string()) {
    const json::string& level = v->as_string();
    if (level != "low" && level != "medium" && level != "high") {
      throw invalid_field("think", "'think' must be true, false, \"low\", \"medium\" or \"high\", got \"" +
                                       std::string(level.data(), level.size()) + "\"");
    }
    out.think = true;
    kwargs["enable_thinking"] = true;
    kwargs["reasoning_effort"] = level;
  } else {
    wrong_type("think", "a boolean or a level (\"low\", \"medium\", \"high\")", *v);
  }
  out.request.chat.template_kwargs_json = json::serialize(kwargs);
}

// A message's (or /api/generate's) "images", base64 each, into `images`;
// the parts the template reads: the images first, then the text (as
// LLaVA's templates place them), or none when there are no images.
json::array read_images(const json::object& o, const std::string& param, const std::string& text,
                        std::vector<ChatImage>& images) {
  const json::value* v = field(o, "images");
  if (v == nullptr) return {};
  if (!v->is_array()) wrong_type(param, "an array", *v);
  json::array parts;
  const json::array& a = v->as_array();
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string p = param + "[" + std::to_string(i) + "]";
    if (!a[i].is_string()) wrong_type(p, "a base64 string", a[i]);
    images.push_back(
        {.bytes = base64_image(std::string_view(a[i].as_string().data(), a[i].as_string().size()), p), .param = p});
    parts.push_back(json::object{{"type", "image"}});
  }
  if (!parts.empty()) parts.push_back(json::object{{"type", "text"}, {"text", text}});
  return parts;
}

// An assistant's calls, Ollama's [{"function": {"name", "arguments": {...}}}],
// in OpenAI's shape for the template: the arguments stay an object (the
// prompt reader reads string arguments into objects too).
json::array read_tool_calls(const json::value& v, const std::string& param) {
  if (!v.is_array()) wrong_type(param, "an array", v);
  json::array out;
  const json::array& calls = v.as_array();
  for (size_t k = 0; k < calls.size(); ++k) {
    const std::string p = param + "[" + std::to_string(k) + "]";
    if (!calls[k].is_object()) wrong_type(p, "an object", calls[k]);
    const json::object& call = calls[k].as_object();
    const json::value* fn = field(call, "function");
    if (fn == nullptr) throw invalid_field(p + ".function", "'" + p + ".function' is required", "missing_field");
    if (!fn->is_object()) wrong_type(p + ".function", "an object", *fn);
    const json::object& f = fn->as_object();
    const json::value* name = field(f, "name");
    if (name == nullptr) {
      throw invalid_field(p + ".function.name", "'" + p + ".function.name' is required", "missing_field");
    }
    if (!name->is_string()) wrong_type(p + ".function.name", "a string", *name);
    const json::value* args = field(f, "arguments");
    if (args != nullptr && !args->is_object() && !args->is_string()) {
      wrong_type(p + ".function.arguments", "an object", *args);
    }
    json::object openai{
        {"type", "function"},
        {"function", json::object{{"name", *name}, {"arguments", args != nullptr ? *args : json::object()}}}};
    if (const json::value* id = field(call, "id"); id != nullptr && id->is_string()) openai["id"] = *id;
    out.push_back(std::move(openai));
  }
  return out;
}

void read_ollama_messages(const json::object& o, const RequestLimits& limits, ParsedRequest& r) {
  const json::value* v = field(o, "messages");
  if (v == nullptr) return;
  if (!v->is_array()) wrong_type("messages", "an array", *v);
  const json::array& a = v->as_array();
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
    if (role_s != "system" && role_s != "user" && role_s != "assistant" && role_s != "tool") {
      throw invalid_field(p + ".role",
                          "'" + p + ".role' must be one of system, user, assistant, tool; got '" + role_s + "'");
    }
    const std::optional<std::string> content = get_string(m, "content");
    json::array parts = read_images(m, p + ".images", content.value_or(std::string()), r.chat.images);
    // What a template reads beside the content, under the names Hugging
    // Face's templates use.
    json::object fields;
    if (!parts.empty()) fields["content"] = std::move(parts);
    if (auto thinking = get_string(m, "thinking"); thinking && !thinking->empty()) {
      fields["reasoning_content"] = *thinking;
    }
    if (const json::value* calls = field(m, "tool_calls")) {
      json::array openai = read_tool_calls(*calls, p + ".tool_calls");
      if (!openai.empty()) fields["tool_calls"] = std::move(openai);
    }
    if (auto name = get_string(m, "tool_name"); name && !name->empty()) fields["name"] = *name;
    ChatTurn turn{.role = role_s, .content = content.value_or(std::string()), .has_content = content.has_value()};
    if (!fields.empty()) turn.fields_json = json::serialize(fields);
    r.chat.messages.push_back(std::move(turn));
  }
}

// Fields both routes share: the model, stream (on unless false), options,
// format, think, logprobs.
void read_common(const json::object& o, const RequestLimits& limits, OllamaGenerateRequest& out) {
  ParsedRequest& r = out.request;
  const std::optional<std::string> model = get_string(o, "model");
  if (!model || model->empty()) throw invalid_field("model", "'model' is required", "missing_field");
  r.model = *model;
  r.stream = get_bool(o, "stream").value_or(true);
  read_options(o, limits, r);
  read_format(o, r);
  read_think(o, out);
  out.logprobs = get_bool(o, "logprobs").value_or(false);
  if (auto t = get_int(o, "top_logprobs", 0, 20)) {
    r.top_logprobs = static_cast<int32_t>(*t);
    out.logprobs = out.logprobs || *t > 0;
  }
  r.logprobs = out.logprobs;
  r.params.sampling.logprobs = out.logprobs;
  r.params.sampling.n_logprobs = r.top_logprobs;
  if (const json::value* k = o.if_contains("keep_alive");
      k != nullptr && !k->is_null() && !k->is_string() && !k->is_number()) {
    wrong_type("keep_alive", "a duration string or a number of seconds", *k);
  }
}

// The sampler's own rule on the values as it will see them; a parameter is
// named as Ollama's options name it.
void check(ParsedRequest& r) {
  try {
    check_sampling(r.params.sampling);
  } catch (const RequestError& e) {
    const std::string param = e.param() == "repetition_penalty" ? "repeat_penalty" : e.param();
    throw invalid_field(param == "top_logprobs" ? param : "options." + param, e.what());
  }
}

}  // namespace

OllamaGenerateRequest parse_ollama_chat(std::string_view body, const RequestLimits& limits) {
  const json::object o = parse_object(body, "the request body");
  OllamaGenerateRequest out;
  ParsedRequest& r = out.request;
  r.endpoint = Endpoint::chat;
  read_common(o, limits, out);
  read_ollama_messages(o, limits, r);
  out.load_only = r.chat.messages.empty();
  // A conversation that ends in the assistant's words: the reply goes on
  // from them, as Ollama's does.
  if (!out.load_only && r.chat.messages.back().role == "assistant" && !r.chat.messages.back().content.empty()) {
    r.chat.continue_final_message = true;
    r.chat.add_generation_prompt = false;
  }
  read_tools(o, r);
  check(r);
  return out;
}

OllamaGenerateRequest parse_ollama_generate(std::string_view body, const RequestLimits& limits) {
  const json::object o = parse_object(body, "the request body");
  OllamaGenerateRequest out;
  ParsedRequest& r = out.request;
  read_common(o, limits, out);
  if (auto t = get_string(o, "template"); t && !t->empty()) {
    unsupported("template", "Troupe renders the model's own chat template (Jinja), not Ollama's Go templates");
  }
  if (auto s = get_string(o, "suffix"); s && !s->empty()) {
    unsupported("suffix", "fill-in-the-middle is not served; send the prompt alone");
  }
  if (const json::value* c = field(o, "context")) {
    if (!c->is_array()) wrong_type("context", "an array of token ids", *c);
    if (!c->as_array().empty()) {
      unsupported("context", "Ollama deprecated it; send the conversation as messages to /api/chat");
    }
  }
  const std::string prompt = get_string(o, "prompt").value_or(std::string());
  const std::optional<std::string> system = get_string(o, "system");
  const bool raw = get_bool(o, "raw").value_or(false);
  if (raw && system && !system->empty()) {
    throw invalid_field("raw", "raw mode does not support system: put it in the prompt");
  }
  out.load_only = prompt.empty();
  if (raw) {
    if (const json::value* images = field(o, "images");
        images != nullptr && images->is_array() && !images->as_array().empty()) {
      unsupported("images", "raw mode takes no images: the chat template places them");
    }
    // The prompt as it is, its special tokens' texts read as those tokens.
    r.endpoint = Endpoint::completions;
    r.prompts.push_back(prompt);
  } else {
    r.endpoint = Endpoint::chat;
    if (system && !system->empty())
      r.chat.messages.push_back({.role = "system", .content = *system, .has_content = true});
    ChatTurn user{.role = "user", .content = prompt, .has_content = true};
    json::array parts = read_images(o, "images", prompt, r.chat.images);
    if (!parts.empty()) user.fields_json = json::serialize(json::object{{"content", std::move(parts)}});
    r.chat.messages.push_back(std::move(user));
  }
  check(r);
  return out;
}

}  // namespace troupe::net

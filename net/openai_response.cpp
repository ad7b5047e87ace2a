// Builds the response and frame JSON with Boost.JSON. Field order follows
// OpenAI's own responses so that diffs against them read easily.
#include "net/openai_response.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include "tokenizer/utf8.hpp"

namespace troupe::net {
namespace {

namespace json = boost::json;

json::string_view sv(std::string_view s) { return json::string_view(s.data(), s.size()); }

const char* object_name(Endpoint e, bool chunk) {
  if (e == Endpoint::chat) return chunk ? "chat.completion.chunk" : "chat.completion";
  return "text_completion";
}

json::object usage_object(Usage u) {
  json::object o;
  o["prompt_tokens"] = u.prompt_tokens;
  o["completion_tokens"] = u.completion_tokens;
  o["total_tokens"] = u.prompt_tokens + u.completion_tokens;
  return o;
}

json::array bytes_json(const std::vector<uint8_t>& bytes) {
  json::array a;
  a.reserve(bytes.size());
  for (uint8_t b : bytes) a.emplace_back(static_cast<int64_t>(b));
  return a;
}

// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}], "refusal": null}
json::value chat_logprobs(const std::vector<TokenLogprobs>& lps) {
  json::array content;
  for (const TokenLogprobs& t : lps) {
    json::object entry;
    entry["token"] = sv(t.chosen.token);
    entry["logprob"] = t.chosen.logprob;
    entry["bytes"] = bytes_json(t.chosen.bytes);
    json::array top;
    for (const TokenAlternative& alt : t.top) {
      json::object a;
      a["token"] = sv(alt.token);
      a["logprob"] = alt.logprob;
      a["bytes"] = bytes_json(alt.bytes);
      top.emplace_back(std::move(a));
    }
    entry["top_logprobs"] = std::move(top);
    content.emplace_back(std::move(entry));
  }
  json::object o;
  o["content"] = std::move(content);
  o["refusal"] = nullptr;
  return o;
}

// Completions: {"tokens", "token_logprobs", "top_logprobs", "text_offset"}.
json::value completion_logprobs(const std::vector<TokenLogprobs>& lps) {
  json::array tokens, token_logprobs, top_logprobs, offsets;
  for (const TokenLogprobs& t : lps) {
    tokens.emplace_back(sv(t.chosen.token));
    if (t.unscored) {
      // An echoed prompt's first token: nothing precedes it to score it by.
      token_logprobs.emplace_back(nullptr);
      top_logprobs.emplace_back(nullptr);
    } else {
      token_logprobs.emplace_back(t.chosen.logprob);
      json::object top;
      for (const TokenAlternative& alt : t.top) top[sv(alt.token)] = alt.logprob;
      top_logprobs.emplace_back(std::move(top));
    }
    offsets.emplace_back(t.text_offset);
  }
  json::object o;
  o["tokens"] = std::move(tokens);
  o["token_logprobs"] = std::move(token_logprobs);
  o["top_logprobs"] = std::move(top_logprobs);
  o["text_offset"] = std::move(offsets);
  return o;
}

json::value logprobs_json(Endpoint e, bool with, const std::vector<TokenLogprobs>* lps) {
  if (!with || lps == nullptr) return nullptr;
  return e == Endpoint::chat ? chat_logprobs(*lps) : completion_logprobs(*lps);
}

// [{"index"?, "id", "type": "function", "function": {"name", "arguments"}}]:
// streamed deltas carry each call's index.
json::array tool_calls_json(const std::vector<OutputToolCall>& calls, bool indexed) {
  json::array a;
  for (size_t k = 0; k < calls.size(); ++k) {
    json::object c;
    if (indexed) c["index"] = k;
    c["id"] = sv(calls[k].id);
    c["type"] = "function";
    json::object fn;
    fn["name"] = sv(calls[k].call.name);
    fn["arguments"] = sv(calls[k].call.arguments);
    c["function"] = std::move(fn);
    a.emplace_back(std::move(c));
  }
  return a;
}

json::object head(const ResponseMeta& meta, bool chunk) {
  json::object o;
  o["id"] = sv(meta.id);
  o["object"] = object_name(meta.endpoint, chunk);
  o["created"] = meta.created;
  o["model"] = sv(meta.model);
  return o;
}

}  // namespace

std::string response_body(const ResponseMeta& meta, const std::vector<ChoiceOutput>& choices, Usage usage) {
  json::object o = head(meta, false);
  json::array arr;
  for (const ChoiceOutput& c : choices) {
    json::object ch;
    ch["index"] = c.index;
    if (meta.endpoint == Endpoint::chat) {
      json::object msg;
      msg["role"] = "assistant";
      if (c.text.empty() && !c.tool_calls.empty()) {
        msg["content"] = nullptr;
      } else {
        msg["content"] = sv(c.text);
      }
      if (!c.reasoning.empty()) msg["reasoning_content"] = sv(c.reasoning);
      if (!c.tool_calls.empty()) msg["tool_calls"] = tool_calls_json(c.tool_calls, false);
      ch["message"] = std::move(msg);
    } else {
      ch["text"] = sv(c.text);
    }
    ch["logprobs"] = logprobs_json(meta.endpoint, c.with_logprobs, &c.logprobs);
    ch["finish_reason"] = sv(c.finish_reason);
    arr.emplace_back(std::move(ch));
  }
  o["choices"] = std::move(arr);
  o["usage"] = usage_object(usage);
  return json::serialize(o);
}

std::string chunk_json(const ResponseMeta& meta, const ChunkInput& in) {
  json::object o = head(meta, true);
  json::object ch;
  ch["index"] = in.index;
  if (meta.endpoint == Endpoint::chat) {
    json::object delta;
    if (in.role_first) delta["role"] = "assistant";
    if (in.role_first || !in.text.empty()) delta["content"] = sv(in.text);
    if (!in.reasoning.empty()) delta["reasoning_content"] = sv(in.reasoning);
    if (in.tool_calls != nullptr) delta["tool_calls"] = tool_calls_json(*in.tool_calls, true);
    ch["delta"] = std::move(delta);
  } else {
    ch["text"] = sv(in.text);
  }
  ch["logprobs"] = logprobs_json(meta.endpoint, in.with_logprobs, in.logprobs);
  ch["finish_reason"] = in.finish_reason.empty() ? json::value(nullptr) : json::value(sv(in.finish_reason));
  json::array arr;
  arr.emplace_back(std::move(ch));
  o["choices"] = std::move(arr);
  if (in.usage_null) o["usage"] = nullptr;
  return json::serialize(o);
}

std::string usage_chunk_json(const ResponseMeta& meta, Usage usage) {
  json::object o = head(meta, true);
  o["choices"] = json::array();
  o["usage"] = usage_object(usage);
  return json::serialize(o);
}

std::string sse_event(std::string_view json_text) {
  std::string out;
  out.reserve(json_text.size() + 8);
  out += "data: ";
  out += json_text;
  out += "\n\n";
  return out;
}

std::string sse_done() { return "data: [DONE]\n\n"; }

std::string model_json(const std::string& id, int64_t created) {
  json::object m;
  m["id"] = sv(id);
  m["object"] = "model";
  m["created"] = created;
  m["owned_by"] = "troupe";
  return json::serialize(m);
}

std::string models_list_json(const std::string& id, int64_t created) {
  json::object o;
  o["object"] = "list";
  json::array data;
  data.emplace_back(json::parse(model_json(id, created)));
  o["data"] = std::move(data);
  return json::serialize(o);
}

std::string ws_hello(const std::string& model, size_t max_message_bytes, int32_t max_requests, bool images) {
  json::object o;
  o["type"] = "hello";
  o["protocol"] = "troupe.v1";
  o["model"] = sv(model);
  o["max_message_bytes"] = static_cast<uint64_t>(max_message_bytes);
  o["max_requests"] = max_requests;
  o["images"] = images;
  return json::serialize(o);
}

std::string ws_token(const std::string& id, int32_t index, int32_t token, std::string_view text,
                     const TokenLogprobs* logprobs) {
  json::object o;
  o["type"] = "token";
  o["id"] = sv(id);
  o["index"] = index;
  o["token"] = token;
  o["text"] = sv(text);
  if (logprobs != nullptr) {
    o["logprob"] = logprobs->chosen.logprob;
    json::array top;
    for (const TokenAlternative& alt : logprobs->top) {
      json::object a;
      a["token"] = sv(alt.token);
      a["logprob"] = alt.logprob;
      top.emplace_back(std::move(a));
    }
    o["top_logprobs"] = std::move(top);
  }
  return json::serialize(o);
}

std::string ws_final(const WsFinal& f) {
  json::object o;
  o["type"] = "final";
  o["id"] = sv(f.id);
  o["finish_reason"] = sv(f.finish_reason);
  o["text"] = sv(f.text);
  if (!f.tool_calls.empty()) o["tool_calls"] = tool_calls_json(f.tool_calls, false);
  o["usage"] = usage_object(f.usage);
  json::object t;
  t["queue_ms"] = f.queue_seconds * 1000.0;
  t["first_token_ms"] = f.first_token_seconds * 1000.0;
  t["total_ms"] = f.total_seconds * 1000.0;
  // Decode speed: tokens after the first over the time after the first.
  const double decode_s = f.total_seconds - f.first_token_seconds;
  t["tokens_per_second"] =
      (f.usage.completion_tokens > 1 && decode_s > 0) ? (f.usage.completion_tokens - 1) / decode_s : 0.0;
  o["timing"] = std::move(t);
  return json::serialize(o);
}

std::string ws_error(const std::string& id, const ApiError& e) {
  json::object o;
  o["type"] = "error";
  o["id"] = id.empty() ? json::value(nullptr) : json::value(sv(id));
  json::value body = json::parse(error_body(e));
  o["error"] = std::move(body.as_object()["error"]);
  if (e.retry_after() > 0) o["retry_after"] = e.retry_after();
  return json::serialize(o);
}

TokenAlternative token_alternative(std::string bytes, float logprob) {
  TokenAlternative t;
  t.bytes.assign(bytes.begin(), bytes.end());
  t.token = utf8::to_valid(bytes);
  t.logprob = logprob;
  return t;
}

}  // namespace troupe::net

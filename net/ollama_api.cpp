#include "net/ollama_api.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>

#include "net/json_body.hpp"

#ifndef TROUPE_VERSION
#error "TROUPE_VERSION is set by CMakeLists.txt (the project's version)"
#endif

namespace troupe::net {

namespace {

namespace json = boost::json;

void append_vector(std::string& out, const std::vector<float>& v) {
  out += '[';
  for (size_t j = 0; j < v.size(); ++j) {
    if (j > 0) out += ',';
    append_number(out, v[j]);
  }
  out += ']';
}

// RFC 3339 in UTC, as Go's time.Time marshals.
std::string rfc3339(int64_t unix_seconds) {
  const auto t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The capabilities Ollama's clients test for: "completion" (chat and
// generate), "tools" (Troupe holds any model's calls to the tools'
// schemas), "thinking", "embedding".
json::array capabilities(const ModelInfo& m) {
  if (m.n_labels > 0) return {"classifier"};
  if (m.pooling != Pooling::none) return {"embedding"};
  json::array out{"completion", "tools"};
  if (m.reasoning_tags || m.harmony) out.emplace_back("thinking");
  return out;
}

json::object details(const ServedModel& served) {
  return {{"parent_model", ""},
          {"format", served.format},
          {"family", served.architecture},
          {"families", json::array{json::string(served.architecture)}},
          {"parameter_size", ""},
          {"quantization_level", ""}};
}

}  // namespace

std::string ollama_embed_body(const std::vector<std::vector<float>>& vectors, const std::string& model,
                              int64_t prompt_tokens, int64_t total_ns) {
  std::string out = R"({"model":)" + json_quoted(model) + R"(,"embeddings":[)";
  for (size_t i = 0; i < vectors.size(); ++i) {
    if (i > 0) out += ',';
    append_vector(out, vectors[i]);
  }
  out += R"(],"total_duration":)" + std::to_string(total_ns) + R"(,"load_duration":0,"prompt_eval_count":)" +
         std::to_string(prompt_tokens) + "}";
  return out;
}

std::string ollama_embedding_body(const std::vector<float>& vector) {
  std::string out = R"({"embedding":)";
  append_vector(out, vector);
  return out + "}";
}

std::string ollama_tags_body(const OllamaModelFacts& model) {
  const ServedModel& served = model.served;
  json::object entry{{"name", served.id},
                     {"model", served.id},
                     {"modified_at", rfc3339(served.created)},
                     {"size", model.weight_bytes},
                     {"digest", served.digest},
                     {"details", details(served)},
                     {"capabilities", capabilities(served.engine)}};
  return json::serialize(json::object{{"models", json::array{std::move(entry)}}});
}

std::string ollama_show_body(const OllamaModelFacts& model) {
  const ServedModel& served = model.served;
  const ModelInfo& m = served.engine;
  const std::string& arch = served.architecture;
  json::object info{{"general.architecture", arch},
                    {"general.basename", m.name},
                    {arch + ".context_length", m.context_length},
                    {arch + ".embedding_length", m.n_embd},
                    {arch + ".block_count", m.n_layer},
                    {arch + ".vocab_size", m.n_vocab}};
  json::object body{{"modelfile", ""},
                    {"parameters", ""},
                    {"details", details(served)},
                    {"model_info", std::move(info)},
                    {"capabilities", capabilities(m)},
                    {"modified_at", rfc3339(served.created)}};
  return json::serialize(body);
}

std::string ollama_ps_body(const OllamaModelFacts& model, int64_t kv_bytes, const std::vector<StageHealth>& stages) {
  const ServedModel& served = model.served;
  const int64_t size = model.weight_bytes + kv_bytes;
  int64_t layers = 0;
  int64_t gpu_layers = 0;
  for (const StageHealth& s : stages) {
    const int64_t n = s.last_layer - s.first_layer + 1;
    layers += n;
    if (s.where.starts_with("cuda")) gpu_layers += n;
  }
  const int64_t vram = layers > 0 ? size * gpu_layers / layers : 0;
  json::object entry{{"name", served.id},
                     {"model", served.id},
                     {"size", size},
                     {"digest", served.digest},
                     {"details", details(served)},
                     // Go's zero time would read as "already expired"; the
                     // model stays for the server's life.
                     {"expires_at", "9999-12-31T23:59:59Z"},
                     {"size_vram", vram},
                     {"context_length", served.engine.context_length}};
  return json::serialize(json::object{{"models", json::array{std::move(entry)}}});
}

std::string ollama_timestamp_now() {
  const auto now = std::chrono::system_clock::now();
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  std::string out = rfc3339(ns / 1'000'000'000);  // ...T18:22:03Z
  char fraction[12];
  std::snprintf(fraction, sizeof fraction, ".%09lld", static_cast<long long>(ns % 1'000'000'000));
  return out.insert(out.size() - 1, fraction);
}

std::string ollama_version_body() { return R"({"version":")" TROUPE_VERSION R"("})"; }

HttpReply ollama_error_reply(HttpReply openai, const ApiError& e) {
  // The engine's advice names the OpenAI-side field; Ollama's is "truncate".
  std::string message = e.what();
  constexpr std::string_view kOpenAi = "truncate_prompt_tokens";
  if (const size_t at = message.find(kOpenAi); at != std::string::npos) {
    message.replace(at, kOpenAi.size(), "\"truncate\": true");
  }
  openai.body = R"({"error":)" + json_quoted(message) + "}";
  return openai;
}

}  // namespace troupe::net

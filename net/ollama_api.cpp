#include "net/ollama_api.hpp"

#include <ctime>

#include "net/json_body.hpp"

#ifndef TROUPE_VERSION
#error "TROUPE_VERSION is set by CMakeLists.txt (the project's version)"
#endif

namespace troupe::net {

namespace {

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

std::string ollama_tags_body(const ServedModel& served) {
  const ModelInfo& m = served.engine;
  const char* kind = m.n_labels > 0 ? "classifier" : m.pooling != Pooling::none ? "embedding" : "completion";
  return R"({"models":[{"name":)" + json_quoted(served.id) + R"(,"model":)" + json_quoted(served.id) +
         R"(,"modified_at":")" + rfc3339(served.created) + R"(","size":0,"digest":"","details":{"format":"",)" +
         R"("family":"","families":null,"parameter_size":"","quantization_level":""},"capabilities":[")" + kind +
         R"("]}]})";
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

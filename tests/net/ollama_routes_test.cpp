// Ollama's /api/ routes (net/ollama_routes.cpp) over the real actor pipeline
// and tests/fixtures/hf/nomic_bert_embedding_mean (nomic-embed-text's
// network, its vectors from sentence-transformers,
// tools/fixtures/make_nomic_bert_models.py), without sockets: /api/embed's
// and /api/embeddings' bodies as Ollama's docs/api.md gives them, its
// truncation rule, the model list, and every error in Ollama's shape
// ({"error": "message"}).
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "net/pipeline_client.hpp"
#include "net/routes.hpp"
#include "tests/net/fake_engine.hpp"

namespace troupe::net {
namespace {

using nlohmann::json;
using test::RecordingWriter;

constexpr float kOllamaTolerance = 2e-5f;  // as tests/model/embedding_model_test.cpp
constexpr int32_t kContext = 128;

json embedding_reference() {
  std::ifstream in(std::string(TROUPE_FIXTURES_DIR) + "/hf/nomic_bert_embedding_mean/reference.json");
  return json::parse(in);
}

class OllamaRoutes : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    PipelineConfig p{.model_path = std::string(TROUPE_FIXTURES_DIR) + "/hf/nomic_bert_embedding_mean",
                     .stages = {{.first_layer = 0, .last_layer = -1, .threads = 1}},
                     .n_kv_blocks = 64};
    p.scheduler.max_tokens_per_step = kContext;
    p.scheduler.context_length = kContext;
    backend_ = new PipelineClient({.pipeline = p});
    ASSERT_TRUE(backend_->wait_loaded()) << backend_->load_state().stage;
    CoreOptions options;
    options.limits.embedding_parallel = 2;
    core_ = new ServerCore(*backend_, options);
  }
  static void TearDownTestSuite() {
    delete backend_;  // ends the pipeline first: its callbacks reach the core
    delete core_;
  }

  static HttpReply call(const std::string& method, const std::string& target, const std::string& body = {}) {
    RouteResult r = core_->handle({.method = method, .target = target, .body = body});
    if (!r.async) return r.reply;
    auto w = std::make_shared<RecordingWriter>();
    r.async->start(w);
    EXPECT_TRUE(w->wait(std::chrono::seconds(60))) << target;
    return w->reply;
  }
  static HttpReply post(const std::string& target, const json& body) { return call("POST", target, body.dump()); }

  // Ollama's error: a status and {"error": "<message>"}, the message a string.
  static std::string error_of(const HttpReply& r, int status) {
    EXPECT_EQ(r.status, status) << r.body;
    const json j = json::parse(r.body);
    EXPECT_TRUE(j["error"].is_string()) << r.body;
    return j["error"].is_string() ? j["error"].get<std::string>() : std::string();
  }

  static std::string id() { return backend_->served_model().id; }

  static PipelineClient* backend_;
  static ServerCore* core_;
};

PipelineClient* OllamaRoutes::backend_ = nullptr;
ServerCore* OllamaRoutes::core_ = nullptr;

void expect_vector(const json& got, const json& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t k = 0; k < want.size(); ++k)
    EXPECT_NEAR(got[k].get<float>(), want[k].get<float>(), kOllamaTolerance) << what;
}

TEST_F(OllamaRoutes, EmbedIsSentenceTransformers) {
  const json ref = embedding_reference();
  // Ollama's clients name a model with its tag; ":latest" is the default one.
  const HttpReply r = post("/api/embed", json{{"model", id() + ":latest"}, {"input", ref["texts"]}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["model"], id() + ":latest");
  ASSERT_EQ(j["embeddings"].size(), ref["texts"].size());
  int64_t tokens = 0;
  for (size_t i = 0; i < ref["texts"].size(); ++i) {
    expect_vector(j["embeddings"][i], ref["embeddings"][i], "text " + std::to_string(i));
    tokens += static_cast<int64_t>(ref["token_ids"][i].size());
  }
  EXPECT_EQ(j["prompt_eval_count"], tokens);
  EXPECT_GT(j["total_duration"].get<int64_t>(), 0);
  EXPECT_EQ(j["load_duration"], 0);

  // One text as a string; Matryoshka's leading dimensions, normalized again.
  const HttpReply one = post("/api/embed", json{{"model", id()}, {"input", ref["texts"][0]}, {"dimensions", 16}});
  ASSERT_EQ(one.status, 200) << one.body;
  expect_vector(json::parse(one.body)["embeddings"][0], ref["matryoshka_embeddings"][0], "16 dimensions");
}

// The older route: one "prompt", one "embedding".
TEST_F(OllamaRoutes, LegacyEmbeddingsRoute) {
  const json ref = embedding_reference();
  const HttpReply r = post("/api/embeddings", json{{"model", id()}, {"prompt", ref["texts"][1]}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_FALSE(j.contains("embeddings"));
  expect_vector(j["embedding"], ref["embeddings"][1], "legacy");
}

// Ollama cuts an input to the context unless "truncate" is false; an
// encoder keeps its first tokens and the closing [SEP].
TEST_F(OllamaRoutes, TruncatesToTheContextUnlessTold) {
  const json ref = embedding_reference();
  std::string text;
  for (int i = 0; i < 4; ++i) text += ref["texts"][3].get<std::string>() + " ";  // about 290 tokens
  const HttpReply cut = post("/api/embed", json{{"model", id()}, {"input", text}});
  ASSERT_EQ(cut.status, 200) << cut.body;
  EXPECT_EQ(json::parse(cut.body)["prompt_eval_count"], kContext);
  const std::string why =
      error_of(post("/api/embed", json{{"model", id()}, {"input", text}, {"truncate", false}}), 400);
  EXPECT_NE(why.find("context holds 128"), std::string::npos) << why;
  // The advice names Ollama's field, not the OpenAI-side one.
  EXPECT_NE(why.find("(\"truncate\": true keeps the first ones"), std::string::npos) << why;
  EXPECT_EQ(why.find("truncate_prompt_tokens"), std::string::npos) << why;
}

TEST_F(OllamaRoutes, ListsTheModelAndTheVersion) {
  const HttpReply tags = call("GET", "/api/tags");
  ASSERT_EQ(tags.status, 200) << tags.body;
  const json models = json::parse(tags.body)["models"];
  ASSERT_EQ(models.size(), 1u);
  EXPECT_EQ(models[0]["name"], id());
  EXPECT_EQ(models[0]["model"], id());
  EXPECT_EQ(models[0]["capabilities"], json::array({"embedding"}));
  EXPECT_EQ(models[0]["modified_at"].get<std::string>().size(), 20u);  // 2026-12-06T15:00:00Z
  EXPECT_EQ(models[0]["digest"].get<std::string>().size(), 16u);       // model_identity
  EXPECT_GT(models[0]["size"].get<int64_t>(), 0);
  // /api/show: the family and the sizes Ollama's clients read (Continue
  // takes the context from "<arch>.context_length").
  const HttpReply show = post("/api/show", json{{"model", id() + ":latest"}});
  ASSERT_EQ(show.status, 200) << show.body;
  const json s = json::parse(show.body);
  const std::string arch = s["details"]["family"];
  EXPECT_EQ(arch, "nomic-bert");
  EXPECT_EQ(s["details"]["format"], "safetensors");  // a Hugging Face folder
  EXPECT_EQ(s["model_info"]["general.architecture"], arch);
  EXPECT_EQ(s["model_info"][arch + ".context_length"], kContext);
  EXPECT_EQ(s["model_info"][arch + ".embedding_length"], embedding_reference()["embeddings"][0].size());
  EXPECT_EQ(s["capabilities"], json::array({"embedding"}));
  const HttpReply version = call("GET", "/api/version");
  ASSERT_EQ(version.status, 200) << version.body;
  EXPECT_FALSE(json::parse(version.body)["version"].get<std::string>().empty());
}

TEST_F(OllamaRoutes, ErrorsAreInOllamasShape) {
  EXPECT_NE(error_of(post("/api/embed", json{{"input", "a"}}), 400).find("'model' is required"), std::string::npos);
  EXPECT_NE(error_of(post("/api/embed", json{{"model", "llama3"}, {"input", "a"}}), 404).find("'llama3' not found"),
            std::string::npos);
  EXPECT_NE(error_of(post("/api/embed", json{{"model", id() + ":7b"}, {"input", "a"}}), 404).find("not found"),
            std::string::npos);
  EXPECT_NE(error_of(post("/api/embed", json{{"model", id()}}), 400).find("input"), std::string::npos);
  EXPECT_NE(error_of(post("/api/embeddings", json{{"model", id()}, {"input", "a"}}), 400).find("'prompt'"),
            std::string::npos);
  EXPECT_NE(error_of(post("/api/embed", json{{"model", id()}, {"input", "a"}, {"options", 3}}), 400).find("options"),
            std::string::npos);
  EXPECT_FALSE(error_of(call("POST", "/api/embed", "{not json"), 400).empty());
  // The engine's own rules, in the same shape: a token past the vocabulary.
  EXPECT_NE(
      error_of(post("/api/embed", json{{"model", id()}, {"input", {json::array({2, 99999})}}}), 400).find("99999"),
      std::string::npos);
  const HttpReply get = call("GET", "/api/embed");
  error_of(get, 405);
  EXPECT_NE(std::find(get.headers.begin(), get.headers.end(), std::pair<std::string, std::string>{"Allow", "POST"}),
            get.headers.end());
  // An embedding model generates nothing, as Ollama answers.
  const std::string chat =
      error_of(post("/api/chat", json{{"model", id()}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}}), 400);
  EXPECT_NE(chat.find("does not support chat"), std::string::npos) << chat;
  const std::string generate = error_of(post("/api/generate", json{{"model", id()}, {"prompt", "hi"}}), 400);
  EXPECT_NE(generate.find("does not support generate"), std::string::npos) << generate;
  const std::string pull = error_of(post("/api/pull", json{{"model", "llama3"}}), 404);
  EXPECT_NE(pull.find("/api/chat"), std::string::npos) << pull;
}

}  // namespace
}  // namespace troupe::net

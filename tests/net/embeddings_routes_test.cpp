// POST /v1/embeddings over the real actor pipeline and the sentence-
// transformers fixture tests/fixtures/hf/qwen3_embedding (its vectors from
// sentence-transformers, tools/fixtures/make_embedding_models.py), still
// without sockets: OpenAI's reply, base64 vectors, batches larger than the
// slots they take, every bad input's 400, and a client that leaves.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/base64.hpp"
#include "net/embeddings_reply.hpp"
#include "net/embeddings_request.hpp"
#include "net/pipeline_client.hpp"
#include "net/routes.hpp"
#include "tests/net/fake_engine.hpp"
#include "tests/wait_until.hpp"

namespace troupe::net {
namespace {

using nlohmann::json;
using test::RecordingWriter;

constexpr float kTolerance = 2e-5f;  // as tests/model/embedding_model_test.cpp

json reference() {
  std::ifstream in(std::string(TROUPE_FIXTURES_DIR) + "/hf/qwen3_embedding/reference.json");
  return json::parse(in);
}

class EmbeddingRoutes : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    PipelineConfig p{.model_path = std::string(TROUPE_FIXTURES_DIR) + "/hf/qwen3_embedding",
                     .stages = {{.first_layer = 0, .last_layer = -1, .threads = 1}},
                     .n_kv_blocks = 64};
    p.scheduler.max_tokens_per_step = 64;
    backend_ = new PipelineClient({.pipeline = p});
    ASSERT_TRUE(backend_->wait_loaded()) << backend_->load_state().stage;
    CoreOptions options;
    options.limits.embedding_parallel = 3;  // a batch of more inputs takes turns
    core_ = new ServerCore(*backend_, options);
  }
  static void TearDownTestSuite() {
    delete backend_;  // ends the pipeline first: its callbacks reach the core
    delete core_;
  }

  static HttpReply post(const std::string& target, const std::string& body) {
    RouteResult r = core_->handle({.method = "POST", .target = target, .body = body});
    if (!r.async) return r.reply;
    auto w = std::make_shared<RecordingWriter>();
    r.async->start(w);
    EXPECT_TRUE(w->wait(std::chrono::seconds(60))) << target;
    return w->reply;
  }

  static json error_of(const HttpReply& r) {
    EXPECT_EQ(r.status, 400) << r.body;
    return json::parse(r.body)["error"];
  }

  static PipelineClient* backend_;
  static ServerCore* core_;
};

PipelineClient* EmbeddingRoutes::backend_ = nullptr;
ServerCore* EmbeddingRoutes::core_ = nullptr;

TEST_F(EmbeddingRoutes, VectorsAreSentenceTransformers) {
  const json ref = reference();
  // Each text twice: six inputs through three slots.
  json input = ref["texts"];
  for (const auto& t : ref["texts"]) input.push_back(t);
  const HttpReply r = post("/v1/embeddings", json{{"model", "qwen3_embedding"}, {"input", input}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["model"], "qwen3_embedding");
  ASSERT_EQ(j["data"].size(), input.size());
  int64_t tokens = 0;
  for (size_t i = 0; i < input.size(); ++i) {
    const json& d = j["data"][i];
    EXPECT_EQ(d["object"], "embedding");
    EXPECT_EQ(d["index"], i);
    const json& want = ref["embeddings"][i % ref["texts"].size()];
    ASSERT_EQ(d["embedding"].size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_NEAR(d["embedding"][k].get<float>(), want[k].get<float>(), kTolerance) << i << "," << k;
    }
    tokens += static_cast<int64_t>(ref["token_ids"][i % ref["texts"].size()].size());
  }
  EXPECT_EQ(j["usage"]["prompt_tokens"], tokens);
  EXPECT_EQ(j["usage"]["total_tokens"], tokens);
  // Each input counts as a request in /metrics.
  const std::string metrics = core_->metrics_text();
  EXPECT_NE(metrics.find("troupe_requests_total{endpoint=\"embeddings\"} " + std::to_string(input.size())),
            std::string::npos)
      << metrics.substr(0, 2000);
}

TEST_F(EmbeddingRoutes, Base64IsLittleEndianFloat32) {
  const json ref = reference();
  const HttpReply r =
      post("/v1/embeddings",
           json{{"input", ref["token_ids"][0]}, {"encoding_format", "base64"}, {"dimensions", ref["matryoshka_dims"]}}
               .dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string b64 = json::parse(r.body)["data"][0]["embedding"];
  // Decoded here by hand: 4 characters -> 3 bytes.
  std::string bytes;
  auto value = [](char c) {
    return static_cast<uint32_t>(std::strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", c) -
                                 "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/");
  };
  for (size_t i = 0; i + 4 <= b64.size(); i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (size_t k = 0; k < 4; ++k) {
      v <<= 6;
      if (b64[i + k] == '=')
        ++pad;
      else
        v |= value(b64[i + k]);
    }
    for (int k = 0; k < 3 - pad; ++k) bytes.push_back(static_cast<char>(v >> (16 - 8 * k)));
  }
  const json& want = ref["matryoshka_embeddings"][0];
  ASSERT_EQ(bytes.size(), want.size() * sizeof(float));
  for (size_t k = 0; k < want.size(); ++k) {
    float x = 0;
    std::memcpy(&x, bytes.data() + k * sizeof(float), sizeof x);
    EXPECT_NEAR(x, want[k].get<float>(), kTolerance) << k;
  }
}

TEST_F(EmbeddingRoutes, BadInputsNameTheirField) {
  EXPECT_EQ(error_of(post("/v1/embeddings", R"({"input": "a", "encoding_format": "int8"})"))["param"],
            "encoding_format");
  EXPECT_EQ(error_of(post("/v1/embeddings", R"({"model": "x"})"))["param"], "input");
  EXPECT_EQ(error_of(post("/v1/embeddings", R"({"input": []})"))["param"], "input");
  EXPECT_EQ(error_of(post("/v1/embeddings", R"({"input": ["a", [1, 2]]})"))["param"], "input[1]");
  EXPECT_EQ(error_of(post("/v1/embeddings", R"({"input": "a", "dimensions": 0})"))["param"], "dimensions");
  EXPECT_EQ(error_of(post("/v1/embeddings", R"({"input": "a", "model": "gpt"})"))["param"], "model");
  // The engine's rules, at its front door: the model's width, the vocabulary, the context.
  EXPECT_EQ(error_of(post("/v1/embeddings", R"({"input": "a", "dimensions": 65})"))["param"], "dimensions");
  EXPECT_EQ(error_of(post("/v1/embeddings", R"({"input": [[1, 2], [5, 99999]]})"))["param"], "input[1][1]");
  const HttpReply r =
      post("/v1/embeddings", json{{"input", {std::vector<int32_t>{5}, std::vector<int32_t>(300, 5)}}}.dump());
  EXPECT_EQ(error_of(r)["param"], "input[1]");
  EXPECT_EQ(error_of(post("/v1/embeddings", R"({"input": "a", "truncate_prompt_tokens": 0})"))["param"],
            "truncate_prompt_tokens");
  EXPECT_EQ(error_of(post("/v1/embeddings", R"({"input": "a", "truncate_prompt_tokens": 257})"))["param"],
            "truncate_prompt_tokens");
  const HttpReply cut = post("/v1/embeddings",
                             json{{"input", {std::vector<int32_t>(300, 5)}}, {"truncate_prompt_tokens", -1}}.dump());
  EXPECT_EQ(cut.status, 200) << cut.body;
  EXPECT_EQ(json::parse(cut.body)["usage"]["prompt_tokens"], 256);
  // This server embeds; it does not complete.
  const json e = error_of(post("/v1/completions", R"({"model": "qwen3_embedding", "prompt": "hi"})"));
  EXPECT_EQ(e["param"], "model");
  EXPECT_NE(e["message"].get<std::string>().find("embedding model"), std::string::npos) << e;
  EXPECT_EQ(core_->handle({.method = "GET", .target = "/v1/embeddings"}).reply.status, 405);
}

TEST_F(EmbeddingRoutes, ClientThatLeavesFreesItsRequests) {
  // Seconds of work (512 inputs of 250 tokens, three at a time): the client
  // leaves long before the last one.
  json input = json::array();
  for (int i = 0; i < 512; ++i) input.push_back(std::vector<int32_t>(250, 5 + i % 300));
  const uint64_t admitted = backend_->stats().admitted;
  RouteResult r = core_->handle({.method = "POST", .target = "/v1/embeddings", .body = json{{"input", input}}.dump()});
  ASSERT_TRUE(r.async);
  auto w = std::make_shared<RecordingWriter>();
  r.async->start(w);
  EXPECT_EQ(core_->admission().in_flight(), 3);  // its slots (embedding_parallel)
  // Running in the engine (several steps each), then the client leaves.
  ASSERT_TRUE(
      troupe::test::wait_until([&] { return backend_->stats().admitted > admitted; }, std::chrono::seconds(30)));
  r.async->cancel();
  EXPECT_TRUE(troupe::test::wait_until(
      [&] {
        const PipelineStats s = backend_->stats();
        return s.running == 0 && s.waiting == 0 && core_->admission().in_flight() == 0;
      },
      std::chrono::seconds(30)));
  EXPECT_EQ(backend_->stats().kv_blocks_used, 0);
  EXPECT_FALSE(w->wait(std::chrono::seconds(0)));  // nothing is sent to a client that left
}

TEST(EmbeddingsRequest, Parses) {
  const EmbeddingsRequest r = parse_embeddings_request(
      R"({"model": "m", "input": ["a", "b"], "encoding_format": "base64", "dimensions": 8, "normalize": false,
          "add_special_tokens": false, "user": "u1"})",
      16);
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.texts, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r.base64);
  EXPECT_EQ(r.dimensions, 8);
  EXPECT_EQ(r.normalize, 0);
  EXPECT_FALSE(r.add_special_tokens);
  EXPECT_EQ(parse_embeddings_request(R"({"input": "a", "truncate_prompt_tokens": -1})", 2).truncate, -1);
  EXPECT_THROW(parse_embeddings_request(R"({"input": "a", "truncate_prompt_tokens": -2})", 2), ApiError);
  EXPECT_EQ(parse_embeddings_request(R"({"input": [1, 2, 3]})", 16).token_lists.size(), 1u);
  EXPECT_THROW(parse_embeddings_request(R"({"input": ["a", "b", "c"]})", 2), ApiError);
  EXPECT_THROW(parse_embeddings_request(R"({"input": 5})", 2), ApiError);
  EXPECT_THROW(parse_embeddings_request(R"({"input": "a", "user": 5})", 2), ApiError);
  EXPECT_THROW(parse_embeddings_request("[", 2), ApiError);
}

// RFC 4648's test vectors.
TEST(EmbeddingsReply, Base64) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foob"), "Zm9vYg==");
  EXPECT_EQ(base64_encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
}

TEST(EmbeddingsReply, FloatsReadBackExactly) {
  const std::vector<float> v{0.1f, -1e-30f, 3.4028235e38f, 0.0f, 1.0f / 3.0f};
  const json j = json::parse(embeddings_body({v}, false, "m\"x", 7));
  EXPECT_EQ(j["model"], "m\"x");
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(j["data"][0]["embedding"][i].get<float>(), v[i]) << i;
  EXPECT_EQ(j["usage"]["prompt_tokens"], 7);
}

}  // namespace
}  // namespace troupe::net

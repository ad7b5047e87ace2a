// POST /v1/rerank, /v1/score and /v1/classify over the real actor
// pipeline, without sockets: a cross-encoder (tests/fixtures/hf/
// bert_reranker, its scores from sentence-transformers' CrossEncoder)
// reads each pair; an embedding model (bert_embedding_cls) scores by the
// cosine of its vectors; a three-label classifier (bert_classifier, from
// transformers) classifies, as do a Llama classifier and a causal reranker
// (Qwen3-Reranker's prompt and yes/no head); the replies' shapes (Jina/Cohere rerank, vLLM
// score and classify), the other spellings of the routes, and every bad
// input's 400.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "net/classify_reply.hpp"
#include "net/pipeline_client.hpp"
#include "net/routes.hpp"
#include "net/score_reply.hpp"
#include "net/score_request.hpp"
#include "tests/net/fake_engine.hpp"
#include "tests/wait_until.hpp"

namespace troupe::net {
namespace {

using nlohmann::json;
using test::RecordingWriter;

constexpr double kRerankTolerance = 2e-5;  // as tests/model/reranker_model_test.cpp

json reference(const std::string& name) {
  std::ifstream in(std::string(TROUPE_FIXTURES_DIR) + "/hf/" + name + "/reference.json");
  return json::parse(in);
}

// One server per fixture, for the suite.
class ScoreServer {
 public:
  explicit ScoreServer(const std::string& name) {
    PipelineConfig p{.model_path = std::string(TROUPE_FIXTURES_DIR) + "/hf/" + name,
                     .stages = {{.first_layer = 0, .last_layer = -1, .threads = 1}},
                     .n_kv_blocks = 64};
    p.scheduler.max_tokens_per_step = 160;
    p.scheduler.context_length = 128;  // within the step (NomicBERT's trained context is 2048)
    backend_ = std::make_unique<PipelineClient>(PipelineClientOptions{.pipeline = p});
    EXPECT_TRUE(backend_->wait_loaded()) << backend_->load_state().stage;
    CoreOptions options;
    options.limits.embedding_parallel = 3;  // more pairs than slots: they take turns
    core_ = std::make_unique<ServerCore>(*backend_, options);
  }
  ~ScoreServer() {
    backend_.reset();  // ends the pipeline first: its callbacks reach the core
    core_.reset();
  }

  HttpReply post(const std::string& target, const std::string& body) {
    RouteResult r = core_->handle({.method = "POST", .target = target, .body = body});
    if (!r.async) return r.reply;
    auto w = std::make_shared<RecordingWriter>();
    r.async->start(w);
    EXPECT_TRUE(w->wait(std::chrono::seconds(60))) << target;
    return w->reply;
  }
  json error_of(const std::string& target, const std::string& body) {
    const HttpReply r = post(target, body);
    EXPECT_EQ(r.status, 400) << r.body;
    return json::parse(r.body)["error"];
  }
  ServerCore& core() { return *core_; }

 private:
  std::unique_ptr<PipelineClient> backend_;
  std::unique_ptr<ServerCore> core_;
};

class RerankRoutes : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new ScoreServer("bert_reranker"); }
  static void TearDownTestSuite() { delete server_; }
  static ScoreServer* server_;
};

ScoreServer* RerankRoutes::server_ = nullptr;

// The reference's pairs with the first query: the documents of a rerank.
json documents(const json& ref) {
  json docs = json::array();
  for (const json& p : ref["pairs"]) {
    if (p[0] == ref["pairs"][0][0]) docs.push_back(p[1]);
  }
  return docs;
}

TEST_F(RerankRoutes, RerankIsBestFirstWithCrossEncoderScores) {
  const json ref = reference("bert_reranker");
  const json docs = documents(ref);
  ASSERT_EQ(docs.size(), 3u);
  const HttpReply r = server_->post(
      "/v1/rerank", json{{"model", "bert_reranker"}, {"query", ref["pairs"][0][0]}, {"documents", docs}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["model"], "bert_reranker");
  EXPECT_EQ(j["id"].get<std::string>().rfind("rerank-", 0), 0u);
  ASSERT_EQ(j["results"].size(), 3u);
  int64_t tokens = 0;
  double previous = 2.0;
  for (const json& res : j["results"]) {
    const auto i = res["index"].get<size_t>();
    EXPECT_NEAR(res["relevance_score"].get<double>(), ref["scores"][i].get<double>(), kRerankTolerance) << i;
    EXPECT_EQ(res["document"]["text"], docs[i]);
    EXPECT_LE(res["relevance_score"].get<double>(), previous);  // best first
    previous = res["relevance_score"].get<double>();
    tokens += static_cast<int64_t>(ref["token_ids"][i].size());
  }
  EXPECT_EQ(j["usage"]["prompt_tokens"], tokens);
  const std::string metrics = server_->core().metrics_text();
  EXPECT_NE(metrics.find("troupe_requests_total{endpoint=\"rerank\"} 3"), std::string::npos);

  // top_n, documents as objects, no documents back; /rerank and /v2/rerank too.
  for (const char* route : {"/rerank", "/v2/rerank"}) {
    json objects = json::array();
    for (const json& d : docs) objects.push_back({{"text", d}});
    const HttpReply top = server_->post(
        route,
        json{{"query", ref["pairs"][0][0]}, {"documents", objects}, {"top_n", 1}, {"return_documents", false}}.dump());
    ASSERT_EQ(top.status, 200) << top.body;
    const json t = json::parse(top.body);
    ASSERT_EQ(t["results"].size(), 1u);
    EXPECT_EQ(t["results"][0]["index"], j["results"][0]["index"]);
    EXPECT_FALSE(t["results"][0].contains("document"));
  }
}

TEST_F(RerankRoutes, ScoreTakesOneToManyAndPairwise) {
  const json ref = reference("bert_reranker");
  json firsts = json::array(), seconds = json::array();
  for (const json& p : ref["pairs"]) {
    firsts.push_back(p[0]);
    seconds.push_back(p[1]);
  }
  const HttpReply r = server_->post("/v1/score", json{{"text_1", firsts}, {"text_2", seconds}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), ref["pairs"].size());
  for (size_t i = 0; i < ref["pairs"].size(); ++i) {
    EXPECT_EQ(j["data"][i]["index"], i);
    EXPECT_EQ(j["data"][i]["object"], "score");
    EXPECT_NEAR(j["data"][i]["score"].get<double>(), ref["scores"][i].get<double>(), kRerankTolerance) << i;
  }
  // One text_1 for every text_2 (the first query's documents), through /score.
  const HttpReply one =
      server_->post("/score", json{{"text_1", ref["pairs"][0][0]}, {"text_2", documents(ref)}}.dump());
  ASSERT_EQ(one.status, 200) << one.body;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(json::parse(one.body)["data"][i]["score"].get<double>(), ref["scores"][i].get<double>(),
                kRerankTolerance);
  }
  // Cut as CrossEncoder's max_length cuts them.
  const HttpReply cut = server_->post(
      "/v1/score", json{{"text_1", firsts}, {"text_2", seconds}, {"truncate_prompt_tokens", ref["truncate"]}}.dump());
  ASSERT_EQ(cut.status, 200) << cut.body;
  for (size_t i = 0; i < ref["pairs"].size(); ++i) {
    EXPECT_NEAR(json::parse(cut.body)["data"][i]["score"].get<double>(), ref["truncated_scores"][i].get<double>(),
                kRerankTolerance)
        << i;
  }
}

TEST_F(RerankRoutes, BadInputsNameTheirField) {
  EXPECT_EQ(server_->error_of("/v1/rerank", R"({"documents": ["a"]})")["param"], "query");
  EXPECT_EQ(server_->error_of("/v1/rerank", R"({"query": "q"})")["param"], "documents");
  EXPECT_EQ(server_->error_of("/v1/rerank", R"({"query": "q", "documents": []})")["param"], "documents");
  EXPECT_EQ(server_->error_of("/v1/rerank", R"({"query": "q", "documents": ["a", 7]})")["param"], "documents[1]");
  EXPECT_EQ(server_->error_of("/v1/rerank", R"({"query": "q", "documents": ["a", {"txt": "b"}]})")["param"],
            "documents[1].text");
  EXPECT_EQ(server_->error_of("/v1/rerank", R"({"query": "q", "documents": ["a"], "top_n": -1})")["param"], "top_n");
  EXPECT_EQ(server_->error_of("/v1/rerank", R"({"query": "q", "documents": ["a"], "model": "gpt"})")["param"], "model");
  EXPECT_EQ(server_->error_of("/v1/score", R"({"text_1": ["a", "b"], "text_2": ["c", "d", "e"]})")["param"], "text_2");
  EXPECT_EQ(server_->error_of("/v1/score", R"({"text_1": "a", "text_2": "b", "truncate_prompt_tokens": 3})")["param"],
            "truncate_prompt_tokens");
  // A cross-encoder makes no embeddings.
  const json e = server_->error_of("/v1/embeddings", R"({"input": "a"})");
  EXPECT_EQ(e["param"], "model");
  EXPECT_NE(e["message"].get<std::string>().find("cross-encoder"), std::string::npos) << e;
  EXPECT_EQ(server_->core().handle({.method = "GET", .target = "/v1/rerank"}).reply.status, 405);
}

// An embedding model scores by the cosine of its (normalized) vectors: the
// reference's sentence-transformers embeddings give the expected dots.
TEST(ScoreRoutes, EmbeddingModelScoresByCosine) {
  ScoreServer server("bert_embedding_cls");
  const json ref = reference("bert_embedding_cls");
  const json texts = ref["texts"];
  const HttpReply r = server.post("/v1/rerank", json{{"query", texts[0]}, {"documents", texts}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  ASSERT_EQ(j["results"].size(), texts.size());
  EXPECT_EQ(j["results"][0]["index"], 0);  // the query itself, cosine 1
  for (const json& res : j["results"]) {
    const auto i = res["index"].get<size_t>();
    double dot = 0.0;
    for (size_t k = 0; k < ref["embeddings"][0].size(); ++k) {
      dot += ref["embeddings"][0][k].get<double>() * ref["embeddings"][i][k].get<double>();
    }
    EXPECT_NEAR(res["relevance_score"].get<double>(), dot, 1e-4) << i;
  }
  // Each distinct text is embedded once: the query is one of the documents.
  int64_t tokens = 0;
  for (const json& ids : ref["token_ids"]) tokens += static_cast<int64_t>(ids.size());
  EXPECT_EQ(j["usage"]["prompt_tokens"], tokens);
  // One distinct text in all, but two slots admitted: both come back.
  const HttpReply one = server.post("/v1/score", json{{"text_1", texts[0]}, {"text_2", texts[0]}}.dump());
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_NEAR(json::parse(one.body)["data"][0]["score"].get<double>(), 1.0, 1e-4);
  EXPECT_EQ(json::parse(one.body)["usage"]["prompt_tokens"], ref["token_ids"][0].size());
  // (The reply is sent just before the slots are released.)
  EXPECT_TRUE(
      troupe::test::wait_until([&] { return server.core().admission().in_flight() == 0; }, std::chrono::seconds(10)));
}

// A sequence classifier of three labels: vLLM's /v1/classify, each input's
// softmax probabilities and most probable label.
// An encoder's ([CLS]) and a causal model's (its last token: a
// LlamaForSequenceClassification) alike.
class ClassifierRoutes : public ::testing::TestWithParam<const char*> {};

TEST_P(ClassifierRoutes, ProbabilitiesAndLabelsAreTransformers) {
  const std::string name = GetParam();
  ScoreServer server(name);
  const json ref = reference(name);
  const HttpReply r = server.post("/v1/classify", json{{"model", name}, {"input", ref["texts"]}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["id"].get<std::string>().rfind("classify-", 0), 0u);
  ASSERT_EQ(j["data"].size(), ref["texts"].size());
  int64_t tokens = 0;
  for (size_t i = 0; i < ref["texts"].size(); ++i) {
    const json& d = j["data"][i];
    const size_t n_labels = ref["labels"].size();
    EXPECT_EQ(d["num_classes"], n_labels);
    size_t best = 0;
    for (size_t k = 0; k < n_labels; ++k) {
      EXPECT_NEAR(d["probs"][k].get<double>(), ref["probs"][i][k].get<double>(), kRerankTolerance) << i << "," << k;
      if (ref["probs"][i][k].get<double>() > ref["probs"][i][best].get<double>()) best = k;
    }
    EXPECT_EQ(d["label"], ref["labels"][best]) << i;
    tokens += static_cast<int64_t>(ref["token_ids"][i].size());
  }
  EXPECT_EQ(j["usage"]["prompt_tokens"], tokens);
  // Token ids, through /classify.
  const HttpReply ids = server.post("/classify", json{{"input", ref["token_ids"][1]}}.dump());
  ASSERT_EQ(ids.status, 200) << ids.body;
  EXPECT_NEAR(json::parse(ids.body)["data"][0]["probs"][0].get<double>(), ref["probs"][1][0].get<double>(),
              kRerankTolerance);
  // Three labels are no relevance score; a classifier makes no embeddings.
  EXPECT_EQ(server.error_of("/v1/rerank", R"({"query": "q", "documents": ["a"]})")["param"], "model");
  EXPECT_EQ(server.error_of("/v1/embeddings", R"({"input": "a"})")["param"], "model");
  EXPECT_EQ(server.error_of("/v1/classify", R"({"input": []})")["param"], "input");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ClassifierRoutes,
                         ::testing::Values("bert_classifier", "llama_classifier", "distilbert_classifier",
                                           "nomic_bert_classifier", "modernbert_classifier_mean"));

// A causal reranker (Qwen3-Reranker): each pair written into its prompt,
// scored by sigmoid(logit("yes") - logit("no")), as its model card scores it.
TEST(ScoreRoutes, CausalRerankerScoresAsItsModelCard) {
  ScoreServer server("qwen3_reranker");
  const json ref = reference("qwen3_reranker");
  const json docs = documents(ref);
  ASSERT_EQ(docs.size(), 3u);
  const HttpReply r = server.post("/v1/rerank", json{{"query", ref["pairs"][0][0]}, {"documents", docs}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  ASSERT_EQ(j["results"].size(), 3u);
  int64_t tokens = 0;
  for (const json& res : j["results"]) {
    // The reference's indices of the query's documents: 0, 1 and the last.
    const auto k = res["index"].get<size_t>();
    const size_t i = k < 2 ? k : ref["pairs"].size() - 1;
    EXPECT_NEAR(res["relevance_score"].get<double>(), ref["scores"][i].get<double>(), kRerankTolerance) << i;
    tokens += static_cast<int64_t>(ref["token_ids"][i].size());
  }
  EXPECT_EQ(j["usage"]["prompt_tokens"], tokens);
  // Cut as the card's code cuts the text before the closing turn.
  json firsts = json::array(), seconds = json::array();
  for (const json& p : ref["pairs"]) {
    firsts.push_back(p[0]);
    seconds.push_back(p[1]);
  }
  const HttpReply cut = server.post(
      "/v1/score", json{{"text_1", firsts}, {"text_2", seconds}, {"truncate_prompt_tokens", ref["truncate"]}}.dump());
  ASSERT_EQ(cut.status, 200) << cut.body;
  for (size_t i = 0; i < ref["pairs"].size(); ++i) {
    EXPECT_NEAR(json::parse(cut.body)["data"][i]["score"].get<double>(), ref["truncated_scores"][i].get<double>(),
                kRerankTolerance)
        << i;
  }
  // Five tokens cannot hold the prompt's closing turn.
  EXPECT_EQ(server.error_of("/v1/score", R"({"text_1": "a", "text_2": "b", "truncate_prompt_tokens": 5})")["param"],
            "truncate_prompt_tokens");
}

TEST(ClassifyRoutes, OnlyClassifiersClassify) {
  ScoreServer server("bert_embedding_cls");
  EXPECT_EQ(server.error_of("/v1/classify", R"({"input": "a"})")["param"], "model");
}

TEST(ScoreRequest, Parses) {
  const ScoreRequest r = parse_rerank_request(
      R"({"model": "m", "query": "q", "documents": ["a", {"text": "b"}], "top_n": 1, "return_documents": false,
          "truncate_prompt_tokens": 64})",
      16);
  EXPECT_TRUE(r.rerank);
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.first, (std::vector<std::string>{"q"}));
  EXPECT_EQ(r.second, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.top_n, 1);
  EXPECT_FALSE(r.return_documents);
  EXPECT_EQ(r.truncate, 64);
  EXPECT_EQ(r.first_of(1), "q");
  const ScoreRequest s = parse_score_request(R"({"text_1": ["a", "b"], "text_2": ["c", "d"]})", 16);
  EXPECT_FALSE(s.rerank);
  EXPECT_EQ(s.first_of(1), "b");
  EXPECT_EQ(s.truncate, -1);  // cut to the context unless told
  EXPECT_THROW(parse_rerank_request(R"({"query": "q", "documents": ["a", "b", "c"]})", 2), ApiError);
}

TEST(ScoreReply, Bodies) {
  ScoreRequest r;
  r.rerank = true;
  r.first = {"q"};
  r.second = {"a", "b\"c", "d"};
  r.top_n = 2;
  const json j = json::parse(rerank_body(r, {0.25, 0.75, 0.5}, "rerank-1", "m", 9));
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][0]["index"], 1);
  EXPECT_EQ(j["results"][0]["document"]["text"], "b\"c");
  EXPECT_EQ(j["results"][1]["index"], 2);
  EXPECT_EQ(j["usage"]["total_tokens"], 9);
  const json s = json::parse(score_body({0.5, -1.25}, "score-1", 7, "m", 3));
  EXPECT_EQ(s["data"][1]["score"], -1.25);
  EXPECT_EQ(s["created"], 7);
  EXPECT_NEAR(relevance(0.0f, true), 0.5, 1e-12);
  EXPECT_NEAR(relevance(2.0f, false), 2.0, 1e-12);
  // Softmax over several labels; a sigmoid each for a multi-label classifier.
  ModelInfo m;
  const std::vector<double> p = label_probs({0.0f, std::log(3.0f)}, m);
  EXPECT_NEAR(p[0], 0.25, 1e-6);
  EXPECT_NEAR(p[1], 0.75, 1e-6);
  m.multi_label = true;
  EXPECT_NEAR(label_probs({0.0f, 0.0f}, m)[1], 0.5, 1e-12);
  const json c = json::parse(classify_body({{0.25, 0.75}}, {"no", "yes"}, "classify-1", 7, "m", 3));
  EXPECT_EQ(c["data"][0]["label"], "yes");
  EXPECT_EQ(c["data"][0]["num_classes"], 2);
}

}  // namespace
}  // namespace troupe::net

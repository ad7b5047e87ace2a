// Two real in-process replicas of stories260K behind one ServerCore: 16
// concurrent greedy completions give the text a single chain gives, both
// replicas take requests, and afterwards nothing is in flight, tracked or
// holding KV.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "actors/replica_config.hpp"
#include "net/pipeline_client.hpp"
#include "net/replica_router.hpp"
#include "net/routes.hpp"
#include "tests/net/fake_engine.hpp"

namespace troupe::net {
namespace {

using nlohmann::json;
using test::RecordingWriter;

const std::string kModel = std::string(TROUPE_SHARED_DIR) + "/models/stories260K/stories260K.gguf";
constexpr int kRequests = 16;

std::string prompt(int i) {
  static const char* starts[] = {"Once upon a time", "The little dog", "Lily and Tom", "One day, a bird",
                                 "The sun was",      "A big red ball", "Mom said",     "In the park"};
  return std::string(starts[i % 8]) + (i < 8 ? "" : " was happy");
}

// Sends every prompt at once through the core's completions route and
// returns the texts in prompt order.
std::vector<std::string> complete_all(ServerCore& core) {
  std::vector<std::shared_ptr<RecordingWriter>> writers;
  std::vector<RouteResult> results;
  for (int i = 0; i < kRequests; ++i) {
    const json body = {{"model", "stories260K"}, {"prompt", prompt(i)}, {"max_tokens", 24},
                       {"temperature", 0},       {"ignore_eos", true}};
    results.push_back(core.handle({.method = "POST", .target = "/v1/completions", .body = body.dump()}));
    EXPECT_TRUE(results.back().async) << results.back().reply.body;
    if (!results.back().async) return {};
  }
  for (RouteResult& r : results) {
    writers.push_back(std::make_shared<RecordingWriter>());
    r.async->start(writers.back());
  }
  std::vector<std::string> texts;
  for (const auto& w : writers) {
    EXPECT_TRUE(w->wait(std::chrono::seconds(120)));
    EXPECT_EQ(w->reply.status, 200) << w->reply.body;
    texts.push_back(json::parse(w->reply.body)["choices"][0]["text"].get<std::string>());
  }
  return texts;
}

TEST(ReplicaPipeline, TwoReplicasGiveTheSingleChainsText) {
  std::vector<std::string> single;
  {
    PipelineClient one({.pipeline = {.model_path = kModel,
                                      .stages = {{.first_layer = 0, .last_layer = -1, .threads = 1}},
                                      .n_kv_blocks = 64}});
    ASSERT_TRUE(one.wait_loaded()) << one.load_state().stage;
    ServerCore core(one, {});
    single = complete_all(core);
  }
  ASSERT_EQ(single.size(), static_cast<size_t>(kRequests));

  // The replicas as `troupe serve` reads them: from a config file's text.
  std::vector<PipelineConfig> configs = parse_replicas(
      R"({"kv": {"blocks": 64},
          "replicas": [{"stages": [{"layers": [0, -1], "threads": 1}]},
                       {"stages": [{"layers": [0, -1], "threads": 1}]}]})");
  for (PipelineConfig& c : configs) c.model_path = kModel;
  auto router = std::make_unique<ReplicaRouter>(ReplicaRouterOptions{.replicas = std::move(configs)});
  ASSERT_TRUE(router->wait_loaded()) << router->load_state().stage;
  ASSERT_TRUE(router->ready());
  {
    ServerCore core(*router, {});
    EXPECT_EQ(router->served_model().id, "stories260K");
    EXPECT_EQ(router->served_model().engine.context_length, 1024);  // 64 pages of 16 tokens

    const std::vector<std::string> texts = complete_all(core);
    ASSERT_EQ(texts.size(), single.size());
    for (size_t i = 0; i < texts.size(); ++i) {
      EXPECT_FALSE(single[i].empty());
      EXPECT_EQ(texts[i], single[i]) << prompt(static_cast<int>(i));
    }

    const std::vector<ReplicaFacts> facts = router->replicas();
    ASSERT_EQ(facts.size(), 2u);
    uint64_t total = 0;
    for (const ReplicaFacts& f : facts) {
      EXPECT_TRUE(f.up);
      EXPECT_EQ(f.in_flight, 0);
      EXPECT_GT(f.routed_least_loaded + f.routed_affinity, 0u) << "replica " << f.index << " got no request";
      total += f.routed_least_loaded + f.routed_affinity;
    }
    EXPECT_EQ(total, static_cast<uint64_t>(kRequests));
    EXPECT_EQ(router->tracked_requests(), 0u);
    EXPECT_EQ(core.admission().in_flight(), 0);

    const PipelineStats s = router->stats();
    EXPECT_EQ(s.kv_blocks_total, 128);
    EXPECT_EQ(s.kv_blocks_used, 0);
    EXPECT_EQ(s.finished, static_cast<uint64_t>(kRequests));
    const std::string metrics = core.metrics_text();
    const size_t up = metrics.find("troupe_replica_up{replica=\"1\"} ");
    ASSERT_NE(up, std::string::npos);
    EXPECT_EQ(std::stod(metrics.substr(up + std::string("troupe_replica_up{replica=\"1\"} ").size())), 1.0);
    EXPECT_NE(metrics.find("troupe_actor_busy_seconds_total{actor=\"replica1/executor_0\"}"), std::string::npos);
    EXPECT_NE(metrics.find("troupe_stage_up{stage=\"replica0/executor_0\""), std::string::npos);
    router.reset();  // ends the pipelines first: their callbacks reach the core
  }
}

TEST(ReplicaPipeline, AModelThatCannotLoadFailsEveryReplica) {
  ReplicaRouter router(ReplicaRouterOptions{.replicas = {PipelineConfig{.model_path = "/nonexistent.gguf"},
                                                           PipelineConfig{.model_path = "/nonexistent.gguf"}}});
  EXPECT_FALSE(router.wait_loaded());
  const LoadState s = router.load_state();
  EXPECT_TRUE(s.failed);
  EXPECT_FALSE(s.ready);
  EXPECT_NE(s.stage.find("nonexistent"), std::string::npos) << s.stage;
  EXPECT_THROW(router.submit(EngineRequest::from_tokens({1, 2}), {}), Error);
  EXPECT_THROW(router.stats(), Error);
  for (const ReplicaFacts& f : router.replicas()) EXPECT_FALSE(f.up);
}

TEST(ReplicaPipeline, AReplicaThatFailsLeavesTheOthersServing) {
  std::vector<PipelineConfig> configs = parse_replicas(
      R"({"kv": {"blocks": 64},
          "replicas": [{"stages": [{"layers": [0, -1], "threads": 1}]},
                       {"stages": [{"layers": [0, 1], "threads": 1}]}]})");
  for (PipelineConfig& c : configs) c.model_path = kModel;
  auto router = std::make_unique<ReplicaRouter>(ReplicaRouterOptions{.replicas = std::move(configs)});
  // Not every replica started (what `troupe serve` checks for GPU chains) ...
  EXPECT_FALSE(router->wait_loaded());
  // ... but one serves, and takes every request.
  const LoadState s = router->load_state();
  EXPECT_TRUE(s.ready);
  EXPECT_FALSE(s.failed);
  EXPECT_NE(s.stage.find("replica 1: "), std::string::npos) << s.stage;
  {
    ServerCore core(*router, {});
    const std::vector<std::string> texts = complete_all(core);
    EXPECT_EQ(texts.size(), static_cast<size_t>(kRequests));
    const std::vector<ReplicaFacts> facts = router->replicas();
    EXPECT_EQ(facts[0].routed_least_loaded, static_cast<uint64_t>(kRequests));
    EXPECT_EQ(facts[1].routed_least_loaded + facts[1].routed_affinity, 0u);
    EXPECT_FALSE(facts[1].up);
    router.reset();
  }
}

}  // namespace
}  // namespace troupe::net

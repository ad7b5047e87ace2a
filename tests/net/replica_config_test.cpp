// The "replicas" key of topology files: entries inherit the top level's
// keys (objects key by key), are read as strictly as a topology, and reach
// `troupe serve`'s config with the shared model path; the server's
// routing slack; the shipped replica configs.
#include "actors/replica_config.hpp"

#include <gtest/gtest.h>

#include "actors/pipeline_config.hpp"
#include "core/error.hpp"
#include "net/server_config.hpp"

namespace troupe {
namespace {

std::string config_error(const std::string& text) {
  try {
    parse_replicas(text, "r.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::bad_format);
    return e.what();
  }
  return "(no error)";
}

TEST(ReplicaConfig, NoReplicasKeyIsNoReplicas) {
  EXPECT_TRUE(parse_replicas(R"({"stages": [{"layers": [0, -1]}]})").empty());
}

TEST(ReplicaConfig, EntriesInheritTheTopLevel) {
  const std::vector<PipelineConfig> r = parse_replicas(R"({
      "model": "m.gguf",
      "micro_batches": 3,
      "kv": {"blocks": 64, "block_size": 32},
      "scheduler": {"max_batch_size": 16, "chunked_prefill": false},
      "stages": [{"layers": [0, -1], "threads": 2}],
      "server": {"port": 0},
      "replicas": [
        {"stages": [{"layers": [0, -1], "threads": 1}]},
        {"kv": {"blocks": 8}, "scheduler": {"max_batch_size": 4}, "micro_batches": 1},
        {}
      ]
    })");
  ASSERT_EQ(r.size(), 3u);
  for (const PipelineConfig& c : r) EXPECT_EQ(c.model_path, "m.gguf");
  // Replica 0 replaces the stages (arrays are replaced, not merged).
  ASSERT_EQ(r[0].stages.size(), 1u);
  EXPECT_EQ(r[0].stages[0].threads, 1);
  EXPECT_EQ(r[0].micro_batches, 3);
  EXPECT_EQ(r[0].n_kv_blocks, 64);
  // Replica 1: objects merge key by key.
  EXPECT_EQ(r[1].stages[0].threads, 2);
  EXPECT_EQ(r[1].n_kv_blocks, 8);
  EXPECT_EQ(r[1].kv_block_size, 32);
  EXPECT_EQ(r[1].scheduler.max_batch_size, 4);
  EXPECT_FALSE(r[1].scheduler.chunked_prefill);
  EXPECT_EQ(r[1].micro_batches, 1);
  // Replica 2: the top level as it is.
  EXPECT_EQ(r[2].stages[0].threads, 2);
  EXPECT_EQ(r[2].scheduler.max_batch_size, 16);
}

TEST(ReplicaConfig, TheBriefsExample) {
  const std::vector<PipelineConfig> r = parse_replicas(
      R"({"model": "m.gguf", "replicas": [{"stages": [{"layers":[0,-1],"threads":1}]},
                                          {"stages": [{"layers":[0,-1],"threads":1}]}]})");
  ASSERT_EQ(r.size(), 2u);
  for (const PipelineConfig& c : r) {
    ASSERT_EQ(c.stages.size(), 1u);
    EXPECT_EQ(c.stages[0].first_layer, 0);
    EXPECT_EQ(c.stages[0].last_layer, -1);
    EXPECT_EQ(c.stages[0].threads, 1);
    EXPECT_EQ(c.model_path, "m.gguf");
  }
}

TEST(ReplicaConfig, ErrorsNameTheReplicaAndTheKey) {
  auto has = [](const std::string& message, const char* part) {
    EXPECT_NE(message.find(part), std::string::npos) << message;
  };
  has(config_error(R"({"replicas": {}})"), "r.json: replicas: must be an array of topology objects (got object)");
  has(config_error(R"({"replicas": []})"), "replicas: must hold at least one replica");
  has(config_error(R"({"replicas": [3]})"), "replicas[0]: must be an object");
  // Unknown keys and wrong types, as the topology reader says them.
  has(config_error(R"({"replicas": [{}, {"stagez": []}]})"), "r.json: replicas[1]: unknown key 'stagez'");
  has(config_error(R"({"replicas": [{"kv": {"blocks": "many"}}]})"),
      "replicas[0]: kv.blocks: must be an integer (got string)");
  has(config_error(R"({"replicas": [{"stages": [{"layers": [0, -1], "thread": 1}]}]})"),
      "replicas[0]: stages[0]: unknown key 'thread'");
  has(config_error(R"({"replicas": [{"scheduler": {"max_batch_size": null}}]})"),
      "replicas[0]: scheduler.max_batch_size");
  // Keys a replica may not set.
  has(config_error(R"({"replicas": [{"model": "other.gguf"}]})"), "replicas[0].model: replicas share the top-level");
  has(config_error(R"({"replicas": [{"server": {}}]})"), "replicas[0].server");
  has(config_error(R"({"replicas": [{"quantize": "q8_0"}]})"),
      "replicas[0].quantize: replicas share the top-level model");
  has(config_error(R"({"replicas": [{"replicas": []}]})"), "replicas[0].replicas: replicas do not nest");
  has(config_error("[1]"), "must be a JSON object");
}

TEST(ReplicaConfig, TheSingleTopologyReaderRefusesReplicas) {
  // generate and bench run one chain: a replicated file is an error there,
  // not a silent run of its top level.
  try {
    parse_pipeline_config(R"({"replicas": [{}]})", "r.json");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("replicas: several replicas run only under `troupe serve`"), std::string::npos)
        << e.what();
  }
}

TEST(ReplicaConfig, ServeConfigCarriesReplicasWithTheSharedModelPath) {
  const net::ServeConfig c = net::parse_serve_config(
      R"({"model": "m.gguf", "server": {"port": 0, "replica_affinity_slack": 7},
          "replicas": [{"kv": {"blocks": 8}}, {"kv": {"blocks": 16}}]})",
      "c.json", "/etc/troupe");
  EXPECT_EQ(c.pipeline.model_path, "/etc/troupe/m.gguf");
  ASSERT_EQ(c.replicas.size(), 2u);
  EXPECT_EQ(c.replicas[0].model_path, "/etc/troupe/m.gguf");
  EXPECT_EQ(c.replicas[1].model_path, "/etc/troupe/m.gguf");
  EXPECT_EQ(c.replicas[1].n_kv_blocks, 16);
  // The load-time conversion is the shared model's: every replica has it.
  const net::ServeConfig q = net::parse_serve_config(R"({"quantize": "q6_k", "replicas": [{}, {}]})", "c.json");
  ASSERT_EQ(q.replicas.size(), 2u);
  for (const PipelineConfig& r : q.replicas) {
    ASSERT_TRUE(r.load.quantize.has_value());
    EXPECT_EQ(r.load.quantize->name, "q6_k");
  }
  EXPECT_EQ(c.server.replica_routing.affinity_slack, 7);
  EXPECT_TRUE(net::parse_serve_config(R"({"kv": {"blocks": 8}})", "c.json").replicas.empty());
  // The top level's own mistakes are named as its own.
  try {
    net::parse_serve_config(R"({"kv": {"blocs": 8}, "replicas": [{}]})", "c.json");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "c.json: kv: unknown key 'blocs'");
  }
  EXPECT_THROW(net::parse_serve_config(R"({"server": {"replica_affinity_slack": -1}})", "c.json"), Error);
}

TEST(ReplicaConfig, ShippedReplicaConfigsParse) {
  const std::string dir = std::string(TROUPE_FIXTURES_DIR) + "/../../configs/";
  const net::ServeConfig one = net::load_serve_config(dir + "replicas_one.json");
  const net::ServeConfig two = net::load_serve_config(dir + "replicas_two.json");
  // The same two kernel threads in all: one chain of 2, or 2 chains of 1.
  ASSERT_EQ(one.replicas.size(), 1u);
  ASSERT_EQ(two.replicas.size(), 2u);
  auto threads = [](const net::ServeConfig& c) {
    int n = 0;
    for (const PipelineConfig& r : c.replicas) {
      for (const StageSpec& s : r.stages) n += s.threads;
    }
    return n;
  };
  EXPECT_EQ(threads(one), 2);
  EXPECT_EQ(threads(two), 2);
}

}  // namespace
}  // namespace troupe

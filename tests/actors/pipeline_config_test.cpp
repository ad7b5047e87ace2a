// Pipeline topologies from JSON: every field read, strictness about unknown
// keys and types, relative model paths, and the files shipped in configs/.
#include "actors/pipeline_config.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "actors/pipeline.hpp"
#include "core/error.hpp"

namespace troupe {
namespace {

const std::string kConfigs = std::string(TROUPE_FIXTURES_DIR) + "/../../configs";

TEST(PipelineConfigJson, ReadsEveryField) {
  const PipelineConfig c = parse_pipeline_config(R"({
    // comments are allowed
    "model": "/models/m.gguf",
    "stages": [{"layers": [0, 3], "threads": 2}, {"layers": [3, -1]}],
    "micro_batches": 3, "tokenizers": 2, "actor_threads": 4, "tool_call_parser": "hermes", "reasoning_format": "none",
    "kv": {"blocks": 100, "block_size": 32, "prefix_caching": false},
    "scheduler": {"max_batch_size": 8, "max_tokens_per_step": 256, "chunked_prefill": false,
                  "prefill_chunk": 64, "min_batch_size": 2, "max_wait_ms": 2.5, "max_waiting": 10,
                  "context_length": 1024, "kv_watermark": 0.05, "level_bounds": [16, 128, 512],
                  "level_aging_ms": 500}
  })");
  EXPECT_EQ(c.model_path, "/models/m.gguf");
  ASSERT_EQ(c.stages.size(), 2u);
  EXPECT_EQ(c.stages[0].first_layer, 0);
  EXPECT_EQ(c.stages[0].last_layer, 3);
  EXPECT_EQ(c.stages[0].threads, 2);
  EXPECT_EQ(c.stages[1].first_layer, 3);
  EXPECT_EQ(c.stages[1].last_layer, -1);
  EXPECT_EQ(c.stages[1].threads, 1);
  EXPECT_EQ(c.micro_batches, 3);
  EXPECT_EQ(c.tokenizer_pool, 2);
  EXPECT_EQ(c.actor_threads, 4);
  EXPECT_EQ(c.tool_call_parser, "hermes");
  EXPECT_EQ(c.reasoning_format, "none");
  EXPECT_EQ(c.n_kv_blocks, 100);
  EXPECT_EQ(c.kv_block_size, 32);
  EXPECT_FALSE(c.prefix_caching);
  EXPECT_EQ(c.scheduler.max_batch_size, 8);
  EXPECT_EQ(c.scheduler.max_tokens_per_step, 256);
  EXPECT_FALSE(c.scheduler.chunked_prefill);
  EXPECT_EQ(c.scheduler.prefill_chunk, 64);
  EXPECT_EQ(c.scheduler.min_batch_size, 2);
  EXPECT_EQ(c.scheduler.max_wait, std::chrono::microseconds(2500));
  EXPECT_EQ(c.scheduler.max_waiting, 10);
  EXPECT_EQ(c.scheduler.context_length, 1024);
  EXPECT_DOUBLE_EQ(c.scheduler.kv_watermark, 0.05);
  EXPECT_EQ(c.scheduler.level_bounds, (std::vector<int32_t>{16, 128, 512}));
  EXPECT_EQ(c.scheduler.level_aging, std::chrono::milliseconds(500));
}

TEST(PipelineConfigJson, EmptyObjectGivesDefaults) {
  const PipelineConfig c = parse_pipeline_config("{}");
  const PipelineConfig d;
  EXPECT_TRUE(c.stages.empty());
  EXPECT_EQ(c.n_kv_blocks, d.n_kv_blocks);
  EXPECT_EQ(c.scheduler.max_batch_size, d.scheduler.max_batch_size);
  EXPECT_EQ(c.scheduler.level_bounds, d.scheduler.level_bounds);
}

void expect_error(const std::string& json, const std::string& mentions) {
  try {
    parse_pipeline_config(json, "test.json");
    ADD_FAILURE() << "no error for " << json;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::bad_format);
    EXPECT_NE(std::string(e.what()).find(mentions), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("test.json"), std::string::npos) << e.what();
  }
}

TEST(PipelineConfigJson, ErrorsNameTheKey) {
  expect_error("{\"stage\": []}", "unknown key 'stage'");
  EXPECT_NO_THROW(parse_pipeline_config("{\"server\": {\"port\": 1}}"));  // the network edge's section
  expect_error("{\"kv\": {\"blocks\": \"many\"}}", "kv.blocks");
  expect_error("{\"scheduler\": {\"max_batch\": 3}}", "unknown key 'max_batch'");
  expect_error("{\"stages\": [{\"layers\": [0]}]}", "stages[0].layers");
  expect_error("{\"stages\": [{\"threads\": 1}]}", "stages[0]");
  expect_error("{\"scheduler\": {\"level_bounds\": [1, \"x\"]}}", "scheduler.level_bounds");
  expect_error("{\"micro_batches\": 1.5}", "micro_batches");
  expect_error("{\"tool_call_parser\": \"pythonic\"}", "tool_call_parser: must be one of");
  expect_error("{\"reasoning_format\": \"hidden\"}", "reasoning_format: must be one of");
  expect_error("{\"tokenizers\": 99999999999}", "out of range");
  expect_error("[1, 2]", "must be an object");
  expect_error("{\"model\": ", "not valid JSON");
}

// "quantize": the load-time conversion every process of the topology makes,
// by the names `--quantize` takes.
TEST(PipelineConfigJson, QuantizeNamesAScheme) {
  EXPECT_FALSE(parse_pipeline_config("{}").load.quantize.has_value());
  const PipelineConfig c = parse_pipeline_config(R"({"quantize": "Q4_K_M"})");
  ASSERT_TRUE(c.load.quantize.has_value());
  EXPECT_EQ(c.load.quantize->name, "q4_k_m");
  EXPECT_EQ(c.load.quantize->base, DType::q4_K);
  EXPECT_TRUE(c.load.quantize->mixed);
  EXPECT_EQ(parse_pipeline_config(R"({"quantize": "q8_0"})").load.quantize->base, DType::q8_0);
  expect_error(R"({"quantize": "q4_k_s"})", "quantize: unknown quantization 'q4_k_s'; supported: f16,");
  expect_error(R"({"quantize": 4})", "quantize");
}

// "lora": adapters by path, or with a scale, in order.
TEST(PipelineConfigJson, LoraListsAdapters) {
  EXPECT_TRUE(parse_pipeline_config("{}").load.lora.empty());
  const PipelineConfig c = parse_pipeline_config(R"({"lora": ["a.gguf", {"path": "b", "scale": 0.25}]})");
  ASSERT_EQ(c.load.lora.size(), 2u);
  EXPECT_EQ(c.load.lora[0].path, "a.gguf");
  EXPECT_EQ(c.load.lora[0].scale, 1.0f);
  EXPECT_EQ(c.load.lora[1].path, "b");
  EXPECT_EQ(c.load.lora[1].scale, 0.25f);
  expect_error(R"({"lora": "a.gguf"})", "lora: must be an array");
  expect_error(R"({"lora": [{"scale": 2}]})", "lora[0]: needs a path");
  expect_error(R"({"lora": [{"path": "a", "alpha": 2}]})", "lora[0]: unknown key 'alpha'");
  expect_error(R"({"lora": [3]})", "lora[0]: must be a path");
  expect_error(R"({"lora": [{"path": "a", "scale": "x"}]})", "lora[0].scale");
}

// A causal LM run as a reranker: the LM head's rows and the pair's prompt.
TEST(PipelineConfigJson, ClassifierFromTokenAndRerankTemplate) {
  const PipelineConfig c = parse_pipeline_config(
      R"({"classifier_from_token": ["no", "yes"], "rerank_template": "Q: {query} D: {document}"})");
  EXPECT_EQ(c.load.classifier_from_token, (std::vector<std::string>{"no", "yes"}));
  EXPECT_EQ(c.load.rerank_template, "Q: {query} D: {document}");
  EXPECT_TRUE(parse_pipeline_config("{}").load.classifier_from_token.empty());
  expect_error(R"({"classifier_from_token": []})", "classifier_from_token: must be one or two tokens");
  expect_error(R"({"classifier_from_token": ["a", "b", "c"]})", "classifier_from_token: must be one or two tokens");
  expect_error(R"({"classifier_from_token": [1]})", "classifier_from_token: must hold token texts");
  expect_error(R"({"classifier_from_token": "yes"})", "classifier_from_token: must be one or two tokens");
  expect_error(R"({"rerank_template": "Q: {query}"})", "rerank_template: must hold {document}");
}

TEST(PipelineConfigJson, KvTypeAndByteBudget) {
  const PipelineConfig c = parse_pipeline_config(R"({"kv": {"type": "q8_0", "memory": "2GiB"}})");
  EXPECT_EQ(c.kv_type, KvType::q8_0);
  EXPECT_EQ(c.kv_memory_bytes, int64_t{2} << 30);
  EXPECT_EQ(parse_pipeline_config(R"({"kv": {"memory": 1000000}})").kv_memory_bytes, 1000000);
  EXPECT_EQ(parse_pipeline_config("{}").kv_type, KvType::f32);
  expect_error(R"({"kv": {"type": "q4_0"}})", "kv.type");
  expect_error(R"({"kv": {"memory": "lots"}})", "kv.memory");
  expect_error(R"({"kv": {"memory": -5}})", "kv.memory");
  expect_error(R"({"kv": {"memory": "1GiB", "blocks": 10}})", "give one of them");
}

TEST(PipelineConfigJson, RelativePathsAreRelativeToTheFile) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "troupe_config_test";
  std::filesystem::create_directories(dir);
  const std::filesystem::path file = dir / "c.json";
  std::ofstream(file) << R"({"model": "../models/x.gguf", "mmproj": "../models/mmproj-x.gguf",
                             "lora": ["../loras/a.gguf", {"path": "/abs/b.gguf", "scale": 2}]})";
  const PipelineConfig c = load_pipeline_config(file.string());
  EXPECT_EQ(c.model_path, (dir.parent_path() / "models" / "x.gguf").lexically_normal().string());
  EXPECT_EQ(c.mmproj, (dir.parent_path() / "models" / "mmproj-x.gguf").lexically_normal().string());
  ASSERT_EQ(c.load.lora.size(), 2u);
  EXPECT_EQ(c.load.lora[0].path, (dir.parent_path() / "loras" / "a.gguf").lexically_normal().string());
  EXPECT_EQ(c.load.lora[1].path, "/abs/b.gguf");
  std::filesystem::remove_all(dir);
  EXPECT_THROW(load_pipeline_config((dir / "missing.json").string()), Error);
}

TEST(PipelineConfigJson, ShippedConfigsParse) {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kConfigs)) {
    if (entry.path().extension() != ".json") continue;
    // Replica sets are read by the server (parse_replicas; tests/net).
    if (entry.path().filename().string().rfind("replicas_", 0) == 0) continue;
    const PipelineConfig c = load_pipeline_config(entry.path().string());
    EXPECT_FALSE(c.stages.empty()) << entry.path();
    ++n;
  }
  EXPECT_GE(n, 3);
}

}  // namespace
}  // namespace troupe

namespace troupe {
namespace {

TEST(PipelineConfigJson, TraceAndAnomalySections) {
  const PipelineConfig c = parse_pipeline_config(R"({
    "trace": {"enabled": true, "capacity": 1024},
    "anomaly": {"alpha": 0.1, "threshold": 5, "min_ratio": 3, "warmup": 8, "min_excess_ms": 2.5}})");
  EXPECT_TRUE(c.trace.enabled);
  EXPECT_EQ(c.trace.capacity, 1024u);
  EXPECT_DOUBLE_EQ(c.anomaly.alpha, 0.1);
  EXPECT_DOUBLE_EQ(c.anomaly.threshold, 5);
  EXPECT_DOUBLE_EQ(c.anomaly.min_ratio, 3);
  EXPECT_EQ(c.anomaly.warmup, 8);
  EXPECT_NEAR(c.anomaly.min_excess_s, 0.0025, 1e-12);
  EXPECT_THROW(parse_pipeline_config(R"({"trace": {"on": true}})"), Error);
  EXPECT_THROW(parse_pipeline_config(R"({"anomaly": {"alpha": 0}})"), Error);
  EXPECT_THROW(parse_pipeline_config(R"({"trace": {"enabled": 1}})"), Error);
}

}  // namespace
}  // namespace troupe

// Found by tests/fuzz/config_readers_fuzz.cpp (input kept in
// tests/fuzz/regressions/config_readers/): a number too large for a double
// threw nlohmann's out_of_range past the reader, which caught only
// parse_error, and ended `troupe serve --config` with std::terminate.
TEST(PipelineConfigJson, NumberPastADoubleIsAnError) {
  std::ifstream in(std::string(TROUPE_FIXTURES_DIR) + "/../fuzz/regressions/config_readers/number_past_double.json");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(text.empty());
  for (const std::string& json : {text, std::string(R"({"stages": [1e99999]})")}) {
    try {
      troupe::parse_pipeline_config(json, "fuzz.json");
      ADD_FAILURE() << "accepted " << json;
    } catch (const troupe::Error& e) {
      EXPECT_EQ(e.code(), troupe::Errc::bad_format);
      EXPECT_NE(std::string(e.what()).find("fuzz.json: not valid JSON"), std::string::npos) << e.what();
    }
  }
}

// Found by tests/fuzz/config_readers_fuzz.cpp (UBSan): a level_aging_ms of
// 6.7e41 was cast to int64 microseconds, which is undefined behaviour.
TEST(PipelineConfigJson, WaitsPastInt64AreErrors) {
  std::ifstream in(std::string(TROUPE_FIXTURES_DIR) + "/../fuzz/regressions/config_readers/level_aging_past_int64.json");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(text.empty());
  for (const std::string& json : {text, std::string(R"({"scheduler": {"max_wait_ms": -1}})"),
                                  std::string(R"({"scheduler": {"level_aging_ms": 1e300}})")}) {
    try {
      troupe::parse_pipeline_config(json, "fuzz.json");
      ADD_FAILURE() << "accepted " << json;
    } catch (const troupe::Error& e) {
      EXPECT_EQ(e.code(), troupe::Errc::bad_format);
      EXPECT_NE(std::string(e.what()).find("must be a number of ms in [0, 1e9]"), std::string::npos) << e.what();
    }
  }
}

// A LongRoPE model loaded by a pipeline runs the factors of the context the
// scheduler serves (capped at the KV pool): the long ones past the model's
// original context (6 in the fixture), the short ones within it.
TEST(PipelineLoad, LongRopeFactorsFollowTheServedContext) {
  troupe::PipelineConfig c;
  c.model_path = std::string(TROUPE_FIXTURES_DIR) + "/gguf/phi3_longrope.gguf";
  c.scheduler.context_length = 48;
  c.n_kv_blocks = 8;
  c.kv_block_size = 4;
  EXPECT_EQ(troupe::pipeline_load_options(c).context_length, 32);  // the pool holds 32 tokens
  c.load.context_length = 5;                                       // said outright: kept
  EXPECT_EQ(troupe::pipeline_load_options(c).context_length, 5);
  c.load.context_length = 0;
  for (const int32_t ctx : {6, 32}) {
    c.scheduler.context_length = ctx;
    const std::unique_ptr<troupe::Pipeline> p = troupe::Pipeline::start(c);
    const troupe::ModelConfig& m = p->model().config();
    EXPECT_EQ(m.rope_freq_factors, ctx > 6 ? m.rope_long_factors : m.rope_short_factors) << "context " << ctx;
  }
}

// Cross-encoder pipelines: pair requests (EngineRequest::from_pair) through
// the tokenizer's pair template and truncation, the scheduler's whole
// prompts, the first stage's token types and the classifier head give
// sentence-transformers' CrossEncoder logits
// (tests/fixtures/hf/{bert,roberta,xlm_roberta}_reranker,
// tools/fixtures/make_reranker_models.py); a remote first or last stage
// gets the token types over the wire; the front door's refusals. Causal
// rerankers and classifiers (Qwen3-Reranker, a Llama classifier) likewise.
#include <gtest/gtest.h>

#include <fstream>
#include <future>
#include <nlohmann/json.hpp>

#include "actors/pipeline.hpp"
#include "tests/actors/pipeline_test_util.hpp"
#include "tests/actors/stage_process.hpp"

namespace troupe {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

constexpr float kRerankTolerance = 2e-5f;  // as tests/model/reranker_model_test.cpp

std::string reranker_fixture(const std::string& name) { return std::string(TROUPE_FIXTURES_DIR) + "/hf/" + name; }

Json reranker_reference(const std::string& name) {
  std::ifstream in(reranker_fixture(name) + "/reference.json");
  return Json::parse(in);
}

// Steps hold the 128-token context and four pairs.
PipelineConfig reranker_config(const std::string& name) {
  PipelineConfig c{.model_path = reranker_fixture(name)};
  c.stages = {{.first_layer = 0, .last_layer = -1, .threads = 1}};
  c.scheduler.max_batch_size = 4;
  c.scheduler.max_tokens_per_step = 160;
  c.n_kv_blocks = 64;
  return c;
}

EngineRequest score_pair(const Json& pair, int32_t truncate = 0) {
  EngineRequest r = EngineRequest::from_pair(pair[0].get<std::string>(), pair[1].get<std::string>());
  r.params.embed = {.on = true, .truncate = truncate};
  return r;
}

// Every pair at once, then again: each output is the pair's one logit.
void expect_reference_logits(Pipeline& p, const Json& ref, int32_t truncate, const std::string& ids_key,
                             const std::string& logits_key) {
  for (int round = 0; round < 2; ++round) {
    std::vector<std::future<Completion>> runs;
    for (const Json& pair : ref["pairs"]) runs.push_back(p.generate(score_pair(pair, truncate)));
    for (size_t i = 0; i < runs.size(); ++i) {
      const Completion c = test::wait_for(runs[i], 60s);
      ASSERT_EQ(c.final.reason, EndReason::stop) << c.final.error_message;
      EXPECT_EQ(c.final.prompt_tokens, static_cast<int32_t>(ref[ids_key][i].size())) << i;
      ASSERT_EQ(c.final.embedding.size(), 1u);
      EXPECT_NEAR(c.final.embedding[0], ref[logits_key][i].get<float>(), kRerankTolerance)
          << logits_key << " round " << round << " pair " << i;
    }
  }
}

TEST(PipelineReranker, PairsMatchCrossEncoder) {
  for (const char* name : {"bert_reranker", "roberta_reranker", "xlm_roberta_reranker", "modernbert_reranker"}) {
    SCOPED_TRACE(name);
    const Json ref = reranker_reference(name);
    PipelineConfig c = reranker_config(name);
    c.scheduler.max_tokens_per_step = 256;  // ModernBERT's 256-token context in one step
    auto p = Pipeline::start(c);
    const ModelInfo& info = p->model_info();
    EXPECT_EQ(info.n_labels, 1);
    EXPECT_TRUE(info.score_sigmoid);
    EXPECT_EQ(info.pooling, Pooling::cls);
    EXPECT_FALSE(info.normalize);
    EXPECT_EQ(info.two_segments, std::string(name) == "bert_reranker");
    expect_reference_logits(*p, ref, 0, "token_ids", "logits");
    expect_reference_logits(*p, ref, ref["truncate"].get<int32_t>(), "truncated_token_ids", "truncated_logits");
    EXPECT_EQ(p->kv_snapshot().invariant_error, "");
  }
}

// The token types reach a remote first stage (StageSeq::type1_from), and a
// remote last stage runs the classifier head in its worker.
TEST(PipelineReranker, RemoteStages) {
  const Json ref = reranker_reference("bert_reranker");
  for (const bool remote_first : {true, false}) {
    SCOPED_TRACE(remote_first ? "remote first stage" : "remote last stage");
    test::StageProcess w;
    ASSERT_TRUE(w.start({"-m", reranker_fixture("bert_reranker"), "--layers", remote_first ? "0:1" : "1:", "-t", "1",
                         "--kv-blocks", "64"}));
    PipelineConfig c = reranker_config("bert_reranker");
    if (remote_first) {
      c.stages = {{.first_layer = 0, .last_layer = 1, .remote = w.address()},
                  {.first_layer = 1, .last_layer = -1, .threads = 1}};
    } else {
      c.stages = {{.first_layer = 0, .last_layer = 1, .threads = 1},
                  {.first_layer = 1, .last_layer = -1, .remote = w.address()}};
    }
    c.remote.step_timeout_ms = 10000;
    auto p = Pipeline::start(c);
    expect_reference_logits(*p, ref, 0, "token_ids", "logits");
  }
}

TEST(PipelineReranker, FrontDoorRefusals) {
  const Json ref = reranker_reference("bert_reranker");
  auto p = Pipeline::start(reranker_config("bert_reranker"));
  auto error_of = [&](EngineRequest r) {
    auto run = p->generate(std::move(r));
    const Completion c = test::wait_for(run, 30s);
    EXPECT_EQ(c.final.reason, EndReason::error);
    return std::pair{c.final.error_param, c.final.error_message};
  };
  // Too long for the 128-token context without truncation.
  std::string long_text;
  for (int i = 0; i < 40; ++i) long_text += "paris is the capital of france ";
  EngineRequest too_long = EngineRequest::from_pair("a", long_text);
  too_long.params.embed = {.on = true};
  too_long.prompt_field = "documents[0]";
  EXPECT_EQ(error_of(std::move(too_long)).first, "documents[0]");
  // ... and cut to the context with -1.
  EngineRequest cut = EngineRequest::from_pair("a", long_text);
  cut.params.embed = {.on = true, .truncate = -1};
  auto cut_run = p->generate(std::move(cut));
  const Completion c = test::wait_for(cut_run, 30s);
  EXPECT_EQ(c.final.reason, EndReason::stop) << c.final.error_message;
  EXPECT_EQ(c.final.prompt_tokens, 128);
  // Three tokens cannot hold [CLS] a [SEP] b [SEP].
  EngineRequest tiny = score_pair(ref["pairs"][0], 3);
  EXPECT_EQ(error_of(std::move(tiny)).first, "truncate_prompt_tokens");
  // A cross-encoder's output is not a vector to cut.
  EngineRequest dims = score_pair(ref["pairs"][0]);
  dims.params.embed.dimensions = 1;
  EXPECT_EQ(error_of(std::move(dims)).first, "dimensions");
}

TEST(PipelineReranker, PairsNeedACrossEncoder) {
  PipelineConfig c = reranker_config("bert_embedding_cls");
  auto p = Pipeline::start(c);
  EngineRequest r = EngineRequest::from_pair("a", "b");
  r.params.embed = {.on = true};
  auto run = p->generate(std::move(r));
  const Completion done = test::wait_for(run, 30s);
  EXPECT_EQ(done.final.reason, EndReason::error);
  EXPECT_NE(done.final.error_message.find("not a cross-encoder"), std::string::npos) << done.final.error_message;
}

// Causal rerankers (tools/fixtures/make_causal_reranker_models.py): each
// pair written into the model's prompt (cut to `truncate` as the model
// card's code cuts it), prompts chunked by the scheduler, the head over the
// last token; the released checkpoint, its sequence-classifier conversion
// and llama.cpp's GGUF of it.
TEST(PipelineReranker, CausalRerankersMatchTransformers) {
  const Json ref = reranker_reference("qwen3_reranker");
  for (const std::string& path : {reranker_fixture("qwen3_reranker"), reranker_fixture("qwen3_reranker_seq_cls"),
                                  std::string(TROUPE_FIXTURES_DIR) + "/gguf/qwen3_reranker.gguf"}) {
    SCOPED_TRACE(path);
    PipelineConfig c = reranker_config("qwen3_reranker");
    c.model_path = path;
    c.scheduler.max_tokens_per_step = 48;  // the longer prompts take several steps
    auto p = Pipeline::start(c);
    const ModelInfo& info = p->model_info();
    EXPECT_EQ(info.n_labels, 1);
    EXPECT_EQ(info.pooling, Pooling::last);
    EXPECT_FALSE(info.encoder);
    EXPECT_FALSE(info.rerank_template.empty());
    expect_reference_logits(*p, ref, 0, "token_ids", "logits");
    expect_reference_logits(*p, ref, ref["truncate"].get<int32_t>(), "truncated_token_ids", "truncated_logits");
    EXPECT_EQ(p->kv_snapshot().invariant_error, "");
  }
}

// A remote last stage loads the reranker itself and runs its head.
TEST(PipelineReranker, CausalRerankerRemoteLastStage) {
  const Json ref = reranker_reference("qwen3_reranker");
  test::StageProcess w;
  ASSERT_TRUE(w.start({"-m", reranker_fixture("qwen3_reranker"), "--layers", "1:", "-t", "1", "--kv-blocks", "64"}));
  PipelineConfig c = reranker_config("qwen3_reranker");
  c.stages = {{.first_layer = 0, .last_layer = 1, .threads = 1},
              {.first_layer = 1, .last_layer = -1, .remote = w.address()}};
  c.remote.step_timeout_ms = 10000;
  auto p = Pipeline::start(c);
  expect_reference_logits(*p, ref, 0, "token_ids", "logits");
}

// A causal classifier scores single texts at their last token, and
// generates nothing.
TEST(PipelineReranker, CausalClassifierPipeline) {
  const Json ref = reranker_reference("llama_classifier");
  auto p = Pipeline::start(reranker_config("llama_classifier"));
  EXPECT_EQ(p->model_info().n_labels, 3);
  for (size_t i = 0; i < ref["texts"].size(); ++i) {
    EngineRequest r = EngineRequest::from_text({.text = ref["texts"][i].get<std::string>()});
    r.params.embed = {.on = true};
    auto run = p->generate(std::move(r));
    const Completion done = test::wait_for(run, 30s);
    ASSERT_EQ(done.final.reason, EndReason::stop) << done.final.error_message;
    const auto want = ref["logits"][i].get<std::vector<float>>();
    ASSERT_EQ(done.final.embedding.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) EXPECT_NEAR(done.final.embedding[k], want[k], kRerankTolerance) << i;
  }

  PipelineConfig cls = reranker_config("llama_classifier");
  cls.pooling = "cls";  // its head reads the last token
  EXPECT_THROW(Pipeline::start(cls), Error);
  PipelineConfig generate = reranker_config("llama_classifier");
  generate.embedding = false;
  EXPECT_THROW(Pipeline::start(generate), Error);
}

TEST(PipelineReranker, PoolingOtherThanClsIsRefused) {
  PipelineConfig c = reranker_config("bert_reranker");
  c.pooling = "mean";
  EXPECT_THROW(Pipeline::start(c), Error);
}

}  // namespace
}  // namespace troupe

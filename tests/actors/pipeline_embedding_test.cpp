// Embedding pipelines: requests through the tokenizer, scheduler (chunked
// prefill, prefix reuse; an encoder's whole prompts), the last stage's
// hidden rows and the sampler's pooler give sentence-transformers' vectors
// (tests/fixtures/hf/{qwen3_embedding,llama_embedding_mean,
// bert_embedding_cls,bert_embedding_mean}); the front door refuses requests
// of the other kind; a remote last stage pools in its worker.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
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

constexpr float kTolerance = 2e-5f;  // as tests/model/embedding_model_test.cpp

std::string fixture(const std::string& name) { return std::string(TROUPE_FIXTURES_DIR) + "/hf/" + name; }

Json reference(const std::string& name) {
  std::ifstream in(fixture(name) + "/reference.json");
  return Json::parse(in);
}

// Small steps: the longest text (138 tokens) takes several prefill chunks,
// and runs beside the others.
PipelineConfig embedding_config(const std::string& name) {
  PipelineConfig c{.model_path = fixture(name)};
  c.stages = {{.first_layer = 0, .last_layer = -1, .threads = 1}};
  c.scheduler.max_batch_size = 4;
  c.scheduler.max_tokens_per_step = 48;
  c.scheduler.prefill_chunk = 32;
  c.n_kv_blocks = 64;
  return c;
}

// Steps that would cut a causal prompt into chunks of 8, but hold BERT's
// 128-token context: an encoder computes each prompt in one step.
PipelineConfig encoder_config(const std::string& name) {
  PipelineConfig c = embedding_config(name);
  c.scheduler.max_tokens_per_step = 160;
  c.scheduler.prefill_chunk = 8;
  // NomicBERT's trained context (2048) would not fit the step: served as
  // the BERT fixtures' 128.
  if (name.starts_with("nomic")) c.scheduler.context_length = 128;
  return c;
}

EngineRequest embed_text(const std::string& text, int32_t dims = 0) {
  EngineRequest r = EngineRequest::from_text({.text = text});
  r.params.embed = {.on = true, .dimensions = dims};
  return r;
}

void expect_vector(const std::vector<float>& got, const Json& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i].get<float>(), kTolerance) << what << "[" << i << "]";
}

// Every text at once (they share steps), then again (the prefix cache
// holds them: last pooling reuses it, mean pooling recomputes).
void expect_reference_vectors(Pipeline& p, const Json& ref) {
  const auto texts = ref["texts"].get<std::vector<std::string>>();
  for (int round = 0; round < 2; ++round) {
    std::vector<std::future<Completion>> runs;
    for (const std::string& t : texts) runs.push_back(p.generate(embed_text(t)));
    for (size_t i = 0; i < runs.size(); ++i) {
      const Completion c = test::wait_for(runs[i], 60s);
      ASSERT_EQ(c.final.reason, EndReason::stop) << c.final.error_message;
      EXPECT_TRUE(c.tokens.empty());
      EXPECT_EQ(c.final.completion_tokens, 0);
      EXPECT_EQ(c.final.prompt_tokens, static_cast<int32_t>(ref["token_ids"][i].size()));
      expect_vector(c.final.embedding, ref["embeddings"][i],
                    "round " + std::to_string(round) + " text " + std::to_string(i));
    }
  }
}

TEST(PipelineEmbedding, LastPoolingMatchesSentenceTransformers) {
  const Json ref = reference("qwen3_embedding");
  auto p = Pipeline::start(embedding_config("qwen3_embedding"));
  EXPECT_EQ(p->model_info().pooling, Pooling::last);
  expect_reference_vectors(*p, ref);
  EXPECT_GT(p->stats().prefix_hit_tokens, 0u);  // the second round reused the first's pages

  // Token ids, and the leading dimensions normalized again.
  EngineRequest ids = EngineRequest::from_tokens(ref["token_ids"][1].get<std::vector<int32_t>>());
  ids.params.embed = {.on = true, .dimensions = ref["matryoshka_dims"].get<int32_t>()};
  auto run = p->generate(std::move(ids));
  expect_vector(test::wait_for(run, 60s).final.embedding, ref["matryoshka_embeddings"][1], "matryoshka");
}

TEST(PipelineEmbedding, MeanPoolingMatchesSentenceTransformers) {
  const Json ref = reference("llama_embedding_mean");
  auto p = Pipeline::start(embedding_config("llama_embedding_mean"));
  EXPECT_EQ(p->model_info().pooling, Pooling::mean);
  EXPECT_FALSE(p->model_info().normalize);
  expect_reference_vectors(*p, ref);
  const KvSnapshot kv = p->kv_snapshot();
  EXPECT_EQ(kv.invariant_error, "");
  EXPECT_EQ(kv.n_used, 0);
}

FinalEvent final_of(Pipeline& p, EngineRequest r) {
  auto run = p.generate(std::move(r));
  return test::wait_for(run, 60s).final;
}

FinalEvent embed_ids(Pipeline& p, std::vector<int32_t> ids) {
  EngineRequest r = EngineRequest::from_tokens(std::move(ids));
  r.params.embed.on = true;
  return final_of(p, std::move(r));
}

// BERT encoders, CLS and mean pooled: every text at once and again, each
// in one step beside the others; nothing comes from the prefix cache.
TEST(PipelineEmbedding, EncoderPoolingMatchesSentenceTransformers) {
  for (const char* name :
       {"bert_embedding_cls", "bert_embedding_mean", "distilbert_embedding_mean", "nomic_bert_embedding_mean"}) {
    SCOPED_TRACE(name);
    const Json ref = reference(name);
    auto p = Pipeline::start(encoder_config(name));
    EXPECT_EQ(to_string(p->model_info().pooling), ref["pooling"].get<std::string>());
    EXPECT_EQ(p->model_info().context_length, 128);
    expect_reference_vectors(*p, ref);
    EXPECT_EQ(p->stats().prefix_hit_tokens, 0u);
    EXPECT_EQ(p->kv_snapshot().invariant_error, "");
  }
}

// multilingual-e5's recipe: XLM-RoBERTa (positions from pad_token_id + 1,
// the Unigram tokenizer), mean pooled; its 256-token context in one step.
TEST(PipelineEmbedding, XlmRobertaEncoderMatchesSentenceTransformers) {
  const Json ref = reference("xlm_roberta_embedding_mean");
  PipelineConfig c = encoder_config("xlm_roberta_embedding_mean");
  c.scheduler.max_tokens_per_step = 256;
  auto p = Pipeline::start(c);
  EXPECT_EQ(p->model_info().context_length, 256);
  expect_reference_vectors(*p, ref);
}

// modernbert-embed's recipe: ModernBERT (rotary positions, local layers
// whose windows reach both ways), mean pooled.
TEST(PipelineEmbedding, ModernBertEncoderMatchesSentenceTransformers) {
  const Json ref = reference("modernbert_embedding_mean");
  PipelineConfig c = encoder_config("modernbert_embedding_mean");
  c.scheduler.max_tokens_per_step = 256;
  auto p = Pipeline::start(c);
  EXPECT_EQ(p->model_info().context_length, 256);
  expect_reference_vectors(*p, ref);
}

// An encoder whose context is past the default step budget (ModernBERT's
// 8192 positions; here the fixture's RoPE table-free config says so): the
// default budget grows to the context, so it starts and embeds as it did.
TEST(PipelineEmbedding, DefaultStepsHoldALongEncoderContext) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("troupe_long_encoder_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::copy(fixture("modernbert_embedding_mean"), dir, fs::copy_options::recursive);
  Json config = Json::parse(std::ifstream(dir / "config.json"));
  config["max_position_embeddings"] = 8192;
  std::ofstream(dir / "config.json") << config.dump(1);
  PipelineConfig c{.model_path = dir.string()};
  c.stages = {{.first_layer = 0, .last_layer = -1, .threads = 1}};
  c.n_kv_blocks = 512;  // 8192 tokens of 16
  {
    auto p = Pipeline::start(c);
    EXPECT_EQ(p->model_info().context_length, SchedulerConfig{}.context_length);  // 4096, past the 2048-token steps
    expect_reference_vectors(*p, reference("modernbert_embedding_mean"));
  }
  c.scheduler.max_tokens_per_step = 1024;  // a budget set below the context is still refused
  EXPECT_NE(test::start_error(c).find("max_tokens_per_step must hold the context"), std::string::npos);
  fs::remove_all(dir);
}

// Last pooling over an encoder reads one row, as a causal model's does, but
// may not take a cached prefix: its keys were computed seeing the tokens
// after them. A prompt that shares all but its last token with an earlier
// one gives the vector a fresh pipeline gives it.
TEST(PipelineEmbedding, EncoderNeverReusesACachedPrefix) {
  const Json ref = reference("bert_embedding_cls");
  PipelineConfig c = encoder_config("bert_embedding_cls");
  c.pooling = "last";
  const std::vector<int32_t> a = ref["token_ids"][3].get<std::vector<int32_t>>();
  std::vector<int32_t> b = a;
  b.back() = a[1];
  std::vector<float> fresh;
  {
    auto p = Pipeline::start(c);
    fresh = embed_ids(*p, b).embedding;
  }
  auto p = Pipeline::start(c);
  const FinalEvent first = embed_ids(*p, a);
  ASSERT_EQ(first.reason, EndReason::stop) << first.error_message;
  expect_vector(embed_ids(*p, a).embedding, Json(first.embedding), "the same prompt again");
  expect_vector(embed_ids(*p, b).embedding, Json(fresh), "a prompt sharing its prefix");
  EXPECT_EQ(p->stats().prefix_hit_tokens, 0u);
}

// truncate_prompt_tokens on an encoder: the text's tail goes and [CLS] and
// [SEP] stay, as sentence-transformers' max_seq_length cuts it (a causal
// model loses the head instead, above). Ids that do not end in [SEP] keep
// their first ones.
TEST(PipelineEmbedding, EncoderTruncatesTheTail) {
  for (const char* name : {"bert_embedding_cls", "bert_embedding_mean", "nomic_bert_embedding_mean"}) {
    SCOPED_TRACE(name);
    const Json ref = reference(name);
    auto p = Pipeline::start(encoder_config(name));
    EngineRequest r = embed_text(ref["texts"][3].get<std::string>());
    r.params.embed.truncate = ref["truncate"].get<int32_t>();
    const FinalEvent cut = final_of(*p, std::move(r));
    ASSERT_EQ(cut.reason, EndReason::stop) << cut.error_message;
    EXPECT_EQ(cut.prompt_tokens, static_cast<int32_t>(ref["truncated_ids"].size()));
    expect_vector(cut.embedding, ref["truncated_embedding"], "cut to max_seq_length");

    std::vector<int32_t> ids = ref["token_ids"][3].get<std::vector<int32_t>>();
    ids.pop_back();  // no [SEP]
    EngineRequest t = EngineRequest::from_tokens(ids);
    t.params.embed = {.on = true, .truncate = 5};
    const FinalEvent head = final_of(*p, std::move(t));
    ASSERT_EQ(head.reason, EndReason::stop) << head.error_message;
    expect_vector(head.embedding, Json(embed_ids(*p, {ids.begin(), ids.begin() + 5}).embedding), "first 5");

    // Too long without truncation: refused, saying what truncation would keep
    // (the BERT fixtures' 128 positions; NomicBERT's 2048 are not reached).
    if (std::string_view(name).starts_with("nomic")) continue;
    const FinalEvent long_input = embed_ids(*p, std::vector<int32_t>(129, ids[1]));
    EXPECT_EQ(long_input.error_code, Errc::too_long);
    EXPECT_NE(long_input.error_message.find("keeps the first ones and the closing [SEP]"), std::string::npos)
        << long_input.error_message;
  }
}

TEST(PipelineEmbedding, EncoderStartRules) {
  // A step must hold the whole context, as no prompt may be cut.
  PipelineConfig c = embedding_config("bert_embedding_cls");  // 48-token steps
  EXPECT_NE(test::start_error(c).find("max_tokens_per_step must hold the context (128 tokens)"), std::string::npos)
      << test::start_error(c);
  c = encoder_config("bert_embedding_cls");
  c.embedding = false;
  EXPECT_NE(test::start_error(c).find("is an encoder, and generates no text"), std::string::npos)
      << test::start_error(c);
  // CLS pooling of a causal model: its first token saw only itself.
  c = embedding_config("qwen3_embedding");
  c.pooling = "cls";
  EXPECT_NE(test::start_error(c).find("needs an encoder"), std::string::npos) << test::start_error(c);
}

TEST(PipelineEmbedding, FrontDoorRefusesTheOtherKind) {
  auto p = Pipeline::start(embedding_config("qwen3_embedding"));
  FinalEvent f = final_of(*p, EngineRequest::from_text({.text = "hello"}, test::greedy(4)));
  EXPECT_EQ(f.reason, EndReason::error);
  EXPECT_EQ(f.error_code, Errc::invalid_argument);
  EXPECT_EQ(f.error_param, "model");
  EXPECT_NE(f.error_message.find("is an embedding model"), std::string::npos) << f.error_message;

  f = final_of(*p, embed_text("hello", 65));  // the model has 64 dimensions
  EXPECT_EQ(f.error_param, "dimensions");
  // The whole context may be embedded (nothing is generated), not one more.
  const int32_t ctx = p->model_info().context_length;
  EngineRequest fill = EngineRequest::from_tokens(std::vector<int32_t>(static_cast<size_t>(ctx), 7));
  fill.params.embed.on = true;
  EXPECT_EQ(final_of(*p, fill).reason, EndReason::stop);
  fill.tokens.push_back(7);
  f = final_of(*p, fill);
  EXPECT_EQ(f.error_code, Errc::too_long);
  EXPECT_EQ(f.error_param, "prompt");

  // vLLM's truncate_prompt_tokens: the last tokens are kept.
  std::vector<int32_t> long_input(static_cast<size_t>(ctx + 40));
  for (size_t i = 0; i < long_input.size(); ++i) long_input[i] = static_cast<int32_t>(1 + i % 300);
  auto embed_ids = [&](std::vector<int32_t> ids, int32_t truncate) {
    EngineRequest r = EngineRequest::from_tokens(std::move(ids));
    r.params.embed = {.on = true, .truncate = truncate};
    return final_of(*p, std::move(r));
  };
  const FinalEvent whole = embed_ids({long_input.end() - ctx, long_input.end()}, 0);
  const FinalEvent cut = embed_ids(long_input, -1);
  ASSERT_EQ(cut.reason, EndReason::stop) << cut.error_message;
  EXPECT_EQ(cut.prompt_tokens, ctx);
  // The same tokens, computed in other chunks or from the prefix cache: the
  // same vector but for the summation order of other batch shapes.
  expect_vector(cut.embedding, Json(whole.embedding), "truncated to the context");
  expect_vector(embed_ids(long_input, 10).embedding,
                Json(embed_ids({long_input.end() - 10, long_input.end()}, 0).embedding), "truncated to 10");
  EXPECT_EQ(embed_ids(long_input, ctx + 1).error_param, "truncate_prompt_tokens");

  // A generating pipeline over the same files: the head is missing.
  PipelineConfig gen = embedding_config("qwen3_embedding");
  gen.embedding = false;
  EXPECT_NE(test::start_error(gen).find("no output head"), std::string::npos) << test::start_error(gen);
  // And a generating model refuses embedding requests.
  auto stories = Pipeline::start(test::stories_config(test::split(1)));
  f = final_of(*stories, embed_text("Once upon a time"));
  EXPECT_EQ(f.error_param, "model");
  EXPECT_NE(f.error_message.find("serves no embeddings"), std::string::npos) << f.error_message;
}

TEST(PipelineEmbedding, ConfigChoosesThePooling) {
  PipelineConfig c = embedding_config("qwen3_embedding");
  c.pooling = "first";
  EXPECT_NE(test::start_error(c).find("is not last, mean or cls"), std::string::npos);
  // --embedding over a generating model: last pooling unless told.
  PipelineConfig s = test::stories_config(test::split(1));
  s.embedding = true;
  s.pooling = "mean";
  auto p = Pipeline::start(s);
  EXPECT_EQ(p->model_info().pooling, Pooling::mean);
  const FinalEvent f = final_of(*p, embed_text("Once upon a time"));
  EXPECT_EQ(f.reason, EndReason::stop);
  EXPECT_EQ(f.embedding.size(), static_cast<size_t>(p->model_info().n_embd));
  s.embedding = false;
  EXPECT_NE(test::start_error(s).find("is for an embedding pipeline"), std::string::npos);
}

// The last stage in a `troupe stage` worker: its sampler pools, and the
// vectors cross back in the sampled step.
TEST(PipelineEmbedding, RemoteLastStagePools) {
  const Json ref = reference("qwen3_embedding");
  test::StageProcess w;
  ASSERT_TRUE(w.start({"-m", fixture("qwen3_embedding"), "--layers", "1:", "-t", "1", "--kv-blocks", "64"}));
  PipelineConfig c = embedding_config("qwen3_embedding");
  c.stages = {{.first_layer = 0, .last_layer = 1, .threads = 1},
              {.first_layer = 1, .last_layer = -1, .remote = w.address()}};
  c.remote.step_timeout_ms = 10000;
  auto p = Pipeline::start(c);
  expect_reference_vectors(*p, ref);

  // A head that would generate from the same worker is refused at the handshake.
  c.embedding = false;
  EXPECT_NE(test::start_error(c).find("output differs"), std::string::npos) << test::start_error(c);
}

// An encoder split across processes: the worker's layers attend both ways
// too, and it pools by CLS or the mean.
TEST(PipelineEmbedding, RemoteEncoderStage) {
  for (const char* name : {"bert_embedding_cls", "bert_embedding_mean", "nomic_bert_embedding_mean"}) {
    SCOPED_TRACE(name);
    const Json ref = reference(name);
    test::StageProcess w;
    ASSERT_TRUE(w.start({"-m", fixture(name), "--layers", "1:", "-t", "1", "--kv-blocks", "64"}));
    PipelineConfig c = encoder_config(name);
    c.stages = {{.first_layer = 0, .last_layer = 1, .threads = 1},
                {.first_layer = 1, .last_layer = -1, .remote = w.address()}};
    c.remote.step_timeout_ms = 10000;
    auto p = Pipeline::start(c);
    expect_reference_vectors(*p, ref);
  }
}

}  // namespace
}  // namespace troupe

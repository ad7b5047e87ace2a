// Speculative decoding (prompt lookup) and prompt logprobs through the actor
// pipeline on stories260K: greedy output token for token the same as
// Generator's, alone and batched with 16 other requests, over one and two
// stages; proposals accepted on repetitive text; no KV block left after
// cancels in the middle of speculation; the prompt scored across chunk
// boundaries equal to a token-by-token reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "model/model_tokenizer.hpp"
#include "pipeline_test_util.hpp"
#include "tests/exact_math.hpp"

namespace troupe {
namespace {

using test::greedy;

// proposer: "ngram" (prompt lookup), "draft" (the model drafting for
// itself: every proposal right) or "self" (its first 3 of 5 layers).
PipelineConfig spec_config(int n_stages, const std::string& proposer = "ngram") {
  PipelineConfig c = test::stories_config(test::split(n_stages));
  c.scheduler.spec_max_draft = 4;
  if (proposer == "draft") c.draft_model = test::stories_model();
  if (proposer == "self") c.draft_layers = 3;
  return c;
}

// A story told twice: from the second telling on, the suffix of the output
// recurs in the prompt, so prompt lookup has something to propose.
std::vector<int32_t> repetitive_prompt() {
  const std::string story =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun. "
      "One day, she saw a big red ball in the park. ";
  return test::stories_tokenizer().encode(story + story + "Once upon a time, there was", true, false);
}

class PipelineSpeculative : public ::testing::TestWithParam<std::string> {};

TEST_P(PipelineSpeculative, GreedyOutputIsUnchangedAloneAndBatched) {
  const std::string proposer = GetParam();
  const std::vector<int32_t> prompt = repetitive_prompt();
  const std::vector<int32_t> expected = test::reference(prompt, 80, /*ignore_eos=*/true);
  const std::vector<test::Case> cases = test::make_cases(16);
  for (const int n_stages : {1, 2}) {
    SCOPED_TRACE(std::to_string(n_stages) + " stage(s), " + proposer);
    auto p = Pipeline::start(spec_config(n_stages, proposer));
    GenerateParams params = greedy(80);
    params.ignore_eos = true;

    auto first = p->generate(prompt, params);
    const Completion alone = test::wait_for(first);
    EXPECT_EQ(test::ids_of(alone), expected);
    const PipelineStats after_alone = p->stats();
    EXPECT_EQ(after_alone.spec_proposer, proposer);
    EXPECT_GT(after_alone.spec_proposed, 0u);
    if (proposer == "draft") {
      // The target drafting for itself: every proposal is right.
      EXPECT_EQ(after_alone.spec_accepted, after_alone.spec_proposed);
    }
    if (proposer != "self") {
      EXPECT_GT(after_alone.spec_accepted, 0u) << "nothing accepted";
      // Fewer steps than tokens: some step produced more than one.
      EXPECT_LT(after_alone.steps, 80u + 10u);
    }

    // Batched: the repetitive request among 16 others, all at once.
    std::vector<std::future<Completion>> runs;
    runs.push_back(p->generate(prompt, params));
    for (const test::Case& c : cases) runs.push_back(p->generate(c.prompt, greedy(c.max_new_tokens)));
    EXPECT_EQ(test::ids_of(test::wait_for(runs[0])), expected);
    for (size_t i = 0; i < cases.size(); ++i) {
      EXPECT_EQ(test::ids_of(test::wait_for(runs[i + 1])), cases[i].expected) << "case " << i;
    }
    const KvSnapshot kv = p->kv_snapshot();
    EXPECT_EQ(kv.n_used, 0);
    EXPECT_EQ(kv.invariant_error, "");
  }
}

INSTANTIATE_TEST_SUITE_P(Proposers, PipelineSpeculative, ::testing::Values("ngram", "draft", "self"));

TEST(PipelineSpeculativeRules, ADraftWithAnotherVocabularyIsRefused) {
  PipelineConfig c = spec_config(1);
  c.draft_model_path = std::string(TROUPE_FIXTURES_DIR) + "/tiny_q4_k_m.gguf";  // another vocabulary
  const std::string why = test::start_error(c);
  EXPECT_NE(why.find("vocabulary"), std::string::npos) << why;
  c = spec_config(1, "self");
  c.draft_layers = 5;  // all of them: not a draft
  EXPECT_NE(test::start_error(c).find("draft_layers"), std::string::npos);
}

TEST(PipelineSpeculativeRules, RequestCanTurnItOff) {
  auto p = Pipeline::start(spec_config(1));
  GenerateParams params = greedy(40);
  params.ignore_eos = true;
  params.speculative = false;
  auto run = p->generate(repetitive_prompt(), params);
  EXPECT_EQ(test::ids_of(test::wait_for(run)), test::reference(repetitive_prompt(), 40, true));
  EXPECT_EQ(p->stats().spec_proposed, 0u);
}

TEST(PipelineSpeculativeRules, SampledRequestsRunAndEndCleanly) {
  // With temperature the output is the target's distribution, not the
  // plain run's tokens (Sampler.VerifyKeepsTheTargetDistribution checks
  // that); here: lengths and the pool.
  auto p = Pipeline::start(spec_config(2));
  std::vector<std::future<Completion>> runs;
  for (int i = 0; i < 6; ++i) {
    GenerateParams params{.max_new_tokens = 50, .ignore_eos = true};
    params.sampling.temperature = 0.7f;
    params.sampling.top_k = 20;
    params.sampling.seed = static_cast<uint64_t>(i);
    runs.push_back(p->generate(repetitive_prompt(), params));
  }
  for (auto& r : runs) {
    const Completion c = test::wait_for(r);
    EXPECT_EQ(c.final.reason, EndReason::length);
    EXPECT_EQ(c.tokens.size(), 50u);
  }
  EXPECT_GT(p->stats().spec_proposed, 0u);
  EXPECT_EQ(p->kv_snapshot().n_used, 0);
}

TEST_P(PipelineSpeculative, CancelsDuringSpeculationFreeEveryBlock) {
  auto p = Pipeline::start(spec_config(2, GetParam()));
  std::vector<RequestId> ids;
  std::vector<std::future<Completion>> done;
  for (int i = 0; i < 8; ++i) {
    auto promise = std::make_shared<std::promise<Completion>>();
    done.push_back(promise->get_future());
    auto got = std::make_shared<Completion>();
    GenerateParams params = greedy(400);
    params.ignore_eos = true;
    ids.push_back(p->submit(repetitive_prompt(), params,
                            {.on_token = [got](const TokenEvent& e) { got->tokens.push_back(e); },
                             .on_final = [got, promise](const FinalEvent& f) {
                               got->final = f;
                               promise->set_value(*got);
                             }}));
  }
  // Let them speculate a while, then cancel them all mid-flight.
  while (p->stats().spec_proposed < 50) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  for (const RequestId id : ids) p->cancel(id);
  for (auto& d : done) {
    const Completion c = test::wait_for(d);
    EXPECT_EQ(c.final.reason, EndReason::cancelled);
  }
  const KvSnapshot kv = p->kv_snapshot();
  EXPECT_EQ(kv.n_used, 0);
  EXPECT_TRUE(kv.sequences.empty());
  EXPECT_EQ(kv.invariant_error, "");
}

// Each prompt token's logprob given those before it, one token at a time
// (Generator::token_logprobs: decode steps, no chunked prefill).
std::vector<double> reference_scores(const std::vector<int32_t>& prompt) {
  CpuBackend backend({.n_threads = 1});
  Generator gen(test::stories_model(), backend);
  return gen.token_logprobs(prompt);
}

TEST(PipelinePromptLogprobs, EveryPromptTokenScoredAcrossChunks) {
  // ~90 tokens: three prefill chunks of 32 (score_chunk is larger).
  const std::vector<int32_t> prompt = repetitive_prompt();
  ASSERT_GT(prompt.size(), 64u);
  const std::vector<double> want = reference_scores(prompt);
  auto p = Pipeline::start(spec_config(2));
  // Twice: the second run's prompt is in the prefix cache, which a scored
  // prompt must not use (it would have no logits for the cached part).
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    GenerateParams params = greedy(3);
    params.prompt_logprobs = true;
    params.sampling.logprobs = true;
    params.sampling.n_logprobs = 2;
    auto f = p->generate(prompt, params);
    const Completion c = test::wait_for(f);
    ASSERT_FALSE(c.tokens.empty());
    const std::vector<TokenScore>& scores = c.tokens[0].prompt_scores;
    ASSERT_EQ(scores.size(), prompt.size());
    EXPECT_TRUE(std::isnan(scores[0].logprob));
    EXPECT_EQ(scores[0].token, prompt[0]);
    for (size_t k = 1; k < prompt.size(); ++k) {
      EXPECT_EQ(scores[k].token, prompt[k]);
      EXPECT_NEAR(scores[k].logprob, want[k - 1], 2e-4) << "prompt token " << k;
      ASSERT_EQ(scores[k].top_logprobs.size(), 2u);
      EXPECT_GE(scores[k].top_logprobs[0].logprob, scores[k].logprob - 1e-6f);
      EXPECT_EQ(scores[k].top_bytes.size(), 2u);
    }
    for (size_t i = 1; i < c.tokens.size(); ++i) EXPECT_TRUE(c.tokens[i].prompt_scores.empty());
    EXPECT_EQ(test::ids_of(c), test::reference(prompt, 3));
  }
  EXPECT_EQ(p->kv_snapshot().n_used, 0);
}

}  // namespace
}  // namespace troupe

namespace troupe {
namespace {

// SmolLM2-135M-Instruct (the set-up's default model, scripts/setup): greedy
// output with each proposer equal to the model's output without
// speculation, alone and batched with 16 other requests.
std::string smollm2_path() {
  if (const char* p = std::getenv("TROUPE_DEFAULT_MODEL"); p != nullptr && *p != '\0') return p;
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.cache/troupe/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

TEST(PipelineSpeculativeSmolLM2, GreedyOutputIsUnchangedWithEveryProposer) {
  if (!std::filesystem::exists(smollm2_path())) {
    GTEST_SKIP() << "SmolLM2-135M-Instruct.Q4_1.gguf not found at " << smollm2_path() << " (scripts/setup fetches it)";
  }
  // Equal output alone, batched and speculated is what batch-invariant math
  // guarantees; without it a near tie may go either way.
  const test::BatchInvariantMath invariant;
  const std::shared_ptr<const Model> model = Model::load(smollm2_path());
  const std::unique_ptr<Tokenizer> tok = load_model_tokenizer(*model);
  const std::string text =
      "Repeat exactly: the quick brown fox jumps over the lazy dog, the quick brown fox jumps over the lazy dog, "
      "the quick brown fox";
  const std::vector<int32_t> prompt = tok->encode(text, true, false);
  std::vector<std::vector<int32_t>> others;
  for (int i = 0; i < 16; ++i) others.push_back(tok->encode("Story number " + std::to_string(i) + ": once", true, false));

  // The references: the same pipeline without speculation.
  auto run_all = [&](PipelineConfig c) {
    c.model = model;
    c.stages = {{.first_layer = 0, .last_layer = -1, .threads = 2}};
    c.n_kv_blocks = 256;
    auto p = Pipeline::start(std::move(c));
    GenerateParams main = greedy(32);
    main.ignore_eos = true;
    std::vector<std::vector<int32_t>> out;
    auto alone = p->generate(prompt, main);
    out.push_back(test::ids_of(test::wait_for(alone, std::chrono::seconds(120))));
    std::vector<std::future<Completion>> runs;
    runs.push_back(p->generate(prompt, main));
    for (const auto& o : others) runs.push_back(p->generate(o, greedy(6)));
    for (auto& r : runs) out.push_back(test::ids_of(test::wait_for(r, std::chrono::seconds(120))));
    EXPECT_EQ(p->kv_snapshot().n_used, 0);
    return std::make_pair(out, p->stats());
  };
  const auto [want, plain_stats] = run_all({});
  ASSERT_EQ(want[0].size(), 32u);
  for (const std::string proposer : {"ngram", "self", "draft"}) {
    SCOPED_TRACE(proposer);
    PipelineConfig c;
    c.scheduler.spec_max_draft = 4;
    if (proposer == "self") c.draft_layers = 10;
    if (proposer == "draft") c.draft_model = model;
    const auto [got, stats] = run_all(c);
    EXPECT_EQ(got, want);
    EXPECT_GT(stats.spec_proposed, 0u);
  }
}

}  // namespace
}  // namespace troupe

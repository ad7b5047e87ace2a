// Speculative decoding (prompt lookup) and prompt logprobs through the actor
// pipeline on stories260K: greedy output token for token the same as
// Generator's, alone and batched with 16 other requests, over one and two
// stages; proposals accepted on repetitive text; no KV block left after
// cancels in the middle of speculation; the prompt scored across chunk
// boundaries equal to a token-by-token reference.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "pipeline_test_util.hpp"

namespace troupe {
namespace {

using test::greedy;

PipelineConfig spec_config(int n_stages, int32_t draft = 4) {
  PipelineConfig c = test::stories_config(test::split(n_stages));
  c.scheduler.spec_max_draft = draft;
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

TEST(PipelineSpeculative, GreedyOutputIsUnchangedAloneAndBatched) {
  const std::vector<int32_t> prompt = repetitive_prompt();
  const std::vector<int32_t> expected = test::reference(prompt, 80, /*ignore_eos=*/true);
  const std::vector<test::Case> cases = test::make_cases(16);
  for (const int n_stages : {1, 2}) {
    SCOPED_TRACE(std::to_string(n_stages) + " stage(s)");
    auto p = Pipeline::start(spec_config(n_stages));
    GenerateParams params = greedy(80);
    params.ignore_eos = true;

    auto first = p->generate(prompt, params);
    const Completion alone = test::wait_for(first);
    EXPECT_EQ(test::ids_of(alone), expected);
    const PipelineStats after_alone = p->stats();
    EXPECT_GT(after_alone.spec_proposed, 0u);
    EXPECT_GT(after_alone.spec_accepted, 0u) << "nothing accepted on a story told twice";
    // Fewer steps than tokens: some step produced more than one.
    EXPECT_LT(after_alone.steps, 80u + 10u);

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

TEST(PipelineSpeculative, RequestCanTurnItOff) {
  auto p = Pipeline::start(spec_config(1));
  GenerateParams params = greedy(40);
  params.ignore_eos = true;
  params.speculative = false;
  auto run = p->generate(repetitive_prompt(), params);
  EXPECT_EQ(test::ids_of(test::wait_for(run)), test::reference(repetitive_prompt(), 40, true));
  EXPECT_EQ(p->stats().spec_proposed, 0u);
}

TEST(PipelineSpeculative, SampledRequestsRunAndEndCleanly) {
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

TEST(PipelineSpeculative, CancelsDuringSpeculationFreeEveryBlock) {
  auto p = Pipeline::start(spec_config(2));
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

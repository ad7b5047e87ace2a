// SchedulerPolicy on scripted workloads: chunked prefill, the length-aware
// queue (and its aging), priorities, preemption by recompute, rejection,
// the batching delay, cancellation, finishing and prefix reuse.
#include "actors/scheduler_policy.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "scheduler_test_util.hpp"

namespace troupe {
namespace {

using test::at_ms;
using test::fake_model;
using test::make_request;

std::vector<int64_t> ids_of(const StepPlan& plan) {
  std::vector<int64_t> ids;
  for (const ScheduledSeq& e : plan.seqs) ids.push_back(e.request_id);
  return ids;
}

const ScheduledSeq* entry(const StepPlan& plan, int64_t id) {
  for (const ScheduledSeq& e : plan.seqs) {
    if (e.request_id == id) return &e;
  }
  return nullptr;
}

// Runs one step with the fake model; returns the plan.
StepPlan step(SchedulerPolicy& s, int64_t now_ms, std::vector<FinishedSeq>* finished = nullptr) {
  StepPlan plan = s.schedule(at_ms(now_ms));
  auto done = s.update(plan, fake_model(plan));
  if (finished != nullptr) *finished = std::move(done);
  s.check_invariants();
  return plan;
}

TEST(SchedulerPolicy, ChunkedPrefillSplitsLongPrompt) {
  KvCacheManager kv({.n_blocks = 64, .block_size = 16});
  SchedulerPolicy s(
      {.max_batch_size = 4, .max_tokens_per_step = 64, .prefill_chunk = 16, .context_length = 512},
      kv);
  const Request r = make_request(1, 50);
  ASSERT_EQ(s.add(r), AddStatus::accepted);
  const int32_t sizes[] = {16, 16, 16, 2};
  for (int i = 0; i < 4; ++i) {
    const StepPlan plan = step(s, i);
    ASSERT_EQ(plan.seqs.size(), 1u);
    const ScheduledSeq& e = plan.seqs[0];
    EXPECT_EQ(static_cast<int32_t>(e.tokens.size()), sizes[i]);
    EXPECT_EQ(e.n_past, 16 * i);
    EXPECT_TRUE(std::equal(e.tokens.begin(), e.tokens.end(), r.prompt.begin() + e.n_past));
    EXPECT_EQ(e.need_logits, i == 3);
    EXPECT_TRUE(e.is_prefill);
    EXPECT_EQ(e.first_chunk, i == 0);
    EXPECT_EQ(e.block_table.size(), static_cast<size_t>(i + 1));
  }
  const StepPlan decode = step(s, 4);
  ASSERT_EQ(decode.seqs.size(), 1u);
  EXPECT_EQ(decode.seqs[0].n_past, 50);
  EXPECT_EQ(decode.seqs[0].tokens, std::vector<int32_t>{1 * 1000 + 50});  // the sampled token
  EXPECT_FALSE(decode.seqs[0].is_prefill);
  EXPECT_TRUE(decode.seqs[0].need_logits);
}

// Gemma 3's images are seen whole by their tokens: a chunk that would end
// inside one stops before it, or takes all of it when it starts at or in it
// (past prefill_chunk, within the step's budget).
TEST(SchedulerPolicy, ChunksNeverEndInsideAWholeSpan) {
  struct Script {
    int32_t n_prompt, chunk;
    std::vector<int32_t> spans;
    std::vector<int32_t> sizes;
  };
  for (const Script& sc : {Script{50, 16, {10, 26, 30, 34}, {10, 16, 16, 8}}, Script{20, 4, {2, 12}, {2, 10, 4, 4}},
                           Script{40, 16, {0, 20}, {20, 16, 4}}}) {
    KvCacheManager kv({.n_blocks = 64, .block_size = 16});
    SchedulerPolicy s(
        {.max_batch_size = 4, .max_tokens_per_step = 64, .prefill_chunk = sc.chunk, .context_length = 512}, kv);
    Request r = make_request(1, sc.n_prompt);
    r.whole_spans = sc.spans;
    ASSERT_EQ(s.add(r), AddStatus::accepted);
    std::vector<int32_t> sizes;
    for (int i = 0; i < 8 && sizes.size() < sc.sizes.size(); ++i) {
      const StepPlan plan = step(s, i);
      ASSERT_EQ(plan.seqs.size(), 1u);
      sizes.push_back(static_cast<int32_t>(plan.seqs[0].tokens.size()));
    }
    EXPECT_EQ(sizes, sc.sizes) << "prompt " << sc.n_prompt << " chunk " << sc.chunk;
  }
}

// A span no step can hold, or one outside the prompt, is refused at once.
TEST(SchedulerPolicy, RefusesWholeSpansNoStepHolds) {
  KvCacheManager kv({.n_blocks = 64, .block_size = 16});
  SchedulerPolicy s({.max_batch_size = 4, .max_tokens_per_step = 32, .prefill_chunk = 16, .context_length = 512}, kv);
  Request big = make_request(1, 60);
  big.whole_spans = {5, 45};
  Request outside = make_request(2, 20);
  outside.whole_spans = {10, 21};
  s.add(big);
  s.add(outside);
  const StepPlan plan = step(s, 0);
  ASSERT_EQ(plan.rejected.size(), 2u);
  EXPECT_NE(plan.rejected[0].reason.find("exceeds max_tokens_per_step 32"), std::string::npos)
      << plan.rejected[0].reason;
  EXPECT_NE(plan.rejected[1].reason.find("inside the prompt"), std::string::npos) << plan.rejected[1].reason;
}

TEST(SchedulerPolicy, WithoutChunkingThePromptRunsInOneStep) {
  KvCacheManager kv({.n_blocks = 64, .block_size = 16});
  EXPECT_THROW(
      SchedulerPolicy({.max_tokens_per_step = 256, .chunked_prefill = false, .context_length = 512},
                      kv),
      Error);
  SchedulerPolicy s({.max_batch_size = 4,
                     .max_tokens_per_step = 512,
                     .chunked_prefill = false,
                     .context_length = 512},
                    kv);
  s.add(make_request(1, 300));
  const StepPlan plan = step(s, 0);
  ASSERT_EQ(plan.seqs.size(), 1u);
  EXPECT_EQ(plan.seqs[0].tokens.size(), 300u);
  EXPECT_TRUE(plan.seqs[0].need_logits);
}

TEST(SchedulerPolicy, ShortPromptOvertakesLongPrefills) {
  KvCacheManager kv({.n_blocks = 256, .block_size = 16});
  SchedulerPolicy s({.max_batch_size = 4,
                     .max_tokens_per_step = 32,
                     .prefill_chunk = 16,
                     .context_length = 1024,
                     .level_bounds = {32, 128},
                     .level_aging = std::chrono::microseconds(0)},
                    kv);
  for (int64_t id = 1; id <= 3; ++id) s.add(make_request(id, 200, Priority::interactive, id));
  const StepPlan first = step(s, 5);
  EXPECT_EQ(ids_of(first), (std::vector<int64_t>{1, 2}));
  s.add(make_request(9, 10, Priority::interactive, 6));
  const StepPlan second = step(s, 7);
  // The short prompt goes first, whole; the long ones share what is left.
  EXPECT_EQ(ids_of(second), (std::vector<int64_t>{9, 1, 2}));
  EXPECT_EQ(second.seqs[0].tokens.size(), 10u);
  EXPECT_TRUE(second.seqs[0].need_logits);
  EXPECT_EQ(second.seqs[1].tokens.size(), 16u);
  EXPECT_EQ(second.seqs[2].tokens.size(), 6u);
  EXPECT_TRUE(s.is_waiting(3));
  // Next step the short one streams its first decode token while the long
  // ones are still prefilling.
  const StepPlan third = step(s, 8);
  ASSERT_NE(entry(third, 9), nullptr);
  EXPECT_FALSE(entry(third, 9)->is_prefill);
  EXPECT_LT(entry(third, 1)->n_past + static_cast<int32_t>(entry(third, 1)->tokens.size()), 200);
}

// One slot; a blocker runs first. Returns which of a long (id 2, arrived at
// 1 ms) and a short (id 3, arrived at 25 ms) prompt is admitted at 30 ms.
int64_t admitted_after_blocker(std::chrono::microseconds aging) {
  KvCacheManager kv({.n_blocks = 64, .block_size = 16});
  SchedulerPolicy s({.max_batch_size = 1,
                     .max_tokens_per_step = 512,
                     .prefill_chunk = 512,
                     .context_length = 1024,
                     .level_bounds = {32, 128},
                     .level_aging = aging},
                    kv);
  s.add(make_request(1, 4, Priority::interactive, 0, /*max_new=*/2));
  step(s, 0);
  s.add(make_request(2, 200, Priority::interactive, 1));
  s.add(make_request(3, 10, Priority::interactive, 25));
  std::vector<FinishedSeq> done;
  step(s, 26, &done);
  EXPECT_EQ(done.size(), 1u);
  const StepPlan plan = step(s, 30);
  EXPECT_EQ(plan.seqs.size(), 1u);
  return plan.seqs.empty() ? -1 : plan.seqs[0].request_id;
}

TEST(SchedulerPolicy, AgingLiftsLongPromptsOverShortOnes) {
  EXPECT_EQ(admitted_after_blocker(std::chrono::microseconds(0)), 3);
  // 29 ms waited at 10 ms per level: level 2 -> 0, and it arrived first.
  EXPECT_EQ(admitted_after_blocker(std::chrono::milliseconds(10)), 2);
}

TEST(SchedulerPolicy, InteractiveIsAdmittedBeforeBatch) {
  KvCacheManager kv({.n_blocks = 64, .block_size = 16});
  SchedulerPolicy s({.max_batch_size = 1, .max_tokens_per_step = 64, .context_length = 512}, kv);
  s.add(make_request(1, 8, Priority::batch, 0));
  s.add(make_request(2, 8, Priority::interactive, 5));
  const StepPlan plan = step(s, 10);
  EXPECT_EQ(ids_of(plan), std::vector<int64_t>{2});
  EXPECT_TRUE(s.is_waiting(1));
}

TEST(SchedulerPolicy, PreemptionTakesBatchBeforeInteractive) {
  // 6 blocks of 4 tokens. A batch request runs first; two interactive ones
  // join; when KV runs out, the batch one goes although it is the oldest.
  KvCacheManager kv({.n_blocks = 6, .block_size = 4});
  SchedulerPolicy s({.max_batch_size = 4,
                     .max_tokens_per_step = 64,
                     .prefill_chunk = 64,
                     .context_length = 64,
                     .kv_watermark = 0.0,
                     .kv_demand_fraction = 0.0},  // first-chunk admission: the pool runs out
                    kv);
  s.add(make_request(1, 3, Priority::batch, 0));
  step(s, 0);  // A: 1 block
  s.add(make_request(2, 8, Priority::interactive, 1));
  s.add(make_request(3, 8, Priority::interactive, 2));
  const StepPlan second = step(s, 3);  // B, C: 2 blocks each; A decodes
  EXPECT_EQ(ids_of(second), (std::vector<int64_t>{2, 3, 1}));
  EXPECT_EQ(kv.pool().n_free(), 1);
  const StepPlan third = step(s, 4);  // B and C both need a third block
  EXPECT_EQ(third.preempted, std::vector<int64_t>{1});
  EXPECT_EQ(ids_of(third), (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(s.is_waiting(1));
  EXPECT_EQ(s.stats().preemptions, 1u);
  // A keeps what it generated: prompt 3 + 2 tokens, recomputed on return.
  EXPECT_EQ(s.tokens(1)->size(), 5u);
}

TEST(SchedulerPolicy, PreemptionTakesMostRecentAndResumesExactly) {
  KvCacheManager kv({.n_blocks = 6, .block_size = 4});
  SchedulerPolicy s({.max_batch_size = 4,
                     .max_tokens_per_step = 64,
                     .prefill_chunk = 64,
                     .context_length = 64,
                     .kv_watermark = 0.0,
                     .kv_demand_fraction = 0.0},  // first-chunk admission: the pool runs out
                    kv);
  for (int64_t id = 1; id <= 3; ++id) s.add(make_request(id, 7, Priority::interactive, id, 4));
  EXPECT_EQ(ids_of(step(s, 10)), (std::vector<int64_t>{1, 2, 3}));  // 2 blocks each
  step(s, 11);                                                      // decode, still 2 blocks
  // A later request of the same level waits; the preempted one will queue
  // in front of it.
  s.add(make_request(4, 7, Priority::interactive, 11, 4));
  const StepPlan third = step(s, 12);
  EXPECT_EQ(third.preempted, std::vector<int64_t>{3});
  EXPECT_EQ(ids_of(third), (std::vector<int64_t>{1, 2}));
  const std::vector<int32_t> history = *s.tokens(3);  // prompt + 2 generated
  ASSERT_EQ(history.size(), 9u);
  EXPECT_EQ(history[7], 3 * 1000 + 7);
  EXPECT_EQ(history[8], 3 * 1000 + 8);
  // Requests 1 and 2 finish (max_new_tokens 4); then 3 is recomputed from
  // its whole history and continues where it stopped.
  const ScheduledSeq* resumed = nullptr;
  StepPlan plan;
  for (int64_t t = 13; t < 40 && resumed == nullptr; ++t) {
    plan = step(s, t);
    resumed = entry(plan, 3);
    if (resumed == nullptr) {
      EXPECT_EQ(entry(plan, 4), nullptr) << "request 4 overtook 3";
    }
  }
  ASSERT_NE(resumed, nullptr);
  EXPECT_EQ(plan.seqs[0].request_id, 3);
  EXPECT_TRUE(resumed->first_chunk);
  EXPECT_TRUE(resumed->need_logits);
  std::vector<int32_t> fed(history.begin() + resumed->n_past, history.end());
  EXPECT_EQ(resumed->tokens, fed);
  EXPECT_EQ(s.tokens(3)->size(), 10u);
  EXPECT_EQ(s.tokens(3)->back(), 3 * 1000 + 9);
}

TEST(SchedulerPolicy, DecodesAreNeverStarvedByPrefill) {
  // A batch request decodes; two long interactive prompts arrive. Their
  // prefill claims KV first but must leave the decode its token.
  KvCacheManager kv({.n_blocks = 64, .block_size = 16});
  SchedulerPolicy s(
      {.max_batch_size = 4, .max_tokens_per_step = 16, .prefill_chunk = 8, .context_length = 512},
      kv);
  s.add(make_request(1, 4, Priority::batch, 0));
  step(s, 0);
  s.add(make_request(2, 100, Priority::interactive, 1));
  s.add(make_request(3, 100, Priority::interactive, 2));
  for (int64_t t = 3; t < 8; ++t) {
    const StepPlan plan = step(s, t);
    EXPECT_EQ(ids_of(plan), (std::vector<int64_t>{2, 3, 1}));
    EXPECT_EQ(plan.n_tokens(), 16);
    ASSERT_NE(entry(plan, 1), nullptr);
    EXPECT_EQ(entry(plan, 1)->tokens.size(), 1u);
    EXPECT_EQ(entry(plan, 3)->tokens.size(), 7u);
  }
}

TEST(SchedulerPolicy, RejectsWhatCanNeverFitAndNothingElse) {
  // 24 tokens. The watermark (1 block) must not block a request that needs
  // every block while nothing else runs.
  KvCacheManager kv({.n_blocks = 6, .block_size = 4});
  SchedulerPolicy s(
      {.max_batch_size = 4, .max_tokens_per_step = 64, .context_length = 64, .kv_watermark = 0.2},
      kv);
  EXPECT_EQ(s.max_total_tokens(), 24);
  s.add(make_request(1, 30));
  s.add(make_request(2, 23));  // 23 + 1 fits exactly
  s.add(make_request(3, 24));
  s.add({.id = 4, .prompt = {}});
  s.add(make_request(5, 4, Priority::interactive, 0, /*max_new=*/0));
  std::vector<FinishedSeq> done;
  const StepPlan plan = step(s, 0, &done);
  ASSERT_EQ(plan.rejected.size(), 4u);
  EXPECT_EQ(plan.rejected[0].request_id, 1);
  EXPECT_EQ(plan.rejected[0].code, Errc::out_of_memory);
  EXPECT_NE(plan.rejected[0].reason.find("request 1"), std::string::npos);
  EXPECT_EQ(plan.rejected[1].request_id, 3);
  EXPECT_EQ(plan.rejected[2].request_id, 4);
  EXPECT_EQ(plan.rejected[3].request_id, 5);
  EXPECT_EQ(ids_of(plan), std::vector<int64_t>{2});
  // Prompt + its first token reach the 24-token limit: finished by length.
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].reason, FinishReason::length);
  EXPECT_FALSE(s.has_work());

  KvCacheManager big({.n_blocks = 64, .block_size = 16});
  SchedulerPolicy c({.max_batch_size = 4, .max_tokens_per_step = 64, .context_length = 16}, big);
  c.add(make_request(7, 16));
  const StepPlan p2 = c.schedule(at_ms(0));
  ASSERT_EQ(p2.rejected.size(), 1u);
  EXPECT_EQ(p2.rejected[0].code, Errc::invalid_argument);
}

TEST(SchedulerPolicy, BoundedQueueAndDuplicateIds) {
  KvCacheManager kv({.n_blocks = 64, .block_size = 16});
  SchedulerPolicy s(
      {.max_batch_size = 4, .max_tokens_per_step = 64, .max_waiting = 2, .context_length = 512},
      kv);
  EXPECT_EQ(s.add(make_request(1, 8)), AddStatus::accepted);
  EXPECT_EQ(s.add(make_request(1, 8)), AddStatus::duplicate_id);
  EXPECT_EQ(s.add(make_request(2, 8)), AddStatus::accepted);
  EXPECT_EQ(s.add(make_request(3, 8)), AddStatus::queue_full);
  step(s, 0);  // both admitted: the queue has room again
  EXPECT_EQ(s.add(make_request(3, 8)), AddStatus::accepted);
}

TEST(SchedulerPolicy, IdleEngineWaitsForABatchUpToMaxWait) {
  KvCacheManager kv({.n_blocks = 64, .block_size = 16});
  SchedulerPolicy s({.max_batch_size = 8,
                     .max_tokens_per_step = 256,
                     .min_batch_size = 3,
                     .max_wait = std::chrono::milliseconds(10),
                     .context_length = 512},
                    kv);
  s.add(make_request(1, 8, Priority::interactive, 0));
  StepPlan p = s.schedule(at_ms(2));
  EXPECT_TRUE(p.seqs.empty());
  EXPECT_EQ(p.step, 0u);
  ASSERT_TRUE(p.wait_until.has_value());
  EXPECT_EQ(*p.wait_until, at_ms(10));
  s.update(p, {});
  s.add(make_request(2, 8, Priority::interactive, 3));
  s.add(make_request(3, 8, Priority::interactive, 3));
  p = s.schedule(at_ms(4));  // three waiting: no need to wait
  EXPECT_EQ(p.seqs.size(), 3u);
  s.update(p, fake_model(p));

  KvCacheManager kv2({.n_blocks = 64, .block_size = 16});
  SchedulerPolicy lone({.max_batch_size = 8,
                        .max_tokens_per_step = 256,
                        .min_batch_size = 3,
                        .max_wait = std::chrono::milliseconds(10),
                        .context_length = 512},
                       kv2);
  lone.add(make_request(1, 8, Priority::interactive, 0));
  EXPECT_TRUE(lone.schedule(at_ms(9)).seqs.empty());
  EXPECT_EQ(lone.schedule(at_ms(10)).seqs.size(), 1u);  // waited long enough

  KvCacheManager kv3({.n_blocks = 64, .block_size = 16});
  SchedulerPolicy eager(
      {.max_batch_size = 8, .max_tokens_per_step = 256, .min_batch_size = 3, .context_length = 512},
      kv3);
  eager.add(make_request(1, 8, Priority::interactive, 0));
  EXPECT_EQ(eager.schedule(at_ms(0)).seqs.size(), 1u);  // max_wait 0 never waits
}

TEST(SchedulerPolicy, CancelFreesKvAtOnceEvenMidStep) {
  KvCacheManager kv({.n_blocks = 64, .block_size = 16});
  SchedulerPolicy s(
      {.max_batch_size = 4, .max_tokens_per_step = 64, .prefill_chunk = 16, .context_length = 512},
      kv);
  s.add(make_request(1, 40));
  s.add(make_request(2, 8));
  s.add(make_request(3, 8));
  const StepPlan plan = s.schedule(at_ms(0));
  EXPECT_EQ(kv.n_sequences(), 3);
  EXPECT_TRUE(s.cancel(1));  // mid-step
  EXPECT_EQ(kv.n_sequences(), 2);
  EXPECT_FALSE(s.cancel(1));
  s.update(plan, fake_model(plan));  // skips request 1
  s.check_invariants();
  EXPECT_TRUE(s.cancel(2));
  s.add(make_request(4, 8));
  EXPECT_TRUE(s.cancel(4));  // while waiting
  EXPECT_EQ(s.n_waiting(), 0);
  EXPECT_TRUE(s.cancel(3));
  EXPECT_FALSE(s.has_work());
  EXPECT_EQ(kv.pool().n_used(), 0);
  EXPECT_EQ(s.stats().cancelled, 4u);
}

TEST(SchedulerPolicy, FinishesOnStopAndOnMaxNewTokens) {
  KvCacheManager kv({.n_blocks = 64, .block_size = 16});
  SchedulerPolicy s({.max_batch_size = 4, .max_tokens_per_step = 64, .context_length = 512}, kv);
  s.add(make_request(1, 5, Priority::interactive, 0, /*max_new=*/3));
  s.add(make_request(2, 5, Priority::interactive, 0, /*max_new=*/100));
  std::vector<FinishedSeq> done;
  step(s, 0, &done);
  step(s, 1, &done);
  EXPECT_TRUE(done.empty());
  StepPlan plan = s.schedule(at_ms(2));
  StepResult r = fake_model(plan);
  r.outputs[1].finished = true;  // request 2 hit EOS
  done = s.update(plan, r);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].request_id, 1);
  EXPECT_EQ(done[0].reason, FinishReason::length);
  EXPECT_EQ(done[1].request_id, 2);
  EXPECT_EQ(done[1].reason, FinishReason::stop);
  EXPECT_EQ(kv.pool().n_used(), 0);
  EXPECT_EQ(s.stats().finished, 2u);
}

TEST(SchedulerPolicy, SharedPrefixIsReusedThroughTheCache) {
  KvCacheManager kv({.n_blocks = 64, .block_size = 16});
  SchedulerPolicy s({.max_batch_size = 4, .max_tokens_per_step = 256, .context_length = 512}, kv);
  const std::vector<int32_t> system = test::prompt_tokens(40, 77);
  auto with_suffix = [&](int64_t id, int32_t n) {
    Request r = make_request(id, n, Priority::interactive, id, /*max_new=*/1);
    r.prompt.insert(r.prompt.begin(), system.begin(), system.end());
    return r;
  };
  s.add(with_suffix(1, 5));
  step(s, 1);  // prefill + one token: finished, full blocks cached
  EXPECT_FALSE(s.has_work());
  EXPECT_EQ(kv.pool().n_cached(), 2);
  s.add(with_suffix(2, 7));
  const StepPlan plan = step(s, 2);
  ASSERT_EQ(plan.seqs.size(), 1u);
  EXPECT_EQ(plan.seqs[0].n_past, 32);
  EXPECT_EQ(plan.seqs[0].tokens.size(), 47u - 32u);
  EXPECT_EQ(s.stats().prefix_hit_tokens, 32u);
  EXPECT_EQ(s.stats().prompt_tokens, 45u + 47u);
  EXPECT_NEAR(s.stats().prefix_hit_rate(), 32.0 / 92.0, 1e-12);
}

TEST(SchedulerPolicy, MisuseIsAnError) {
  KvCacheManager kv({.n_blocks = 64, .block_size = 16});
  SchedulerPolicy s(
      {.max_batch_size = 4, .max_tokens_per_step = 64, .prefill_chunk = 8, .context_length = 512},
      kv);
  s.add(make_request(1, 20));
  const StepPlan plan = s.schedule(at_ms(0));
  EXPECT_THROW(s.schedule(at_ms(1)), Error);  // previous step not updated
  StepResult wrong = fake_model(plan);
  wrong.outputs[0].token = 5;  // a token for a non-final chunk
  EXPECT_THROW(s.update(plan, wrong), Error);
  EXPECT_THROW(s.update(plan, StepResult{}), Error);
  s.update(plan, fake_model(plan));
  s.check_invariants();
  EXPECT_THROW(SchedulerPolicy({.max_batch_size = 8, .max_tokens_per_step = 4}, kv), Error);
}

}  // namespace
}  // namespace troupe

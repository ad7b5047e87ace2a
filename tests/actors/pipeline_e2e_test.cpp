// The actor pipeline end to end on the real stories260K model: 32 concurrent
// requests through 1, 2 and 3 stages give, token for token, the greedy
// output of each request run alone (Generator, no actors); so do they under
// KV pressure with preemption; cancelling half of them midway frees exactly
// their KV blocks, and the pool drains at the end.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <set>
#include <thread>

#include "pipeline_test_util.hpp"

namespace troupe {
namespace {

using test::Case;

const std::vector<Case>& cases32() {
  static const std::vector<Case> cases = test::make_cases(32);
  return cases;
}

void expect_drained(const Pipeline& p) {
  const KvSnapshot kv = p.kv_snapshot();
  EXPECT_EQ(kv.invariant_error, "");
  EXPECT_TRUE(kv.sequences.empty());
  EXPECT_EQ(kv.n_used, 0);
  EXPECT_EQ(kv.n_free + kv.n_cached, kv.n_blocks);
}

void expect_matches(const Case& c, const Completion& got, size_t i) {
  EXPECT_EQ(test::ids_of(got), c.expected) << "request " << i;
  const bool hit_eos = !c.expected.empty() && test::stories_tokenizer().is_eog(c.expected.back());
  EXPECT_EQ(got.final.reason, hit_eos ? EndReason::stop : EndReason::length) << "request " << i;
  EXPECT_EQ(got.final.completion_tokens, static_cast<int32_t>(c.expected.size()));
  EXPECT_EQ(got.final.prompt_tokens, static_cast<int32_t>(c.prompt.size()));
  EXPECT_EQ(got.text, test::continuation_text(c.prompt, c.expected)) << "request " << i;
  for (size_t k = 0; k < got.tokens.size(); ++k) EXPECT_EQ(got.tokens[k].index, static_cast<int32_t>(k));
}

void run_all_concurrently(Pipeline& p, const std::vector<Case>& cases) {
  std::vector<std::future<Completion>> runs;
  for (const Case& c : cases) runs.push_back(p.generate(c.prompt, test::greedy(c.max_new_tokens)));
  for (size_t i = 0; i < runs.size(); ++i) expect_matches(cases[i], test::wait_for(runs[i]), i);
}

class PipelineStages : public ::testing::TestWithParam<int> {};

TEST_P(PipelineStages, ConcurrentRequestsMatchEachRunAlone) {
  auto p = Pipeline::start(test::stories_config(test::split(GetParam())));
  ASSERT_EQ(p->n_stages(), GetParam());
  run_all_concurrently(*p, cases32());
  const PipelineStats s = p->stats();
  EXPECT_EQ(s.finished, 32u);
  EXPECT_EQ(s.cancelled + s.rejected, 0u);
  EXPECT_EQ(s.running + s.waiting, 0);
  expect_drained(*p);
}

TEST_P(PipelineStages, PreemptionUnderKvPressureKeepsOutputs) {
  PipelineConfig cfg = test::stories_config(test::split(GetParam()));
  cfg.n_kv_blocks = 24;  // 384 tokens for 32 requests of up to ~200 each
  cfg.scheduler.kv_watermark = 0.0;
  // Admission by first chunk (not by expected KV demand), so that the pool
  // runs out mid-generation and preemption by recompute is exercised.
  cfg.scheduler.kv_demand_fraction = 0.0;
  auto p = Pipeline::start(cfg);
  run_all_concurrently(*p, cases32());
  const PipelineStats s = p->stats();
  EXPECT_GT(s.preemptions, 0u);
  std::printf("%d stages: %llu steps, %llu admissions, %llu preemptions\n", GetParam(),
              static_cast<unsigned long long>(s.steps), static_cast<unsigned long long>(s.admitted),
              static_cast<unsigned long long>(s.preemptions));
  expect_drained(*p);
}

INSTANTIATE_TEST_SUITE_P(Stages, PipelineStages, ::testing::Values(1, 2, 3));

struct Tracked {
  std::atomic<int> tokens{0};
  std::promise<Completion> done;
  Completion got;
};

void cancel_half_midway(int n_stages, bool prefix_caching) {
  PipelineConfig cfg = test::stories_config(test::split(n_stages));
  cfg.prefix_caching = prefix_caching;
  // Before the pipeline, so that it outlives it: on an early return the
  // pipeline's destructor still runs callbacks that write into these.
  std::vector<std::unique_ptr<Tracked>> tracked;
  auto p = Pipeline::start(cfg);
  const std::vector<Case>& cases = cases32();
  const int32_t n_new = 200;
  std::vector<std::future<Completion>> futures;
  std::vector<RequestId> ids;
  for (const Case& c : cases) {
    auto t = std::make_unique<Tracked>();
    Tracked* raw = t.get();
    futures.push_back(t->done.get_future());
    GenerateParams params = test::greedy(n_new);
    params.ignore_eos = true;
    ids.push_back(p->submit(c.prompt, params,
                            {.on_token =
                                 [raw](const TokenEvent& e) {
                                   raw->got.tokens.push_back(e);
                                   ++raw->tokens;
                                 },
                             .on_final =
                                 [raw](const FinalEvent& f) {
                                   raw->got.final = f;
                                   raw->done.set_value(raw->got);
                                 }}));
    tracked.push_back(std::move(t));
  }
  // Midway: each even request is cancelled as soon as it has streamed a few
  // tokens, one at a time. (Waiting for all 32 to stream first let the early
  // ones run to their length on a fast machine, so that none was cancelled.
  // A deadline, not a count of sleeps: under the sanitizers a step of 32
  // sequences takes tens of milliseconds.)
  std::set<RequestId> cancelled;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    bool all = true;
    for (size_t i = 0; i < tracked.size(); ++i) {
      const bool started = tracked[i]->tokens >= 3;
      all = all && started;
      if (started && i % 2 == 0 && cancelled.insert(ids[i]).second) p->cancel(ids[i]);
    }
    if (all) break;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "requests did not start streaming";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // The snapshot is taken after the cancels (same sender, FIFO): their
  // blocks are gone, and what is used is exactly what the rest hold.
  const KvSnapshot kv = p->kv_snapshot();
  EXPECT_EQ(kv.invariant_error, "");
  std::set<int32_t> held;
  for (const KvSequenceBlocks& s : kv.sequences) {
    EXPECT_EQ(cancelled.count(s.id), 0u) << "cancelled request " << s.id << " still holds KV";
    held.insert(s.blocks.begin(), s.blocks.end());
  }
  EXPECT_EQ(kv.n_used, static_cast<int32_t>(held.size()));
  EXPECT_GT(kv.sequences.size(), 0u);

  for (size_t i = 0; i < cases.size(); ++i) {
    const Completion got = test::wait_for(futures[i]);
    const std::vector<int32_t> expected = test::reference(cases[i].prompt, n_new, true);
    const std::vector<int32_t> ids_got = test::ids_of(got);
    if (cancelled.count(ids[i]) != 0 && got.final.reason == EndReason::cancelled) {
      ASSERT_LE(ids_got.size(), expected.size());
      EXPECT_TRUE(std::equal(ids_got.begin(), ids_got.end(), expected.begin())) << "request " << i;
      EXPECT_EQ(got.final.error_code, Errc::cancelled);
    } else {
      EXPECT_EQ(got.final.reason, EndReason::length) << "request " << i;
      EXPECT_EQ(ids_got, expected) << "request " << i;
    }
  }
  const KvSnapshot end = p->kv_snapshot();
  EXPECT_EQ(end.n_used, 0);
  EXPECT_TRUE(end.sequences.empty());
  if (prefix_caching) {
    EXPECT_EQ(end.n_free + end.n_cached, end.n_blocks);
  } else {
    EXPECT_EQ(end.n_free, end.n_blocks);
  }
  EXPECT_GE(p->stats().cancelled, 1u);
}

TEST(PipelineCancel, HalfMidwayOneStage) { cancel_half_midway(1, true); }
TEST(PipelineCancel, HalfMidwayThreeStagesNoPrefixCache) { cancel_half_midway(3, false); }

TEST(PipelinePrefixCache, RepeatedPromptHitsTheCache) {
  auto p = Pipeline::start(test::stories_config(test::split(1)));
  const Case& c = cases32()[14];  // a long prompt
  ASSERT_GT(c.prompt.size(), 40u);
  auto first = p->generate(c.prompt, test::greedy(4));
  test::wait_for(first);
  auto again = p->generate(c.prompt, test::greedy(c.max_new_tokens));
  expect_matches(c, test::wait_for(again), 14);
  const PipelineStats s = p->stats();
  EXPECT_GE(s.prefix_hit_tokens, (c.prompt.size() - 1) / 16 * 16);
  EXPECT_GT(s.prefix_hit_rate, 0.0);
}

}  // namespace
}  // namespace troupe

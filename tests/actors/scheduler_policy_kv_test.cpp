// SchedulerPolicy when the KV pool runs out (issue 16, item 6): admission by
// KV demand, the share kept for short requests, and the bound on how often
// one sequence is preempted. The latency and throughput these produce are
// measured by scripts/starvation (docs/reliability.md, "Starvation").
#include "actors/scheduler_policy.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>

#include "scheduler_test_util.hpp"

namespace troupe {
namespace {

using test::at_ms;
using test::fake_model;
using test::make_request;

// The load in small: long requests (a short prompt, many output
// tokens) that together need several times the pool.
struct Load {
  int32_t n_long = 12;
  int32_t n_prompt = 4;
  int32_t max_new = 60;
};

struct KvOutcome {
  uint64_t preemptions = 0;
  uint64_t finished = 0;
  int32_t max_running = 0;
  std::map<int64_t, int32_t> preempted;  // per request
  int64_t steps = 0;
  int64_t tokens_fed = 0;  // prompt, recompute and decode tokens
};

// 16 blocks of 4 tokens = 64 tokens; each long request needs 64 / 4 = 16
// tokens... at 4 + 60 = 64 tokens, a whole pool at the end.
SchedulerConfig config(double demand_fraction) {
  return {.max_batch_size = 8,
          .max_tokens_per_step = 64,
          .prefill_chunk = 16,
          .context_length = 128,
          .kv_watermark = 0.0,
          .kv_demand_fraction = demand_fraction,
          .short_request_tokens = 16,
          .short_kv_share = 0.0,
          .short_batch_share = 0.0};
}

KvOutcome run(SchedulerPolicy& s, const Load& load, int64_t max_steps = 10000) {
  for (int64_t id = 1; id <= load.n_long; ++id) {
    EXPECT_EQ(s.add(make_request(id, load.n_prompt, Priority::interactive, 0, load.max_new)), AddStatus::accepted);
  }
  KvOutcome o;
  while (s.has_work() && o.steps < max_steps) {
    StepPlan plan = s.schedule(at_ms(o.steps));
    for (const int64_t id : plan.preempted) ++o.preempted[id];
    o.tokens_fed += plan.n_tokens();
    s.update(plan, fake_model(plan));
    s.check_invariants();
    o.max_running = std::max(o.max_running, s.n_running());
    ++o.steps;
  }
  o.preemptions = s.stats().preemptions;
  o.finished = s.stats().finished;
  return o;
}

TEST(SchedulerPolicyKv, DemandAdmissionNeverPreemptsWhereFirstChunkAdmissionThrashes) {
  const Load load{.n_long = 12, .n_prompt = 4, .max_new = 28};  // 32 tokens = 8 blocks each
  KvCacheManager kv_old({.n_blocks = 24, .block_size = 4});
  SchedulerPolicy first_chunk(config(0.0), kv_old);
  const KvOutcome old_way = run(first_chunk, load);
  KvCacheManager kv_new({.n_blocks = 24, .block_size = 4});
  SchedulerPolicy demand(config(1.0), kv_new);
  const KvOutcome new_way = run(demand, load);

  EXPECT_EQ(old_way.finished, 12u);
  EXPECT_EQ(new_way.finished, 12u);
  // Admitting on the first chunk alone admits 8 (the batch), which then
  // preempt each other as they grow.
  EXPECT_GT(old_way.preemptions, 4u);
  // Admitting on demand runs 3 at once (3 x 8 blocks), none preempted.
  EXPECT_EQ(new_way.preemptions, 0u);
  EXPECT_EQ(new_way.max_running, 3);
  // No work is thrown away: every token is fed once (prompt + output - the
  // last sampled token), where the old way recomputes.
  EXPECT_EQ(new_way.tokens_fed, 12 * (4 + 28 - 1));
  EXPECT_GT(old_way.tokens_fed, new_way.tokens_fed);
}

TEST(SchedulerPolicyKv, APartialDemandFractionAdmitsMoreAndBoundsPreemption) {
  const Load load{.n_long = 12, .n_prompt = 4, .max_new = 28};
  KvCacheManager kv({.n_blocks = 24, .block_size = 4});
  SchedulerConfig c = config(0.5);  // 4 + 14 = 18 tokens = 5 blocks each
  c.max_preemptions = 1;
  SchedulerPolicy s(c, kv);
  const KvOutcome o = run(s, load);
  EXPECT_EQ(o.finished, 12u);
  EXPECT_GE(o.max_running, 4);  // more than the full demand allows (3)
  // Each sequence is a victim at most max_preemptions times: the others
  // are taken first.
  for (const auto& [id, n] : o.preempted) EXPECT_LE(n, 1) << "request " << id;
  EXPECT_LE(o.preemptions, o.finished);  // at most one per finished request
}

TEST(SchedulerPolicyKv, ASequencePreemptedTwiceIsTakenOnlyWhenNoOtherCan) {
  // First-chunk admission on a pool far too small: without the bound one
  // unlucky request is the newest again and again; with max_preemptions 2
  // no request is a victim more than twice while others could be.
  auto most_preempted = [](int32_t max_preemptions) {
    KvCacheManager kv({.n_blocks = 12, .block_size = 4});
    SchedulerConfig c = config(0.0);
    c.max_batch_size = 6;
    c.max_preemptions = max_preemptions;
    SchedulerPolicy s(c, kv);
    const KvOutcome o = run(s, {.n_long = 10, .n_prompt = 4, .max_new = 20});
    EXPECT_EQ(o.finished, 10u);
    int32_t most = 0;
    for (const auto& [id, n] : o.preempted) most = std::max(most, n);
    return std::make_pair(most, o.preemptions);
  };
  const auto [most_unbounded, total_unbounded] = most_preempted(1000);
  const auto [most_bounded, total_bounded] = most_preempted(2);
  EXPECT_GT(most_unbounded, 2);
  EXPECT_LE(most_bounded, 2);
  std::printf("preemptions: unbounded %llu (at most %d of one), bounded %llu (at most %d)\n",
              static_cast<unsigned long long>(total_unbounded), most_unbounded,
              static_cast<unsigned long long>(total_bounded), most_bounded);
}

TEST(SchedulerPolicyKv, AShortRequestRunsAtOnceWhileLongOnesWaitForKv) {
  // The pool is full of long requests' demand and more long ones wait; a
  // short request that arrives later is admitted in the next step, from the
  // share kept for short requests, without a preemption.
  KvCacheManager kv({.n_blocks = 40, .block_size = 4});
  SchedulerConfig c = config(1.0);
  c.short_kv_share = 0.1;  // 4 blocks
  SchedulerPolicy s(c, kv);
  for (int64_t id = 1; id <= 10; ++id) s.add(make_request(id, 4, Priority::interactive, 0, 60));  // 16 blocks each
  for (int64_t t = 0; t < 5; ++t) {
    const StepPlan p = s.schedule(at_ms(t));
    s.update(p, fake_model(p));
  }
  EXPECT_EQ(s.n_running(), 2);  // 2 x 16 + 4 kept <= 40 < 3 x 16
  EXPECT_EQ(s.n_waiting(), 8);
  s.add(make_request(100, 4, Priority::interactive, 5, 8));  // 12 tokens: short
  const StepPlan p = s.schedule(at_ms(6));
  const auto it = std::find_if(p.seqs.begin(), p.seqs.end(), [](const ScheduledSeq& e) { return e.request_id == 100; });
  ASSERT_NE(it, p.seqs.end()) << "the short request waited behind the long ones";
  EXPECT_TRUE(it->first_chunk);
  EXPECT_TRUE(p.preempted.empty());
  s.update(p, fake_model(p));
  s.check_invariants();
  EXPECT_EQ(s.n_waiting(), 8);  // no long one took the short share
}

TEST(SchedulerPolicyKv, WithoutTheShortShareTheShortRequestWaits) {
  // The same load with no share kept and FIFO order: the short request
  // waits behind the long ones (what the share is for).
  KvCacheManager kv({.n_blocks = 48, .block_size = 4});
  SchedulerConfig c = config(1.0);
  c.short_request_tokens = 0;  // nobody is short
  SchedulerPolicy s(c, kv);
  for (int64_t id = 1; id <= 10; ++id) s.add(make_request(id, 4, Priority::interactive, 0, 60));
  for (int64_t t = 0; t < 5; ++t) {
    const StepPlan p = s.schedule(at_ms(t));
    s.update(p, fake_model(p));
  }
  EXPECT_EQ(s.n_running(), 3);  // 3 x 16 = 48
  s.add(make_request(100, 4, Priority::interactive, 5, 8));
  const StepPlan p = s.schedule(at_ms(6));
  EXPECT_TRUE(std::none_of(p.seqs.begin(), p.seqs.end(), [](const ScheduledSeq& e) { return e.request_id == 100; }));
  s.update(p, fake_model(p));
}

TEST(SchedulerPolicyKv, LongRequestsLeaveBatchSlotsToShortOnes) {
  KvCacheManager kv({.n_blocks = 400, .block_size = 4});
  SchedulerConfig c = config(1.0);
  c.short_batch_share = 0.25;  // 2 of 8 slots
  SchedulerPolicy s(c, kv);
  for (int64_t id = 1; id <= 10; ++id) s.add(make_request(id, 4, Priority::interactive, 0, 60));
  for (int64_t t = 0; t < 3; ++t) {
    const StepPlan p = s.schedule(at_ms(t));
    s.update(p, fake_model(p));
  }
  EXPECT_EQ(s.n_running(), 6);
  s.add(make_request(100, 2, Priority::interactive, 3, 4));
  s.add(make_request(101, 2, Priority::interactive, 3, 4));
  const StepPlan p = s.schedule(at_ms(4));
  s.update(p, fake_model(p));
  EXPECT_TRUE(s.is_running(100));
  EXPECT_TRUE(s.is_running(101));
  EXPECT_EQ(s.n_running(), 8);
}

TEST(SchedulerPolicyKv, WaitingDemandAndOutstandingBlocks) {
  KvCacheManager kv({.n_blocks = 64, .block_size = 4});
  SchedulerPolicy s(config(1.0), kv);
  s.add(make_request(1, 4, Priority::interactive, 0, 12));  // 16 tokens: 4 blocks
  EXPECT_EQ(s.kv_waiting_demand_blocks(), 4);
  const StepPlan p = s.schedule(at_ms(0));
  s.update(p, fake_model(p));
  // Holds 2 blocks (5 tokens: 4 + the one sampled... reserved for 4); may need 4.
  EXPECT_EQ(s.kv_waiting_demand_blocks(), 0);
  EXPECT_EQ(s.kv_outstanding_blocks(), 4 - static_cast<int32_t>(kv.block_table(1).size()));
}

// Requests that stop (EOS) long before max_new_tokens teach the policy to
// expect them to use a small share of it: more run at once than their
// max_new_tokens would allow; a longer output puts the share back up at once.
TEST(SchedulerPolicyKv, LearnsTheExpectedOutputFromFinishedRequests) {
  KvCacheManager kv({.n_blocks = 40, .block_size = 4});
  SchedulerPolicy s(config(1.0), kv);
  auto stop_at = [](int32_t n_out) {
    return [n_out](const StepPlan& plan) {
      StepResult r = fake_model(plan);
      for (size_t i = 0; i < plan.seqs.size(); ++i) {
        const ScheduledSeq& e = plan.seqs[i];
        // Position of the sampled token minus the prompt (4): its index.
        if (e.need_logits && e.n_past + static_cast<int32_t>(e.tokens.size()) - 4 >= n_out) r.outputs[i].finished = true;
      }
      return r;
    };
  };
  EXPECT_LT(s.output_fraction(), 0);
  // max_new 120: 4 + 120 = 31 blocks each; one at a time while nothing
  // has finished.
  int64_t t = 0;
  for (int64_t id = 1; id <= 2; ++id) s.add(make_request(id, 4, Priority::interactive, 0, 120));
  while (s.stats().finished == 0) {
    const StepPlan p = s.schedule(at_ms(t++));
    s.update(p, stop_at(8)(p));
    EXPECT_LE(s.n_running(), 1);
  }
  EXPECT_NEAR(s.output_fraction(), 8.0 / 120, 1.0 / 120);
  // Now 4 + 9 = 4 blocks each: eight run at once (the batch).
  for (int64_t id = 10; id < 20; ++id) s.add(make_request(id, 4, Priority::interactive, t, 120));
  const StepPlan p = s.schedule(at_ms(t++));
  s.update(p, fake_model(p));
  EXPECT_EQ(s.n_running(), 8);
  // A long output lifts the estimate to it at once.
  while (s.has_work()) {
    const StepPlan q = s.schedule(at_ms(t++));
    s.update(q, stop_at(40)(q));
    s.check_invariants();
  }
  EXPECT_GE(s.output_fraction(), 39.0 / 120);
}

TEST(SchedulerPolicyKv, RejectsBadKvSettings) {
  KvCacheManager kv({.n_blocks = 8, .block_size = 4});
  SchedulerConfig c = config(1.0);
  c.kv_demand_fraction = 1.5;
  EXPECT_THROW(SchedulerPolicy(c, kv), Error);
  c = config(1.0);
  c.short_kv_share = 1.0;
  EXPECT_THROW(SchedulerPolicy(c, kv), Error);
  c = config(1.0);
  c.max_preemptions = -1;
  EXPECT_THROW(SchedulerPolicy(c, kv), Error);
}

}  // namespace
}  // namespace troupe

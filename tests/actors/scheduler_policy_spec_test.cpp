// SchedulerPolicy with speculative decoding (prompt lookup): proposals fed
// after a decode's token, accepted prefixes committed and the rest of the
// reserved pages returned, output identical to one-token decoding under a
// greedy target, lengths never passed, and the number proposed adapting to
// the acceptance rate.
#include "actors/scheduler_policy.hpp"

#include <gtest/gtest.h>

#include <map>

#include "scheduler_test_util.hpp"

namespace troupe {
namespace {

using test::at_ms;

constexpr int32_t kPeriod = 5;

// A deterministic greedy "model": the token at position pos of request id.
// Pattern tokens repeat with period 5, broken by 99 every `break_every`
// positions, so prompt lookup is right most of the time but not always.
int32_t target_token(int64_t id, int32_t pos, int32_t break_every) {
  if (break_every > 0 && pos % break_every == 0) return 99;
  return static_cast<int32_t>(10 * id + pos % kPeriod);
}

std::vector<int32_t> pattern_prompt(int64_t id, int32_t n) {
  std::vector<int32_t> p;
  for (int32_t pos = 0; pos < n; ++pos) p.push_back(static_cast<int32_t>(10 * id + pos % kPeriod));
  return p;
}

// Answers a plan as a greedy target would verify it: row j of an entry
// with proposals predicts position n_past + j + 1; proposals are accepted
// while they equal the target's tokens, then the target's own token.
StepResult verify(const StepPlan& plan, int32_t break_every) {
  StepResult r;
  for (const ScheduledSeq& e : plan.seqs) {
    SeqOutput o{.request_id = e.request_id};
    if (e.need_logits) {
      const int32_t first = e.n_past + static_cast<int32_t>(e.tokens.size()) - e.n_draft;  // position after the fed token
      int32_t j = 0;
      while (j < e.n_draft && e.tokens[e.tokens.size() - static_cast<size_t>(e.n_draft - j)] ==
                                  target_token(e.request_id, first + j, break_every)) {
        o.accepted.push_back(e.tokens[e.tokens.size() - static_cast<size_t>(e.n_draft - j)]);
        ++j;
      }
      o.token = target_token(e.request_id, first + j, break_every);
    }
    r.outputs.push_back(std::move(o));
  }
  return r;
}

SchedulerConfig draft_config(int32_t max_draft) {
  return {.max_batch_size = 8,
          .max_tokens_per_step = 128,
          .prefill_chunk = 16,
          .context_length = 256,
          .kv_watermark = 0.0,
          .spec_max_draft = max_draft};
}

struct SpecOutcome {
  std::map<int64_t, std::vector<int32_t>> outputs;
  int64_t steps = 0;
};

SpecOutcome run(SchedulerPolicy& s, KvCacheManager& kv, int32_t break_every) {
  SpecOutcome out;
  while (s.has_work() && out.steps < 5000) {
    const StepPlan plan = s.schedule(at_ms(out.steps));
    if (plan.step == 0) break;
    ++out.steps;
    for (const ScheduledSeq& e : plan.seqs) {
      // The plan's table covers every fed token, proposals included.
      EXPECT_GE(static_cast<int32_t>(e.block_table.size()) * kv.block_size(),
                e.n_past + static_cast<int32_t>(e.tokens.size()));
      EXPECT_EQ(e.n_logits(), e.need_logits ? 1 + e.n_draft : 0);
    }
    const StepResult result = verify(plan, break_every);
    for (const SeqOutput& o : result.outputs) {
      std::vector<int32_t>& got = out.outputs[o.request_id];
      got.insert(got.end(), o.accepted.begin(), o.accepted.end());
      if (o.token) got.push_back(*o.token);
    }
    s.update(plan, result);
    s.check_invariants();
    // Rejected proposals' pages went back: each table is as short as its tokens allow.
    for (const auto& [id, got] : out.outputs) {
      if (kv.contains(id)) {
        EXPECT_EQ(kv.block_table(id).size(), static_cast<size_t>(kv.n_blocks_needed(kv.n_tokens(id))));
      }
    }
  }
  return out;
}

TEST(SchedulerSpeculative, OutputEqualsOneTokenDecodingAndStepsAreFewer) {
  for (const int32_t break_every : {0, 7}) {
    SCOPED_TRACE("break every " + std::to_string(break_every));
    std::map<int64_t, std::vector<int32_t>> plain_out;
    int64_t plain_steps = 0;
    for (const int32_t max_draft : {0, 4}) {
      KvCacheManager kv({.n_blocks = 64, .block_size = 4});
      SchedulerPolicy s(draft_config(max_draft), kv);
      for (int64_t id = 1; id <= 4; ++id) {
        ASSERT_EQ(s.add({.id = id, .prompt = pattern_prompt(id, 12), .max_new_tokens = 37 + static_cast<int32_t>(id)}),
                  AddStatus::accepted);
      }
      const SpecOutcome r = run(s, kv, break_every);
      EXPECT_FALSE(s.has_work());
      EXPECT_EQ(kv.pool().n_used(), 0);
      for (int64_t id = 1; id <= 4; ++id) {
        const std::vector<int32_t>& got = r.outputs.at(id);
        ASSERT_EQ(got.size(), static_cast<size_t>(37 + id)) << "request " << id;  // max_new_tokens, never past
        for (size_t k = 0; k < got.size(); ++k) {
          ASSERT_EQ(got[k], target_token(id, 12 + static_cast<int32_t>(k), break_every)) << "request " << id << " token " << k;
        }
      }
      if (max_draft == 0) {
        plain_out = r.outputs;
        plain_steps = r.steps;
        EXPECT_EQ(s.stats().spec_proposed, 0u);
      } else {
        EXPECT_EQ(r.outputs, plain_out);
        EXPECT_GT(s.stats().spec_accepted, 0u);
        EXPECT_LE(s.stats().spec_accepted, s.stats().spec_proposed);
        // Every proposal right: under half the steps; one in 7 positions
        // wrong: still under three quarters.
        EXPECT_LT(r.steps * (break_every == 0 ? 2 : 4), plain_steps * (break_every == 0 ? 1 : 3))
            << r.steps << " steps against " << plain_steps;
      }
    }
  }
}

TEST(SchedulerSpeculative, ProposalsFadeWhenNeverAccepted) {
  // A verifier that accepts nothing (the output still follows the pattern,
  // so lookup keeps finding proposals): k falls to 0, with a probe of one
  // token every 16 steps.
  KvCacheManager kv({.n_blocks = 64, .block_size = 4});
  SchedulerPolicy s(draft_config(4), kv);
  ASSERT_EQ(s.add({.id = 1, .prompt = pattern_prompt(1, 12), .max_new_tokens = 200}), AddStatus::accepted);
  int64_t steps = 0;
  uint64_t proposed_at_half = 0;
  while (s.has_work()) {
    const StepPlan plan = s.schedule(at_ms(steps));
    StepResult r;
    for (const ScheduledSeq& e : plan.seqs) {
      SeqOutput o{.request_id = e.request_id};
      const int32_t next = e.n_past + static_cast<int32_t>(e.tokens.size()) - e.n_draft;
      if (e.need_logits) o.token = target_token(e.request_id, next, 0);
      r.outputs.push_back(o);
    }
    s.update(plan, r);
    if (++steps == 100) proposed_at_half = s.stats().spec_proposed;
  }
  EXPECT_EQ(s.stats().spec_accepted, 0u);
  EXPECT_GT(proposed_at_half, 0u);
  // The second 100 steps: the probes only.
  EXPECT_LE(s.stats().spec_proposed - proposed_at_half, 100u / 16 + 1);
}

TEST(SchedulerSpeculative, ProposalsNeverPreemptAndACancelledStepFreesEverything) {
  // A pool just big enough for the two sequences' real tokens: proposals
  // that do not fit are dropped, nobody is preempted for them.
  KvCacheManager kv({.n_blocks = 12, .block_size = 4});
  SchedulerConfig c = draft_config(8);
  c.context_length = 24;
  SchedulerPolicy s(c, kv);
  ASSERT_EQ(s.add({.id = 1, .prompt = pattern_prompt(1, 10), .max_new_tokens = 13}), AddStatus::accepted);
  ASSERT_EQ(s.add({.id = 2, .prompt = pattern_prompt(2, 10), .max_new_tokens = 13}), AddStatus::accepted);
  const SpecOutcome r = run(s, kv, 0);
  EXPECT_EQ(s.stats().preemptions, 0u);
  EXPECT_EQ(r.outputs.at(1).size(), 13u);
  EXPECT_EQ(r.outputs.at(2).size(), 13u);

  // Cancelled while its speculative step is in flight.
  ASSERT_EQ(s.add({.id = 3, .prompt = pattern_prompt(3, 10), .max_new_tokens = 10}), AddStatus::accepted);
  StepPlan plan = s.schedule(at_ms(0));
  s.update(plan, verify(plan, 0));  // prefill
  plan = s.schedule(at_ms(1));
  ASSERT_EQ(plan.seqs.size(), 1u);
  EXPECT_GT(plan.seqs[0].n_draft, 0);
  EXPECT_TRUE(s.cancel(3));
  s.update(plan, verify(plan, 0));
  s.check_invariants();
  EXPECT_EQ(kv.pool().n_used(), 0);
}

TEST(SchedulerSpeculative, AScoredPromptIsComputedInFullWithARowPerToken) {
  KvCacheManager kv({.n_blocks = 64, .block_size = 4});
  SchedulerConfig c = draft_config(0);
  c.score_chunk = 8;
  SchedulerPolicy s(c, kv);
  // Put the prompt in the prefix cache first.
  ASSERT_EQ(s.add({.id = 1, .prompt = pattern_prompt(1, 20), .max_new_tokens = 1}), AddStatus::accepted);
  run(s, kv, 0);
  ASSERT_EQ(s.add({.id = 2, .prompt = pattern_prompt(1, 20), .max_new_tokens = 1, .score_prompt = true}),
            AddStatus::accepted);
  int32_t fed = 0;
  while (s.has_work()) {
    const StepPlan plan = s.schedule(at_ms(0));
    ASSERT_EQ(plan.seqs.size(), 1u);
    const ScheduledSeq& e = plan.seqs[0];
    EXPECT_EQ(e.n_past, fed);  // from position 0: no cached prefix
    EXPECT_LE(e.tokens.size(), 8u);
    EXPECT_TRUE(e.score_prompt);
    EXPECT_EQ(e.n_logits(), static_cast<int32_t>(e.tokens.size()));
    fed += static_cast<int32_t>(e.tokens.size());
    s.update(plan, verify(plan, 0));
  }
  EXPECT_EQ(fed, 20);
}

}  // namespace
}  // namespace troupe

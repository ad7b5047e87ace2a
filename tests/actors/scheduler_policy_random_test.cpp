// SchedulerPolicy under random load (fixed seeds): arrivals of random length
// and priority, a fake model that samples random tokens and stops at random,
// cancellations. After every step: KV accounting exact, budgets respected,
// decodes never skipped, fed tokens equal to each request's history,
// preemption never taking an interactive request while a batch one runs; at
// the end every request finished, was cancelled or was rejected.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "actors/scheduler_policy.hpp"
#include "scheduler_test_util.hpp"

namespace troupe {
namespace {

struct Counts {
  uint64_t preempted_interactive = 0;
  uint64_t preempted_batch = 0;
  uint64_t chunks = 0;  // prefill entries that were not the last chunk
  uint64_t queue_full = 0;
  uint64_t admitted_batch = 0;
  uint64_t admitted_interactive = 0;
};

class RandomRun {
 public:
  RandomRun(const SchedulerConfig& cfg, const KvCacheOptions& kvo, uint32_t seed)
      : cfg_(cfg), kv_(kvo), policy_(cfg, kv_), rng_(seed) {
    for (int i = 0; i < 3; ++i) {
      prefixes_.push_back(test::prompt_tokens(20 + 10 * i, 1000 + i));
    }
  }

  void run(int n_ops) {
    for (int op = 0; op < n_ops; ++op) {
      now_ms_ += 1;
      const uint32_t r = rng_() % 10;
      if (r < 3) {
        add();
      } else if (r == 3) {
        cancel_random();
      } else {
        step();
      }
      if (::testing::Test::HasFatalFailure()) return;
    }
    // Drain: no arrivals; the policy must finish everything in bounded steps.
    int steps = 0;
    while (policy_.has_work() && steps < 20000) {
      now_ms_ += 1;
      step();
      ++steps;
      if (::testing::Test::HasFatalFailure()) return;
    }
    ASSERT_FALSE(policy_.has_work()) << "no progress after " << steps << " drain steps";
    for (const int64_t id : added_) {
      const int outcomes =
          static_cast<int>(finished_.count(id) + rejected_.count(id) + cancelled_.count(id));
      EXPECT_EQ(outcomes, 1) << "request " << id;
    }
    EXPECT_EQ(kv_.n_sequences(), 0);
    EXPECT_EQ(kv_.pool().n_used(), 0);
    EXPECT_EQ(kv_.pool().n_free() + kv_.pool().n_cached(), kv_.pool().n_blocks());
  }

  const SchedulerPolicy& policy() const { return policy_; }
  const Counts& counts() const { return counts_; }
  size_t n_rejected() const { return rejected_.size(); }

 private:
  void add() {
    const int64_t id = next_id_++;
    std::vector<int32_t> prompt;
    if (rng_() % 2 == 0) prompt = prefixes_[rng_() % prefixes_.size()];
    const int32_t max_len = policy_.max_total_tokens() + 8;  // some can never fit
    const int32_t len = 1 + static_cast<int32_t>(rng_() % static_cast<uint32_t>(max_len));
    prompt.resize(std::min<size_t>(prompt.size(), static_cast<size_t>(len)));
    while (static_cast<int32_t>(prompt.size()) < len)
      prompt.push_back(static_cast<int32_t>(rng_() % 500));
    const Priority p = rng_() % 3 == 0 ? Priority::batch : Priority::interactive;
    Request req{.id = id,
                .prompt = prompt,
                .max_new_tokens = 1 + static_cast<int32_t>(rng_() % 40),
                .priority = p,
                .arrival = test::at_ms(now_ms_)};
    const AddStatus st = policy_.add(std::move(req));
    if (st == AddStatus::queue_full) {
      ++counts_.queue_full;
      return;
    }
    ASSERT_EQ(st, AddStatus::accepted);
    added_.insert(id);
    history_[id] = prompt;
    priority_[id] = p;
  }

  void forget(int64_t id) {
    history_.erase(id);
    decoding_.erase(id);
    next_pos_.erase(id);
  }

  void cancel_random() {
    if (history_.empty()) return;
    auto it = history_.begin();
    std::advance(it, static_cast<long>(rng_() % history_.size()));
    const int64_t id = it->first;
    ASSERT_TRUE(policy_.cancel(id));
    EXPECT_FALSE(kv_.contains(id)) << "cancel must free KV at once";
    cancelled_.insert(id);
    forget(id);
  }

  void step() {
    const StepPlan plan = policy_.schedule(test::at_ms(now_ms_));
    for (const RejectedRequest& r : plan.rejected) {
      ASSERT_TRUE(added_.count(r.request_id)) << r.request_id;
      ASSERT_TRUE(rejected_.insert(r.request_id).second);
      ASSERT_FALSE(r.reason.empty());
      forget(r.request_id);
    }
    check_plan(plan);
    if (::testing::Test::HasFatalFailure() || plan.step == 0) return;

    StepResult result;
    for (const ScheduledSeq& e : plan.seqs) {
      SeqOutput o{.request_id = e.request_id};
      if (e.need_logits) {
        o.token = static_cast<int32_t>(rng_() % 500);
        o.finished = rng_() % 25 == 0;
      } else {
        o.finished = rng_() % 300 == 0;  // aborted mid-prefill
      }
      result.outputs.push_back(o);
    }
    // Now and then a request is cancelled while its step runs.
    if (rng_() % 40 == 0) {
      const int64_t id = plan.seqs[rng_() % plan.seqs.size()].request_id;
      ASSERT_TRUE(policy_.cancel(id));
      cancelled_.insert(id);
      forget(id);
    }
    const std::vector<FinishedSeq> done = policy_.update(plan, result);
    std::set<int64_t> done_ids;
    for (const FinishedSeq& f : done) done_ids.insert(f.request_id);
    decoding_.clear();
    for (size_t i = 0; i < plan.seqs.size(); ++i) {
      const ScheduledSeq& e = plan.seqs[i];
      if (!history_.count(e.request_id)) continue;  // cancelled mid-step
      if (result.outputs[i].token) history_[e.request_id].push_back(*result.outputs[i].token);
      next_pos_[e.request_id] = e.n_past + static_cast<int32_t>(e.tokens.size());
      ASSERT_EQ(done_ids.count(e.request_id) != 0, !policy_.is_running(e.request_id));
      if (done_ids.count(e.request_id)) {
        const int32_t n_total = static_cast<int32_t>(history_[e.request_id].size());
        ASSERT_LE(n_total, policy_.max_total_tokens());
        finished_.insert(e.request_id);
        forget(e.request_id);
      } else if (e.need_logits) {
        decoding_.insert(e.request_id);
      }
    }
    check_state();
  }

  void check_plan(const StepPlan& plan) {
    ASSERT_LE(static_cast<int32_t>(plan.seqs.size()), cfg_.max_batch_size);
    ASSERT_LE(plan.n_tokens(), cfg_.max_tokens_per_step);
    std::set<int64_t> in_plan;
    for (const ScheduledSeq& e : plan.seqs) {
      ASSERT_TRUE(in_plan.insert(e.request_id).second) << "scheduled twice";
      ASSERT_TRUE(history_.count(e.request_id));
      const std::vector<int32_t>& h = history_[e.request_id];
      const int32_t n = static_cast<int32_t>(e.tokens.size());
      ASSERT_GE(n, 1);
      ASSERT_LE(e.n_past + n, static_cast<int32_t>(h.size()));
      ASSERT_TRUE(std::equal(e.tokens.begin(), e.tokens.end(), h.begin() + e.n_past))
          << "request " << e.request_id << " fed tokens that are not its history";
      ASSERT_EQ(e.need_logits, e.n_past + n == static_cast<int32_t>(h.size()));
      if (e.is_prefill && cfg_.chunked_prefill) {
        ASSERT_LE(n, cfg_.prefill_chunk);
      }
      if (!e.is_prefill) {
        ASSERT_EQ(n, 1);
      }
      if (e.first_chunk) {
        ASSERT_EQ(e.n_past % kv_.block_size(), 0);
      } else {
        ASSERT_EQ(e.n_past, next_pos_[e.request_id]) << "request " << e.request_id << " skipped";
      }
      ASSERT_GE(static_cast<int64_t>(e.block_table.size()) * kv_.block_size(), e.n_past + n);
      if (e.is_prefill && !e.need_logits) ++counts_.chunks;
      if (e.first_chunk) {
        ++(priority_[e.request_id] == Priority::interactive ? counts_.admitted_interactive
                                                            : counts_.admitted_batch);
      }
    }
    std::set<int64_t> preempted(plan.preempted.begin(), plan.preempted.end());
    for (const int64_t id : plan.preempted) {
      ASSERT_FALSE(in_plan.count(id));
      ASSERT_TRUE(policy_.is_waiting(id));
      ++(priority_[id] == Priority::interactive ? counts_.preempted_interactive
                                                : counts_.preempted_batch);
      if (priority_[id] == Priority::interactive) {
        for (const auto& [other, h] : history_) {
          if (priority_[other] == Priority::batch) {
            ASSERT_FALSE(policy_.is_running(other))
                << "interactive " << id << " preempted while batch " << other << " runs";
          }
        }
      }
    }
    // Running decodes stream every step unless preempted.
    for (const int64_t id : decoding_) {
      ASSERT_TRUE(in_plan.count(id) || preempted.count(id)) << "decode of " << id << " skipped";
    }
  }

  void check_state() {
    policy_.check_invariants();
    std::map<int32_t, int32_t> holders;
    for (const auto& [id, h] : history_) {
      if (!policy_.is_running(id)) {
        ASSERT_FALSE(kv_.contains(id));
        continue;
      }
      ASSERT_LT(static_cast<int32_t>(h.size()), policy_.max_total_tokens());
      for (const int32_t b : kv_.block_table(id)) ++holders[b];
    }
    for (int32_t b = 0; b < kv_.pool().n_blocks(); ++b) {
      const auto it = holders.find(b);
      ASSERT_EQ(kv_.pool().ref_count(b), it == holders.end() ? 0 : it->second) << "block " << b;
    }
    ASSERT_EQ(static_cast<int32_t>(holders.size()) + kv_.pool().n_free() + kv_.pool().n_cached(),
              kv_.pool().n_blocks());
  }

  SchedulerConfig cfg_;
  KvCacheManager kv_;
  SchedulerPolicy policy_;
  std::mt19937 rng_;
  std::vector<std::vector<int32_t>> prefixes_;
  int64_t now_ms_ = 0;
  int64_t next_id_ = 1;
  std::set<int64_t> added_, finished_, rejected_, cancelled_;
  std::map<int64_t, std::vector<int32_t>> history_;  // live: prompt + sampled
  std::map<int64_t, Priority> priority_;
  std::map<int64_t, int32_t> next_pos_;
  std::set<int64_t> decoding_;
  Counts counts_;
};

TEST(SchedulerPolicyRandom, ChunkedUnderKvPressure) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE(seed);
    RandomRun run({.max_batch_size = 8,
                   .max_tokens_per_step = 48,
                   .prefill_chunk = 16,
                   .max_waiting = 24,
                   .context_length = 160,
                   .kv_watermark = 0.05,
                   .level_bounds = {16, 64},
                   .level_aging = std::chrono::milliseconds(30),
                   // Admission on the first chunk only: preemption is what is tested.
                   .kv_demand_fraction = 0.0},
                  {.n_blocks = 48, .block_size = 4}, seed);
    run.run(2000);
    if (::testing::Test::HasFatalFailure()) return;
    const SchedulerStats& st = run.policy().stats();
    EXPECT_GT(st.preemptions, 0u);
    // Both kinds get preempted (interactive ones by each other when no batch
    // request runs: check_plan asserts that after every step).
    EXPECT_GT(run.counts().preempted_batch, 0u);
    EXPECT_GT(run.counts().preempted_interactive, 0u);
    EXPECT_GT(run.counts().admitted_batch, 0u);
    EXPECT_GT(run.counts().chunks, 0u);
    EXPECT_GT(st.prefix_hit_tokens, 0u);
    EXPECT_GT(run.n_rejected(), 0u);
  }
}

TEST(SchedulerPolicyRandom, WholePromptsWithBatchingDelay) {
  for (uint32_t seed : {4u, 5u}) {
    SCOPED_TRACE(seed);
    RandomRun run({.max_batch_size = 6,
                   .max_tokens_per_step = 256,
                   .chunked_prefill = false,
                   .min_batch_size = 3,
                   .max_wait = std::chrono::milliseconds(5),
                   .max_waiting = 32,
                   .context_length = 200,
                   .kv_watermark = 0.02,
                   .kv_demand_fraction = 0.0},
                  {.n_blocks = 64, .block_size = 8}, seed);
    run.run(2000);
    if (::testing::Test::HasFatalFailure()) return;
    EXPECT_EQ(run.counts().chunks, 0u);
    EXPECT_GT(run.policy().stats().steps, 100u);
  }
}

TEST(SchedulerPolicyRandom, TinyCacheManyPreemptions) {
  for (uint32_t seed : {6u, 7u}) {
    SCOPED_TRACE(seed);
    RandomRun run({.max_batch_size = 4,
                   .max_tokens_per_step = 16,
                   .prefill_chunk = 5,
                   .max_waiting = 16,
                   .context_length = 64,
                   .kv_watermark = 0.0,
                   .kv_demand_fraction = 0.0},
                  {.n_blocks = 10, .block_size = 4}, seed);
    run.run(2000);
    if (::testing::Test::HasFatalFailure()) return;
    EXPECT_GT(run.policy().stats().preemptions, 10u);
  }
}

// The same pressure with admission by KV demand (the default): every check
// of check_plan still holds, and within one engine nothing is preempted.
TEST(SchedulerPolicyRandom, DemandAdmissionUnderKvPressureNeverPreempts) {
  for (uint32_t seed : {1u, 2u, 3u, 6u}) {
    SCOPED_TRACE(seed);
    RandomRun run({.max_batch_size = 8,
                   .max_tokens_per_step = 48,
                   .prefill_chunk = 16,
                   .max_waiting = 24,
                   .context_length = 160,
                   .kv_watermark = 0.05,
                   .level_bounds = {16, 64},
                   .level_aging = std::chrono::milliseconds(30),
                   .short_request_tokens = 40,
                   .short_kv_share = 0.1,
                   .short_batch_share = 0.25},
                  {.n_blocks = 48, .block_size = 4}, seed);
    run.run(2000);
    if (::testing::Test::HasFatalFailure()) return;
    EXPECT_EQ(run.policy().stats().preemptions, 0u);
    EXPECT_GT(run.policy().stats().finished, 50u);
  }
}

}  // namespace
}  // namespace troupe

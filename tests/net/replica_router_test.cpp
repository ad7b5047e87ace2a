// The replica router over scripted fake backends: least-loaded choice,
// prefix affinity within and beyond its slack, replicas that stop serving,
// cancel and ids across replicas, events that arrive before submit
// returns, the aggregated facts and the per-replica metrics.
#include "net/replica_router.hpp"

#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "core/error.hpp"
#include "net/routes.hpp"
#include "tests/net/fake_engine.hpp"

namespace troupe::net {
namespace {

using test::FakeEngine;

// `n` tokens, different for each seed.
std::vector<int32_t> tokens(size_t n, int32_t seed) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = 3 + static_cast<int32_t>((static_cast<size_t>(seed) * 131 + i) % 500);
  return t;
}

// A token prompt whose default max_new_tokens is cut to the fake's small
// context (the engine's front door would refuse it otherwise).
EngineRequest fitting(std::vector<int32_t> prompt) {
  EngineRequest r = EngineRequest::from_tokens(std::move(prompt));
  r.fit_max_tokens = true;
  return r;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Final events by the router's id.
class Finals {
 public:
  RequestCallbacks callbacks() {
    return {.on_token =
                [this](const TokenEvent& e) {
                  std::lock_guard lock(mutex_);
                  token_ids_.push_back(e.id);
                },
            .on_final =
                [this](const FinalEvent& f) {
                  std::lock_guard lock(mutex_);
                  got_[f.id] = f;
                  cv_.notify_all();
                }};
  }
  FinalEvent wait(RequestId id) {
    std::unique_lock lock(mutex_);
    EXPECT_TRUE(cv_.wait_for(lock, std::chrono::seconds(10), [&] { return got_.count(id) != 0; })) << id;
    return got_[id];
  }
  size_t wait_count(size_t n) {
    std::unique_lock lock(mutex_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return got_.size() >= n; });
    return got_.size();
  }
  std::vector<RequestId> token_ids() {
    std::lock_guard lock(mutex_);
    return token_ids_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<RequestId, FinalEvent> got_;
  std::vector<RequestId> token_ids_;
};

// N holding fakes behind a router; `fakes` stay owned by the router.
struct Rig {
  explicit Rig(size_t n, ReplicaRouting routing = {}) {
    std::vector<std::unique_ptr<EngineClient>> owned;
    for (size_t i = 0; i < n; ++i) {
      auto f = std::make_unique<FakeEngine>();
      f->script.hold = true;
      f->context_length = 4096;  // the long prompts below must pass the front door
      fakes.push_back(f.get());
      owned.push_back(std::move(f));
    }
    router = std::make_unique<ReplicaRouter>(std::move(owned), routing);
  }

  // Submits and says which replica took the request.
  size_t route(const std::vector<int32_t>& prompt, RequestId* id = nullptr) {
    std::vector<size_t> before;
    for (FakeEngine* f : fakes) before.push_back(f->submitted.size());
    const RequestId rid = router->submit(fitting(prompt), finals.callbacks());
    if (id != nullptr) *id = rid;
    size_t took = fakes.size();
    for (size_t i = 0; i < fakes.size(); ++i) {
      if (fakes[i]->submitted.size() == before[i] + 1) took = i;
    }
    return took;
  }

  // The replica's id of the request it received last.
  RequestId last_inner(size_t replica) { return fakes[replica]->submitted.back().id; }

  std::vector<int32_t> in_flight() {
    std::vector<int32_t> out;
    for (const ReplicaFacts& f : router->replicas()) out.push_back(f.in_flight);
    return out;
  }

  Finals finals;
  std::vector<FakeEngine*> fakes;
  std::unique_ptr<ReplicaRouter> router;
};

TEST(ReplicaRouting, LeastLoadedReplicaTakesEachRequest) {
  Rig rig(3);
  // Ties go to the lowest index, so equal loads fill round-robin.
  std::vector<size_t> took;
  std::vector<RequestId> ids(6);
  for (int i = 0; i < 6; ++i) took.push_back(rig.route(tokens(8, i), &ids[static_cast<size_t>(i)]));
  EXPECT_EQ(took, (std::vector<size_t>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(rig.in_flight(), (std::vector<int32_t>{2, 2, 2}));

  // Replica 1's requests end: it is now the least loaded.
  rig.router->cancel(ids[1]);
  rig.router->cancel(ids[4]);
  rig.finals.wait(ids[1]);
  rig.finals.wait(ids[4]);
  EXPECT_EQ(rig.in_flight(), (std::vector<int32_t>{2, 0, 2}));
  EXPECT_EQ(rig.route(tokens(8, 10)), 1u);
  EXPECT_EQ(rig.route(tokens(8, 11)), 1u);
  EXPECT_EQ(rig.route(tokens(8, 12)), 0u);
  uint64_t least_loaded = 0, affinity = 0;
  for (const ReplicaFacts& f : rig.router->replicas()) {
    least_loaded += f.routed_least_loaded;
    affinity += f.routed_affinity;
  }
  EXPECT_EQ(least_loaded, 9u);  // 8-token prompts are too short for a prefix key
  EXPECT_EQ(affinity, 0u);
}

// Replica 0 runs `busy` short requests, replica 1 none, and replica 0 was
// the last to get the 40-token prefix `shared`.
void load_replica_zero(Rig& rig, const std::vector<int32_t>& shared, int busy) {
  ASSERT_EQ(rig.route(concat(shared, tokens(8, 100))), 0u);
  rig.fakes[1]->ready = false;
  for (int i = 1; i < busy; ++i) ASSERT_EQ(rig.route(tokens(8, 200 + i)), 0u);
  rig.fakes[1]->ready = true;
  ASSERT_EQ(rig.in_flight(), (std::vector<int32_t>{busy, 0}));
}

TEST(ReplicaRouting, AffinityWinsWithinTheSlack) {
  Rig rig(2, {.affinity_slack = 4});
  const std::vector<int32_t> shared = tokens(40, 7);
  load_replica_zero(rig, shared, 4);
  // 4 in flight against 0: within the slack, the warm replica takes it.
  EXPECT_EQ(rig.route(concat(shared, tokens(5, 101))), 0u);
  EXPECT_EQ(rig.router->replicas()[0].routed_affinity, 1u);
  // An unrelated prompt of the same length goes to the least loaded.
  EXPECT_EQ(rig.route(tokens(48, 9)), 1u);
}

TEST(ReplicaRouting, AffinityLosesBeyondTheSlack) {
  Rig rig(2, {.affinity_slack = 2});
  const std::vector<int32_t> shared = tokens(40, 7);
  load_replica_zero(rig, shared, 3);
  // 3 in flight against 0 is more than 2 beyond: the idle replica takes it,
  // and is from then on the one known to hold the prefix.
  EXPECT_EQ(rig.route(concat(shared, tokens(5, 101))), 1u);
  EXPECT_EQ(rig.router->replicas()[1].routed_least_loaded, 1u);
  EXPECT_EQ(rig.route(concat(shared, tokens(5, 102))), 1u);
  EXPECT_EQ(rig.router->replicas()[1].routed_affinity, 1u);
}

// Replica 1 was sent the whole of `long_prompt` (its 256- and 32-token
// prefixes), then replica 0 a prompt sharing only its first 32 tokens.
void split_prefixes(Rig& rig, const std::vector<int32_t>& long_prompt) {
  rig.fakes[0]->ready = false;
  ASSERT_EQ(rig.route(long_prompt), 1u);
  rig.fakes[0]->ready = true;
  rig.fakes[1]->ready = false;
  ASSERT_EQ(rig.route(concat(std::vector<int32_t>(long_prompt.begin(), long_prompt.begin() + 32), tokens(10, 2))), 0u);
  rig.fakes[1]->ready = true;
}

TEST(ReplicaRouting, LongestKnownPrefixWins) {
  Rig rig(2, {.affinity_slack = 100});
  const std::vector<int32_t> long_prompt = tokens(300, 1);
  split_prefixes(rig, long_prompt);
  // Sharing all 256 tokens: replica 1, though replica 0 holds the first 32
  // and is first among equals.
  EXPECT_EQ(rig.route(concat(std::vector<int32_t>(long_prompt.begin(), long_prompt.begin() + 256), tokens(30, 3))), 1u);
  EXPECT_EQ(rig.router->replicas()[1].routed_affinity, 1u);
}

TEST(ReplicaRouting, ShorterPrefixDecidesWhenTheLongerOnesReplicaIsDown) {
  Rig rig(2, {.affinity_slack = 100});
  const std::vector<int32_t> long_prompt = tokens(300, 1);
  split_prefixes(rig, long_prompt);
  rig.fakes[1]->ready = false;
  EXPECT_EQ(rig.route(concat(std::vector<int32_t>(long_prompt.begin(), long_prompt.begin() + 256), tokens(30, 3))), 0u);
  EXPECT_EQ(rig.router->replicas()[0].routed_affinity, 1u);
}

TEST(ReplicaRouting, AffinityMapIsBounded) {
  // One entry: each new 32-token prefix pushes the previous one out.
  Rig rig(2, {.affinity_slack = 100, .prefix_tokens = {32}, .affinity_entries = 1});
  const std::vector<int32_t> a = tokens(32, 1), b = tokens(32, 2);
  ASSERT_EQ(rig.route(a), 0u);
  ASSERT_EQ(rig.route(b), 1u);
  // `a` is forgotten: least loaded (a tie, so replica 0), not affinity.
  EXPECT_EQ(rig.route(a), 0u);
  EXPECT_EQ(rig.router->replicas()[0].routed_affinity, 0u);
  // `b` is forgotten too now (a took the only entry back).
  EXPECT_EQ(rig.route(b), 1u);
  EXPECT_EQ(rig.router->replicas()[1].routed_affinity, 0u);
}

TEST(ReplicaRouting, ReplicasNotServingAreSkippedAndDrain) {
  Rig rig(2);
  RequestId on_one = 0;
  ASSERT_EQ(rig.route(tokens(8, 1)), 0u);
  ASSERT_EQ(rig.route(tokens(8, 2), &on_one), 1u);
  // Replica 1 stops serving (loading, failed, a stage down): everything new
  // goes to replica 0, however loaded.
  rig.fakes[1]->ready = false;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(rig.route(tokens(8, 10 + i)), 0u);
  EXPECT_TRUE(rig.router->ready());
  const LoadState s = rig.router->load_state();
  EXPECT_TRUE(s.ready);
  EXPECT_FALSE(s.failed);
  EXPECT_NE(s.stage.find("replica 1: reading"), std::string::npos) << s.stage;
  EXPECT_FALSE(rig.router->replicas()[1].up);
  // What it still ran ends, and its load drains to zero.
  rig.router->cancel(on_one);
  EXPECT_EQ(rig.finals.wait(on_one).reason, EndReason::cancelled);
  EXPECT_EQ(rig.in_flight(), (std::vector<int32_t>{4, 0}));
  // No replica serving: the router is not ready and refuses.
  rig.fakes[0]->ready = false;
  EXPECT_FALSE(rig.router->ready());
  try {
    rig.router->submit(fitting(tokens(8, 20)), rig.finals.callbacks());
    ADD_FAILURE() << "submit with no replica serving";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::unavailable);
  }
  EXPECT_EQ(rig.router->tracked_requests(), 4u);
  // Back: the idle one takes the next request.
  rig.fakes[0]->ready = true;
  rig.fakes[1]->ready = true;
  EXPECT_EQ(rig.route(tokens(8, 21)), 1u);
}

TEST(ReplicaRouting, CancelReachesTheReplicaThatRunsTheRequest) {
  Rig rig(2);
  rig.fakes[0]->script.texts = {"a"};
  rig.fakes[1]->script.texts = {"b"};
  RequestId first = 0, second = 0;
  ASSERT_EQ(rig.route(tokens(8, 1), &first), 0u);
  ASSERT_EQ(rig.route(tokens(8, 2), &second), 1u);
  // Each fake numbers its requests from 1: the same inner id on both.
  ASSERT_EQ(rig.last_inner(0), rig.last_inner(1));
  EXPECT_NE(first, second);
  rig.router->cancel(second);
  const FinalEvent f = rig.finals.wait(second);
  EXPECT_EQ(f.id, second);  // the router's id, not the replica's
  EXPECT_EQ(f.reason, EndReason::cancelled);
  EXPECT_TRUE(rig.fakes[1]->is_cancelled(rig.last_inner(1)));
  EXPECT_FALSE(rig.fakes[0]->is_cancelled(rig.last_inner(0)));
  // Unknown and ended ids are ignored.
  rig.router->cancel(second);
  rig.router->cancel(12345);
  EXPECT_FALSE(rig.fakes[0]->is_cancelled(rig.last_inner(0)));
  rig.router->cancel(first);
  rig.finals.wait(first);
  for (const RequestId id : rig.finals.token_ids()) EXPECT_TRUE(id == first || id == second) << id;
  EXPECT_EQ(rig.router->tracked_requests(), 0u);
}

TEST(ReplicaRouting, IdMapEmptiesOnceEveryRequestEnded) {
  Rig rig(3);
  for (FakeEngine* f : rig.fakes) {
    f->script.hold = false;
    f->script.texts = {"x", "y"};
  }
  constexpr int kThreads = 4, kEach = 25;
  std::vector<std::thread> threads;
  std::mutex ids_mutex;
  std::vector<RequestId> ids;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const RequestId id =
            rig.router->submit(fitting(tokens(40, t * 100 + i % 5)), rig.finals.callbacks());
        std::lock_guard lock(ids_mutex);
        ids.push_back(id);
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(rig.finals.wait_count(kThreads * kEach), static_cast<size_t>(kThreads * kEach));
  for (const RequestId id : ids) EXPECT_EQ(rig.finals.wait(id).id, id);
  EXPECT_EQ(rig.router->tracked_requests(), 0u);
  EXPECT_EQ(rig.in_flight(), (std::vector<int32_t>{0, 0, 0}));
  uint64_t routed = 0;
  for (const ReplicaFacts& f : rig.router->replicas()) routed += f.routed_affinity + f.routed_least_loaded;
  EXPECT_EQ(routed, static_cast<uint64_t>(kThreads * kEach));
}

// Ends requests inside submit (an immediate error), or throws from it,
// as a replica may; records cancels.
class ImmediateEngine : public FakeEngine {
 public:
  enum class Mode { final_in_submit, token_in_submit, throw_in_submit };
  Mode mode = Mode::final_in_submit;
  std::vector<RequestId> cancelled;
  RequestId next = 1;

  RequestId submit(EngineRequest, RequestCallbacks cb) override {
    const RequestId id = next++;
    switch (mode) {
      case Mode::final_in_submit:
        cb.on_final(FinalEvent{.id = id, .reason = EndReason::error, .error_message = "no"});
        break;
      case Mode::token_in_submit:
        cb.on_token(TokenEvent{.id = id, .text = "t"});
        break;
      case Mode::throw_in_submit:
        throw Error(Errc::unavailable, "stage down");
    }
    return id;
  }
  void cancel(RequestId id) override { cancelled.push_back(id); }
};

TEST(ReplicaRouting, EventsBeforeSubmitReturnsAndFailedSubmits) {
  auto owned = std::make_unique<ImmediateEngine>();
  ImmediateEngine* b = owned.get();
  std::vector<std::unique_ptr<EngineClient>> list;
  list.push_back(std::move(owned));
  ReplicaRouter router(std::move(list));

  // A final event before submit returned: nothing is left behind.
  Finals finals;
  const RequestId a = router.submit(fitting(tokens(4, 1)), finals.callbacks());
  EXPECT_EQ(finals.wait(a).reason, EndReason::error);
  EXPECT_EQ(router.tracked_requests(), 0u);
  EXPECT_EQ(router.replicas()[0].in_flight, 0);

  // A cancel from a callback before submit returned: forwarded once the
  // replica's id is known.
  b->mode = ImmediateEngine::Mode::token_in_submit;
  RequestId b_id = 0;
  RequestCallbacks cancel_on_token{.on_token = [&](const TokenEvent& e) { router.cancel(e.id); }};
  b_id = router.submit(fitting(tokens(4, 2)), std::move(cancel_on_token));
  EXPECT_EQ(b->cancelled, (std::vector<RequestId>{2}));
  EXPECT_EQ(router.tracked_requests(), 1u);  // until its final event comes
  (void)b_id;

  // A submit that throws: the error reaches the caller, the load is released.
  b->mode = ImmediateEngine::Mode::throw_in_submit;
  EXPECT_THROW(router.submit(fitting(tokens(4, 3)), finals.callbacks()), Error);
  EXPECT_EQ(router.tracked_requests(), 1u);
  EXPECT_EQ(router.replicas()[0].in_flight, 1);
}

// A fake that reports stages, actor loads and a context of its own.
class DetailedFake : public FakeEngine {
 public:
  LoadState load_state() const override {
    LoadState s = FakeEngine::load_state();
    if (s.ready) {
      s.loaded = true;
      s.stages = {StageHealth{.name = "executor_0", .where = "cpu", .first_layer = 0, .last_layer = 5}};
    }
    return s;
  }
  std::vector<ActorLoad> actor_loads() const override {
    return {{.actor = "scheduler", .mailbox_depth = 1, .messages = 7, .busy_seconds = 0.5}};
  }
  std::map<std::string, uint64_t> anomaly_counts() const override { return {{"ttft", 2}}; }
};

TEST(ReplicaRouting, FactsAreAggregatedOverReplicas) {
  std::vector<DetailedFake*> fakes;
  std::vector<std::unique_ptr<EngineClient>> list;
  for (int i = 0; i < 2; ++i) {
    auto f = std::make_unique<DetailedFake>();
    fakes.push_back(f.get());
    list.push_back(std::move(f));
  }
  fakes[1]->context_length = 32;
  ReplicaRouter router(std::move(list));

  const PipelineStats s = router.stats();
  EXPECT_EQ(s.kv_blocks_total, 200);
  EXPECT_EQ(s.kv_blocks_used, 20);
  EXPECT_EQ(s.running, 2);
  const MemoryPools p = router.memory_pools();
  EXPECT_EQ(p.weight_bytes, 1000);  // one shared model
  EXPECT_EQ(p.kv_bytes, 4000);
  EXPECT_EQ(p.kv_block_size, 16);
  // The smallest context any serving replica takes.
  EXPECT_EQ(router.served_model().engine.context_length, 32);
  EXPECT_EQ(router.served_model().id, "fake");
  fakes[1]->ready = false;
  EXPECT_EQ(router.served_model().engine.context_length, 64);
  fakes[1]->ready = true;

  std::vector<std::string> names;
  for (const ActorLoad& a : router.actor_loads()) names.push_back(a.actor);
  EXPECT_EQ(names, (std::vector<std::string>{"replica0/scheduler", "replica1/scheduler"}));
  EXPECT_EQ(router.anomaly_counts().at("ttft"), 4u);
  const LoadState ls = router.load_state();
  ASSERT_EQ(ls.stages.size(), 2u);
  EXPECT_EQ(ls.stages[1].name, "replica1/executor_0");
  EXPECT_EQ(ls.stage, "ready");
  EXPECT_TRUE(ls.loaded);
  EXPECT_TRUE(router.wait_loaded());
}

// The value of the series `name{...}` that holds every label; -1: none.
double metric(const std::string& text, const std::string& name, const std::vector<std::string>& labels) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name + "{", 0) != 0) continue;
    bool all = true;
    for (const std::string& l : labels) all = all && line.find(l) != std::string::npos;
    if (all) return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return -1;
}

TEST(ReplicaRouting, PerReplicaMetrics) {
  Rig rig(2, {.prefix_tokens = {32}});
  ServerCore core(*rig.router, {});
  const std::vector<int32_t> shared = tokens(32, 1);
  ASSERT_EQ(rig.route(shared), 0u);
  ASSERT_EQ(rig.route(tokens(8, 2)), 1u);
  ASSERT_EQ(rig.route(concat(shared, tokens(4, 3))), 0u);  // affinity
  rig.fakes[1]->ready = false;
  const std::string text = core.metrics_text();
  EXPECT_EQ(metric(text, "troupe_replica_up", {"replica=\"0\""}), 1);
  EXPECT_EQ(metric(text, "troupe_replica_up", {"replica=\"1\""}), 0);
  EXPECT_EQ(metric(text, "troupe_replica_requests_in_flight", {"replica=\"0\""}), 2);
  EXPECT_EQ(metric(text, "troupe_replica_requests_in_flight", {"replica=\"1\""}), 1);
  auto routed = [](const std::string& t, const char* replica, const char* reason) {
    return metric(t, "troupe_replica_routed_total",
                  {std::string("replica=\"") + replica + "\"", std::string("reason=\"") + reason + "\""});
  };
  EXPECT_EQ(routed(text, "0", "affinity"), 1);
  EXPECT_EQ(routed(text, "0", "least_loaded"), 1);
  EXPECT_EQ(routed(text, "1", "least_loaded"), 1);
  EXPECT_EQ(routed(text, "1", "affinity"), 0);
  // The counters move by what happened between scrapes.
  rig.fakes[1]->ready = true;
  ASSERT_EQ(rig.route(tokens(8, 4)), 1u);
  const std::string again = core.metrics_text();
  EXPECT_EQ(routed(again, "1", "least_loaded"), 2);
  EXPECT_EQ(routed(again, "0", "least_loaded"), 1);
}

}  // namespace
}  // namespace troupe::net

// Admission control: the in-flight bound, the breaker's hysteresis, the
// degradation cap and the Retry-After estimate.
#include "net/admission.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"

namespace troupe::net {
namespace {

TEST(Admission, BoundsRequestsInFlight) {
  AdmissionControl a({.max_running = 2, .max_queue = 2, .degraded_max_tokens = 0});
  EXPECT_EQ(a.capacity(), 4);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(a.try_admit(1).admitted) << i;
  const Admission refused = a.try_admit(1);
  EXPECT_FALSE(refused.admitted);
  EXPECT_GE(refused.retry_after, 1);
  EXPECT_LE(refused.retry_after, 60);
  EXPECT_EQ(a.in_flight(), 4);
  EXPECT_TRUE(a.breaker_open());
}

TEST(Admission, GroupsAreAllOrNothing) {
  AdmissionControl a({.max_running = 2, .max_queue = 1});
  EXPECT_TRUE(a.try_admit(2).admitted);
  EXPECT_FALSE(a.try_admit(2).admitted);
  EXPECT_EQ(a.in_flight(), 2);
}

TEST(Admission, BreakerClosesOnlyBelowTheLowWaterMark) {
  AdmissionControl a({.max_running = 4, .max_queue = 4, .resume_fraction = 0.5, .degraded_max_tokens = 0});
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(a.try_admit(1).admitted);
  EXPECT_FALSE(a.try_admit(1).admitted);  // trips the breaker
  a.release(1.0);                         // 7 in flight: room for one, but the breaker holds
  EXPECT_FALSE(a.try_admit(1).admitted);
  for (int i = 0; i < 3; ++i) a.release(1.0);  // 4 = 0.5 * 8: closes
  EXPECT_TRUE(a.try_admit(1).admitted);
  EXPECT_FALSE(a.breaker_open());
}

TEST(Admission, DegradesNearCapacity) {
  AdmissionControl a({.max_running = 5, .max_queue = 5, .degrade_fraction = 0.5, .degraded_max_tokens = 32});
  for (int i = 0; i < 5; ++i) EXPECT_EQ(a.try_admit(1).max_tokens_cap, 0) << i;
  const Admission sixth = a.try_admit(1);
  EXPECT_TRUE(sixth.admitted);
  EXPECT_EQ(sixth.max_tokens_cap, 32);
}

TEST(Admission, RetryAfterGrowsWithTheBacklogAndRequestTime) {
  AdmissionControl fast({.max_running = 1, .max_queue = 9, .resume_fraction = 0.1});
  AdmissionControl slow({.max_running = 1, .max_queue = 9, .resume_fraction = 0.1});
  for (int i = 0; i < 50; ++i) slow.release(20.0);  // requests take ~20 s each
  for (int i = 0; i < 10; ++i) {
    fast.try_admit(1);
    slow.try_admit(1);
  }
  const int f = fast.try_admit(1).retry_after;
  const int s = slow.try_admit(1).retry_after;
  EXPECT_GE(f, 1);
  EXPECT_GT(s, f);
  EXPECT_LE(s, 60);
}

// The engine reports requests waiting while batch slots are free: they wait
// for KV pages. Long requests are capped, then refused; short ones go in.
TEST(Admission, KvPressureCapsThenRefusesLongRequestsButNotShortOnes) {
  AdmissionControl a({.max_running = 8,
                      .max_queue = 100,
                      .degraded_max_tokens = 64,
                      .kv_degrade_waiting = 1,
                      .kv_refuse_waiting = 10,
                      .engine_probe_interval = std::chrono::milliseconds(0)});
  EngineLoad load{.running = 4, .waiting = 0};
  a.set_engine_probe([&] { return load; });
  EXPECT_EQ(a.try_admit(1, 2000).max_tokens_cap, 0);  // no pressure
  load.waiting = 3;                                   // 4 of 8 slots used, 3 wait: KV-bound
  const Admission capped = a.try_admit(1, 2000);
  EXPECT_TRUE(capped.admitted);
  EXPECT_EQ(capped.max_tokens_cap, 64);
  EXPECT_EQ(a.kv_waiting(), 3);
  load.waiting = 10;
  const Admission refused = a.try_admit(1, 2000);
  EXPECT_FALSE(refused.admitted);
  EXPECT_GE(refused.retry_after, 1);
  EXPECT_FALSE(a.breaker_open());  // a KV refusal is not the house being full
  EXPECT_TRUE(a.try_admit(1, 8).admitted);  // short: runs in the scheduler's short share
  // Waiting behind full batch slots is not KV pressure.
  load = {.running = 8, .waiting = 50};
  const Admission slots = a.try_admit(1, 2000);
  EXPECT_TRUE(slots.admitted);
  EXPECT_EQ(slots.max_tokens_cap, 0);
}

TEST(Admission, AnEngineThatCannotAnswerKeepsTheLastReading) {
  AdmissionControl a({.max_running = 8, .max_queue = 8, .engine_probe_interval = std::chrono::milliseconds(0)});
  bool fail = false;
  a.set_engine_probe([&] {
    if (fail) throw Error(Errc::unavailable, "busy");
    return EngineLoad{.running = 1, .waiting = 5};
  });
  a.try_admit(1, 10);
  fail = true;
  EXPECT_TRUE(a.try_admit(1, 10).admitted);
  EXPECT_EQ(a.kv_waiting(), 5);
}

TEST(Admission, DrainingRefusesEverything) {
  AdmissionControl a({.max_running = 4, .max_queue = 4});
  EXPECT_TRUE(a.try_admit(1).admitted);
  a.begin_drain();
  EXPECT_TRUE(a.draining());
  const Admission r = a.try_admit(1, 8);
  EXPECT_FALSE(r.admitted);
  EXPECT_TRUE(r.draining);
  EXPECT_EQ(a.in_flight(), 1);
}

TEST(Admission, RejectsBadOptions) {
  EXPECT_THROW(AdmissionControl({.max_running = 0}), Error);
  EXPECT_THROW(AdmissionControl({.max_queue = -1}), Error);
  EXPECT_THROW(AdmissionControl({.resume_fraction = 0.0}), Error);
}

}  // namespace
}  // namespace troupe::net

namespace troupe::net {
namespace {

TEST(Admission, ARequestThatWouldWaitPastTheBoundIsRefused) {
  using Clock = AdmissionControl::Clock;
  AdmissionControl ac({.max_running = 2, .max_queue = 100, .degrade_fraction = 1.0, .max_queue_seconds = 10.0});
  const Clock::time_point t0 = Clock::now();
  // Two running, then requests end at 1 per second for 8 s while the
  // queue refills: the rate is known.
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(ac.try_admit(1, 0, t0).admitted);
  for (int s = 1; s <= 8; ++s) {
    ac.release(1.0, t0 + std::chrono::seconds(s));
    ASSERT_TRUE(ac.try_admit(1, 0, t0 + std::chrono::seconds(s)).admitted);
  }
  const Clock::time_point now = t0 + std::chrono::seconds(8);
  EXPECT_NEAR(ac.completion_rate(now), 8.0 / 7.0, 1e-6);
  // Queued ahead: in flight 2, so each new one waits ~ahead / rate.
  int admitted = 0;
  Admission last;
  for (int i = 0; i < 50; ++i) {
    last = ac.try_admit(1, 0, now);
    if (!last.admitted) break;
    ++admitted;
  }
  // 10 s at 8/7 per second: about 11 requests queued ahead, then refusals.
  EXPECT_GE(admitted, 9);
  EXPECT_LE(admitted, 12);
  EXPECT_TRUE(last.wait_bound);
  EXPECT_GE(last.retry_after, 1);
  EXPECT_LT(ac.in_flight(), 102);  // well under the count bound
  // Off: the count bound alone.
  AdmissionControl off({.max_running = 2, .max_queue = 100, .degrade_fraction = 1.0, .max_queue_seconds = 0.0});
  for (int i = 0; i < 102; ++i) EXPECT_TRUE(off.try_admit(1, 0, now).admitted);
}

TEST(Admission, AStalledEngineRefusesQueuedWork) {
  using Clock = AdmissionControl::Clock;
  AdmissionControl ac({.max_running = 1, .max_queue = 10, .degrade_fraction = 1.0, .max_queue_seconds = 5.0});
  const Clock::time_point t0 = Clock::now();
  ASSERT_TRUE(ac.try_admit(1, 0, t0).admitted);
  ac.release(0.5, t0);
  ASSERT_TRUE(ac.try_admit(1, 0, t0).admitted);  // runs
  ASSERT_TRUE(ac.try_admit(1, 0, t0).admitted);  // queued: nothing known yet
  // Nothing ended for 20 s: a queued request would wait past the bound.
  const Admission a = ac.try_admit(1, 0, t0 + std::chrono::seconds(20));
  EXPECT_FALSE(a.admitted);
  EXPECT_TRUE(a.wait_bound);
}

}  // namespace
}  // namespace troupe::net

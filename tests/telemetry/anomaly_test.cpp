// The EWMA excursion flag: silent on steady and noisy-but-stationary
// series, fires on a step far above the baseline, and not during warm-up.
#include "telemetry/anomaly.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace troupe {
namespace {

TEST(EwmaDetector, SteadyNoisySeriesNeverFlags) {
  EwmaDetector d;
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> jitter(0.9, 1.1);
  int flagged = 0;
  for (int i = 0; i < 5000; ++i) flagged += d.observe(0.010 * jitter(rng)).anomaly;
  EXPECT_EQ(flagged, 0);
  EXPECT_NEAR(d.mean(), 0.010, 0.0005);
}

TEST(EwmaDetector, FlagsAnExcursionAndRecovers) {
  EwmaDetector d;
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(d.observe(0.010 + 0.0005 * (i % 3)).anomaly);
  const EwmaDetector::Verdict v = d.observe(0.060);
  EXPECT_TRUE(v.anomaly);
  EXPECT_NEAR(v.baseline, 0.0105, 0.001);
  // Back to normal: no more flags.
  for (int i = 0; i < 50; ++i) EXPECT_FALSE(d.observe(0.010).anomaly);
  // A second excursion is still caught (the first entered the baseline clipped).
  EXPECT_TRUE(d.observe(0.060).anomaly);
}

TEST(EwmaDetector, QuietDuringWarmup) {
  EwmaDetector d({.warmup = 10});
  d.observe(0.001);
  EXPECT_FALSE(d.observe(1.0).anomaly);  // only two samples seen
}

TEST(EwmaDetector, SmallRelativeChangesOnAVerySteadyMetricAreNotFlagged) {
  // Zero deviation: only min_ratio guards against flagging 1% changes.
  EwmaDetector d;
  for (int i = 0; i < 100; ++i) d.observe(0.010);
  EXPECT_FALSE(d.observe(0.0101).anomaly);
  EXPECT_TRUE(d.observe(0.030).anomaly);
}

TEST(AnomalyMonitor, CountsKeepsAndCallsTheSink) {
  std::vector<std::string> logged;
  AnomalyMonitor m([&](const AnomalyEvent& e) { logged.push_back(describe(e)); }, 2);
  for (int i = 0; i < 3; ++i) {
    m.report({.metric = "step_time", .value_s = 0.05, .baseline_s = 0.01, .requests = {7, 9}, .step = 4, .engine = 1});
  }
  m.report({.metric = "ttft", .value_s = 1.0, .baseline_s = 0.1, .requests = {11}});
  EXPECT_EQ(m.count("step_time"), 3u);
  EXPECT_EQ(m.count("ttft"), 1u);
  EXPECT_EQ(m.count("other"), 0u);
  EXPECT_EQ(m.recent().size(), 2u);
  EXPECT_EQ(m.recent().back().metric, "ttft");
  ASSERT_EQ(logged.size(), 4u);
  EXPECT_NE(logged[0].find("requests 7,9"), std::string::npos) << logged[0];
  EXPECT_NE(logged[0].find("step 1:4"), std::string::npos) << logged[0];
}

}  // namespace
}  // namespace troupe

namespace troupe {
namespace {

TEST(EwmaDetector, SubMillisecondBlipsAreNotExcursions) {
  // 100 us steps and a 1 ms hiccup: 10x the mean, but under min_excess.
  EwmaDetector d;
  for (int i = 0; i < 100; ++i) d.observe(0.0001);
  EXPECT_FALSE(d.observe(0.001).anomaly);
  EXPECT_TRUE(d.observe(0.010).anomaly);
  EwmaDetector strict({.min_excess_s = 0});
  for (int i = 0; i < 100; ++i) strict.observe(0.0001);
  EXPECT_TRUE(strict.observe(0.001).anomaly);
}

}  // namespace
}  // namespace troupe

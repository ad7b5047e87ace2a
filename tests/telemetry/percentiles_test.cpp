// Percentiles against values numpy.percentile (linear) gives for the same data.
#include "telemetry/percentiles.hpp"

#include <gtest/gtest.h>

namespace troupe {
namespace {

TEST(Percentiles, MatchNumpyLinear) {
  // numpy.percentile([1,2,3,4,5,6,7,8,9,10], [50, 90, 99]) = 5.5, 9.1, 9.91
  const Quantiles q = quantiles({10, 9, 8, 7, 6, 5, 4, 3, 2, 1});
  EXPECT_EQ(q.count, 10);
  EXPECT_DOUBLE_EQ(q.mean, 5.5);
  EXPECT_DOUBLE_EQ(q.p50, 5.5);
  EXPECT_NEAR(q.p90, 9.1, 1e-12);
  EXPECT_NEAR(q.p99, 9.91, 1e-12);
  EXPECT_DOUBLE_EQ(q.max, 10);
}

TEST(Percentiles, SkewedData) {
  // 99 fast samples and one slow one: P50 stays fast, P99 sits between.
  std::vector<double> v(99, 1.0);
  v.push_back(101.0);
  const Quantiles q = quantiles(v);
  EXPECT_DOUBLE_EQ(q.p50, 1.0);
  EXPECT_NEAR(q.p99, 1.0 + 0.01 * 100.0, 1e-9);  // rank 98.01 of 0..99
  EXPECT_DOUBLE_EQ(q.max, 101.0);
  EXPECT_DOUBLE_EQ(q.mean, 2.0);
}

TEST(Percentiles, EdgeCases) {
  EXPECT_EQ(quantiles({}).count, 0);
  EXPECT_DOUBLE_EQ(quantiles({}).p99, 0);
  const Quantiles one = quantiles({3.5});
  EXPECT_DOUBLE_EQ(one.p50, 3.5);
  EXPECT_DOUBLE_EQ(one.p99, 3.5);
  EXPECT_DOUBLE_EQ(percentile_sorted({1, 2}, 0), 1);
  EXPECT_DOUBLE_EQ(percentile_sorted({1, 2}, 100), 2);
  EXPECT_DOUBLE_EQ(percentile_sorted({1, 2}, 150), 2);  // clamped
}

}  // namespace
}  // namespace troupe

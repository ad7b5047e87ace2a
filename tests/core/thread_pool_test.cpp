// ThreadPool: every index is visited exactly once, for any pool size, and
// back-to-back jobs (as a decode step issues them) never mix.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "core/thread_pool.hpp"

namespace troupe {
namespace {

TEST(ThreadPool, ParallelForCoversEachIndexOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
      });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1);
    }
  }
}

TEST(ThreadPool, ManySmallJobsInSequence) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  for (int job = 0; job < 5000; ++job) {
    pool.run([&](int ith, int nth) {
      EXPECT_EQ(nth, 3);
      sum.fetch_add(ith + 1);
    });
  }
  EXPECT_EQ(sum.load(), 5000 * (1 + 2 + 3));
}

TEST(CpuFeatures, ScalarAlwaysRunsAndForcingIsChecked) {
  EXPECT_TRUE(isa_supported(Isa::scalar));
  EXPECT_TRUE(isa_supported(best_isa()));
  force_isa(Isa::scalar);
  EXPECT_EQ(active_isa(), Isa::scalar);
  force_isa(best_isa());
  for (Isa isa : {Isa::avx2, Isa::avx512}) {
    if (!isa_supported(isa)) {
      EXPECT_THROW(force_isa(isa), Error);
    }
  }
}

}  // namespace
}  // namespace troupe

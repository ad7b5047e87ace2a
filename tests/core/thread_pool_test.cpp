// ThreadPool: every index is visited exactly once, for any pool size and
// either split, and back-to-back jobs (as a decode step issues them) never
// mix.
#include <gtest/gtest.h>

#if defined(__linux__)
#include <sched.h>
#endif

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
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

// Dynamic chunks: each index once, every chunk `grain` long but the last,
// each starting on a multiple of grain (a grain below 1 counts as 1; one
// thread takes [0, n) at once).
TEST(ThreadPool, ParallelDynamicCoversEachIndexOnceInChunksOfTheGrain) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 7, 48, 1000}) {
      for (int64_t grain : {0, 1, 6, 16, 2000}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        const int64_t g = std::max<int64_t>(grain, 1);
        pool.parallel_dynamic(n, grain, [&](int64_t b, int64_t e) {
          EXPECT_EQ(b % g, 0) << "n " << n << " grain " << grain;
          EXPECT_TRUE(e - b == g || e == n) << "n " << n << " grain " << grain;
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
        });
        for (auto& h : hits) ASSERT_EQ(h.load(), 1) << "n " << n << " grain " << grain;
      }
    }
  }
}

// Guided chunks: each index once; every chunk starts on a multiple of the
// grain and is a multiple of it but the last; no chunk is longer than the
// share it was cut from (what was left / (2 threads)), so they shrink
// towards the end (with 2+ threads and n well above the grain, the first
// chunk is longer than the last).
TEST(ThreadPool, ParallelGuidedCoversEachIndexOnceInShrinkingChunks) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 7, 48, 1000}) {
      for (int64_t grain : {0, 1, 4, 2000}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        const int64_t g = std::max<int64_t>(grain, 1);
        std::mutex m;
        std::vector<std::pair<int64_t, int64_t>> chunks;
        pool.parallel_guided(n, grain, [&](int64_t b, int64_t e) {
          {
            std::lock_guard lock(m);
            chunks.emplace_back(b, e);
          }
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
        });
        for (auto& h : hits) ASSERT_EQ(h.load(), 1) << "n " << n << " grain " << grain;
        std::sort(chunks.begin(), chunks.end());
        for (auto [b, e] : chunks) {
          EXPECT_EQ(b % g, 0) << "n " << n << " grain " << grain;
          EXPECT_TRUE((e - b) % g == 0 || e == n) << "n " << n << " grain " << grain;
          if (threads > 1) {
            const int64_t share = (n - b + 2 * threads - 1) / (2 * threads);
            EXPECT_LE(e - b, std::max(g, (share + g - 1) / g * g)) << "n " << n << " grain " << grain;
          }
        }
        if (threads > 1 && n >= 16 * g && !chunks.empty()) {
          EXPECT_GT(chunks.front().second - chunks.front().first, chunks.back().second - chunks.back().first);
        }
      }
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

// The 256-bit int8 kernels' dot products: vpdpbusd by default only where
// AVX-VNNI is; a kind the CPU lacks can't be forced; the summary names the
// kind in use on the AVX2 path.
TEST(CpuFeatures, Dots256DefaultForcingAndNames) {
  if (!isa_supported(Isa::avx2)) GTEST_SKIP() << "this CPU has no AVX2";
  EXPECT_EQ(dots256(), cpu_has_avx_vnni() ? Dots256::avx_vnni : Dots256::pairs);
  EXPECT_EQ(parse_dots256("avx512_vnni"), Dots256::avx512_vnni);
  EXPECT_EQ(parse_dots256("vnni"), std::nullopt);
  force_isa(Isa::avx2);
  for (Dots256 d : {Dots256::pairs, Dots256::avx_vnni, Dots256::avx512_vnni}) {
    if (!dots256_supported(d)) {
      EXPECT_THROW(force_dots256(d), Error) << dots256_name(d);
      continue;
    }
    force_dots256(d);
    EXPECT_EQ(dots256(), d);
    EXPECT_NE(cpu_math_summary().find(std::string(dots256_name(d))), std::string::npos) << cpu_math_summary();
  }
  force_dots256(std::nullopt);
  force_isa(best_isa());
  EXPECT_EQ(dots256(), cpu_has_avx_vnni() ? Dots256::avx_vnni : Dots256::pairs);
}

}  // namespace
}  // namespace troupe

namespace troupe {
namespace {

TEST(CpuList, ParsesTasksetForms) {
  EXPECT_EQ(parse_cpu_list("0,1"), (std::vector<int>{0, 1}));
  EXPECT_EQ(parse_cpu_list("0-3,8"), (std::vector<int>{0, 1, 2, 3, 8}));
  EXPECT_EQ(parse_cpu_list("5"), (std::vector<int>{5}));
  for (const char* bad : {"", ",", "1,", "a", "3-1", "1--2", "-1", "1 2"}) {
    EXPECT_THROW(parse_cpu_list(bad), Error) << "'" << bad << "'";
  }
}

#if defined(__linux__)
// Each thread of a pinned pool runs on its CPU (the caller too, once it has
// run a job); the test restores the caller's own affinity afterwards.
TEST(ThreadPool, PinnedThreadsRunOnTheirCpus) {
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof saved, &saved), 0);
  std::vector<int> mine;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &saved)) mine.push_back(c);
  }
  if (mine.size() < 2) GTEST_SKIP() << "this process may run on one CPU only";
  const std::vector<int> cpus{mine[1], mine[0]};  // reversed, so that no pin is a coincidence
  {
    ThreadPool pool(2, cpus);
    std::vector<int> seen(2, -1);
    for (int round = 0; round < 20; ++round) {
      pool.run([&](int ith, int) { seen[static_cast<size_t>(ith)] = sched_getcpu(); });
      EXPECT_EQ(seen[0], cpus[0]);
      EXPECT_EQ(seen[1], cpus[1]);
    }
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof saved, &saved), 0);
  EXPECT_THROW(ThreadPool(1, {CPU_SETSIZE + 5}), Error);
}

TEST(ThreadPool, AffinityPlanHandsOutCpusInOrder) {
  cpu_set_t mine;
  ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
  int first = 0;
  while (!CPU_ISSET(first, &mine)) ++first;  // a container may not offer CPU 0
  set_cpu_affinity({first});
  EXPECT_EQ(claim_cpus(2), (std::vector<int>{first, first}));
  set_cpu_affinity({});
  EXPECT_TRUE(claim_cpus(2).empty());
}
#endif

}  // namespace
}  // namespace troupe

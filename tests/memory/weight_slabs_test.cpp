// WeightSlabs: pieces cut in order from huge-page slabs, aligned and
// disjoint; a slab freed with its last piece; foreign pointers refused.
#include "memory/weight_slabs.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace troupe {
namespace {

uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

TEST(WeightSlabs, CutsAlignedPiecesOneAfterAnother) {
  WeightSlabs slabs;
  void* a = slabs.allocate(100);
  void* b = slabs.allocate(1);
  void* c = slabs.allocate(64);
  EXPECT_EQ(addr(a) % kHugePageBytes, 0u);  // a slab's first piece starts its huge page
  EXPECT_EQ(addr(b), addr(a) + 128);        // 100 bytes take two lines
  EXPECT_EQ(addr(c), addr(b) + 64);
  EXPECT_EQ(slabs.slab_count(), 1u);
}

TEST(WeightSlabs, PiecesAreDisjointAndWritableAcrossSlabs) {
  WeightSlabs slabs;
  std::mt19937 rng(7);
  std::uniform_int_distribution<size_t> size(1, WeightSlabs::kMaxPiece - 1);
  std::vector<std::pair<uintptr_t, size_t>> pieces;
  size_t total = 0;
  for (int i = 0; i < 24; ++i) {
    const size_t n = size(rng);
    void* p = slabs.allocate(n);
    ASSERT_EQ(addr(p) % WeightSlabs::kAlignment, 0u);
    std::memset(p, i, n);  // out of bounds here is ASan's to catch
    pieces.emplace_back(addr(p), n);
    total += n;
  }
  std::sort(pieces.begin(), pieces.end());
  for (size_t i = 1; i < pieces.size(); ++i) {
    EXPECT_LE(pieces[i - 1].first + pieces[i - 1].second, pieces[i].first);
  }
  // About 190 MiB of pieces: at least six slabs, and no slab left with more
  // room than a piece can take.
  EXPECT_GE(slabs.slab_count(), (total + WeightSlabs::kSlabBytes - 1) / WeightSlabs::kSlabBytes);
  EXPECT_LE(slabs.slab_count(), total / (WeightSlabs::kSlabBytes - WeightSlabs::kMaxPiece) + 1);
}

TEST(WeightSlabs, APieceThatDoesNotFitOpensTheNextSlab) {
  WeightSlabs slabs;
  const size_t big = WeightSlabs::kMaxPiece - WeightSlabs::kAlignment;
  void* a = slabs.allocate(big);
  void* b = slabs.allocate(big);  // fits: two fill the slab but for two lines
  void* c = slabs.allocate(3 * WeightSlabs::kAlignment);  // does not
  void* d = slabs.allocate(1);
  EXPECT_EQ(addr(b), addr(a) + big);
  EXPECT_EQ(slabs.slab_count(), 2u);
  EXPECT_EQ(addr(c) % kHugePageBytes, 0u);
  EXPECT_EQ(addr(d), addr(c) + 3 * WeightSlabs::kAlignment);  // the new slab is the open one
  for (void* p : {a, b, c, d}) EXPECT_TRUE(slabs.release(p));
}

TEST(WeightSlabs, FreesASlabWithItsLastPiece) {
  WeightSlabs slabs;
  const size_t piece = kHugePageBytes - WeightSlabs::kAlignment;
  const size_t per_slab = WeightSlabs::kSlabBytes / piece;  // 16 pieces fit in one slab
  std::vector<void*> first, second;
  for (size_t i = 0; i < per_slab; ++i) first.push_back(slabs.allocate(piece));
  second.push_back(slabs.allocate(piece));
  EXPECT_EQ(slabs.slab_count(), 2u);
  for (size_t i = 0; i + 1 < first.size(); ++i) EXPECT_TRUE(slabs.release(first[i]));
  EXPECT_EQ(slabs.slab_count(), 2u);  // one piece still lives in it
  EXPECT_TRUE(slabs.release(first.back()));
  EXPECT_EQ(slabs.slab_count(), 1u);
  EXPECT_TRUE(slabs.release(second[0]));
  EXPECT_EQ(slabs.slab_count(), 0u);
  void* again = slabs.allocate(10);  // the open slab went with its last piece: a new one
  EXPECT_EQ(slabs.slab_count(), 1u);
  EXPECT_TRUE(slabs.release(again));
}

TEST(WeightSlabs, RefusesPointersItDidNotCut) {
  WeightSlabs slabs;
  void* p = slabs.allocate(256);
  void* other = std::malloc(64);
  int local = 0;
  EXPECT_FALSE(slabs.release(other));
  EXPECT_FALSE(slabs.release(&local));
  EXPECT_FALSE(slabs.release(static_cast<char*>(p) + 4096));  // past the cut part of its slab
  EXPECT_EQ(slabs.slab_count(), 1u);
  std::free(other);
  EXPECT_TRUE(slabs.release(p));
}

TEST(WeightSlabs, RejectsEmptyAndOversizedPieces) {
  WeightSlabs slabs;
  for (size_t n : {size_t{0}, WeightSlabs::kMaxPiece, size_t{64} << 20}) {
    try {
      slabs.allocate(n);
      FAIL() << n << " bytes were cut";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
    }
  }
  EXPECT_EQ(slabs.slab_count(), 0u);
}

TEST(WeightSlabs, ThreadsGetDisjointPieces) {
  WeightSlabs slabs;
  constexpr int kThreads = 4, kEach = 500;
  std::vector<std::vector<uintptr_t>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&slabs, &got, t] {
      for (int i = 0; i < kEach; ++i) got[static_cast<size_t>(t)].push_back(addr(slabs.allocate(4096 + 64 * t)));
    });
  }
  for (auto& th : threads) th.join();
  std::vector<uintptr_t> all;
  for (const auto& g : got) all.insert(all.end(), g.begin(), g.end());
  std::sort(all.begin(), all.end());
  for (size_t i = 1; i < all.size(); ++i) EXPECT_GE(all[i] - all[i - 1], 4096u);
  for (uintptr_t a : all) EXPECT_TRUE(slabs.release(reinterpret_cast<void*>(a)));
  EXPECT_EQ(slabs.slab_count(), 0u);
}

}  // namespace
}  // namespace troupe

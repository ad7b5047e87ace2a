// KvCacheManager: prefix sharing between sequences, the "leave one token"
// rule, all-or-nothing reservation, hash publication on commit, and reuse of
// cached blocks after free.
#include "memory/kv_cache_manager.hpp"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <vector>

#include "core/error.hpp"

namespace troupe {
namespace {

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<int32_t> tokens_from(int32_t start, int32_t n) {
  std::vector<int32_t> t;
  for (int32_t i = 0; i < n; ++i) t.push_back(start + i * 7);
  return t;
}

// Admits a sequence the way a scheduler does: prefix match, reserve, commit.
int32_t run_prompt(KvCacheManager& kv, int64_t seq, const std::vector<int32_t>& prompt) {
  const int32_t matched = kv.match_prefix(seq, prompt);
  const int32_t n = static_cast<int32_t>(prompt.size()) - matched;
  EXPECT_TRUE(kv.reserve(seq, n));
  kv.commit(seq, std::span<const int32_t>(prompt).subspan(static_cast<size_t>(matched)));
  return matched;
}

TEST(KvCacheManager, CommonPrefixOf40TokensSharesTwoBlocks) {
  KvCacheManager kv({.n_blocks = 16, .block_size = 16});
  const std::vector<int32_t> prefix = tokens_from(1000, 40);
  const std::vector<int32_t> a = concat(prefix, tokens_from(1, 10));
  const std::vector<int32_t> b = concat(prefix, tokens_from(500, 10));

  EXPECT_EQ(run_prompt(kv, 1, a), 0);
  EXPECT_EQ(run_prompt(kv, 2, b), 32);  // blocks 0 and 1 lie inside the prefix

  const auto ta = kv.block_table(1);
  const auto tb = kv.block_table(2);
  ASSERT_EQ(ta.size(), 4u);  // ceil(50 / 16)
  ASSERT_EQ(tb.size(), 4u);
  EXPECT_EQ(ta[0], tb[0]);
  EXPECT_EQ(ta[1], tb[1]);
  EXPECT_NE(ta[2], tb[2]);
  EXPECT_NE(ta[3], tb[3]);
  EXPECT_EQ(kv.pool().ref_count(ta[0]), 2);
  EXPECT_EQ(kv.pool().ref_count(ta[1]), 2);
  EXPECT_EQ(kv.pool().ref_count(ta[2]), 1);
  EXPECT_EQ(kv.pool().n_used(), 6);
  kv.check_invariants();

  const int32_t shared0 = ta[0];
  const int32_t shared1 = ta[1];
  kv.free(1);
  EXPECT_EQ(kv.pool().ref_count(shared0), 1);
  kv.free(2);
  // Full blocks stay cached (2 shared + one third block each); the partial
  // fourth blocks had no hash and went back to the free queue.
  EXPECT_EQ(kv.pool().state(shared0), BlockState::cached);
  EXPECT_EQ(kv.pool().state(shared1), BlockState::cached);
  EXPECT_EQ(kv.pool().n_cached(), 4);
  EXPECT_EQ(kv.pool().n_free(), 12);
  EXPECT_EQ(kv.pool().n_used(), 0);

  // A third request with the same prefix hits both blocks.
  const std::vector<int32_t> c = concat(prefix, tokens_from(900, 3));
  const PrefixProbe probe = kv.probe_prefix(c);
  EXPECT_EQ(probe.n_tokens, 32);
  EXPECT_EQ(probe.n_revived, 2);
  EXPECT_EQ(run_prompt(kv, 3, c), 32);
  EXPECT_EQ(kv.block_table(3)[0], shared0);
  EXPECT_EQ(kv.block_table(3)[1], shared1);
  EXPECT_EQ(kv.pool().n_cached(), 2);
  EXPECT_GE(kv.pool().stats().prefix_hits, 4u);
  kv.check_invariants();
}

TEST(KvCacheManager, NeverMatchesTheWholePrompt) {
  KvCacheManager kv({.n_blocks = 8, .block_size = 16});
  const std::vector<int32_t> p = tokens_from(3, 32);
  run_prompt(kv, 1, p);
  kv.free(1);
  EXPECT_EQ(kv.pool().n_cached(), 2);
  // Both blocks are cached, but the last token must be computed for logits.
  EXPECT_EQ(kv.match_prefix(2, p), 16);
  EXPECT_EQ(kv.n_tokens(2), 16);
  const std::vector<int32_t> p33 = concat(p, {77});
  EXPECT_EQ(kv.match_prefix(3, p33), 32);
  EXPECT_THROW(kv.match_prefix(3, p33), Error);  // already holds KV
  kv.check_invariants();
}

TEST(KvCacheManager, ReserveIsAllOrNothing) {
  KvCacheManager kv({.n_blocks = 4, .block_size = 16});
  ASSERT_TRUE(kv.reserve(1, 40));  // 3 blocks; reservations count from committed tokens (0)
  EXPECT_EQ(kv.n_new_blocks_needed(1, 48), 0);
  EXPECT_EQ(kv.n_new_blocks_needed(1, 49), 1);
  EXPECT_FALSE(kv.reserve(1, 48 + 17));  // would need 2 more, 1 is left
  EXPECT_EQ(kv.block_table(1).size(), 3u);
  EXPECT_EQ(kv.pool().n_free(), 1);
  EXPECT_FALSE(kv.reserve(2, 17));  // a new sequence: not even created
  EXPECT_FALSE(kv.contains(2));
  EXPECT_TRUE(kv.can_fit(16));
  EXPECT_FALSE(kv.can_fit(17));
  EXPECT_EQ(kv.n_blocks_needed(33), 3);
  EXPECT_EQ(kv.capacity_tokens(), 64);
  kv.check_invariants();
}

TEST(KvCacheManager, CommitPastReservationThrows) {
  KvCacheManager kv({.n_blocks = 4, .block_size = 4});
  ASSERT_TRUE(kv.reserve(1, 5));  // 2 blocks, 8 slots
  const std::vector<int32_t> t = tokens_from(0, 9);
  EXPECT_THROW(kv.commit(1, t), Error);
  EXPECT_EQ(kv.n_tokens(1), 0);
  kv.commit(1, std::span<const int32_t>(t).first(8));
  EXPECT_EQ(kv.n_tokens(1), 8);
  EXPECT_THROW(kv.commit(9, t), Error);
  EXPECT_THROW(kv.block_table(9), Error);
  EXPECT_FALSE(kv.free(9));
  EXPECT_TRUE(kv.free(1));
  kv.check_invariants();
}

TEST(KvCacheManager, DecodeTokensAreHashedIncrementally) {
  // Tokens committed one at a time publish the same hashes as a bulk commit.
  KvCacheManager kv({.n_blocks = 8, .block_size = 4});
  const std::vector<int32_t> all = tokens_from(10, 9);
  ASSERT_TRUE(kv.reserve(1, 3));
  kv.commit(1, std::span<const int32_t>(all).first(3));
  for (size_t i = 3; i < all.size(); ++i) {
    ASSERT_TRUE(kv.reserve(1, 1));
    kv.commit(1, std::span<const int32_t>(all).subspan(i, 1));
  }
  EXPECT_EQ(kv.block_table(1).size(), 3u);
  const uint64_t h0 = KvBlockPool::hash_block(KvBlockPool::kRootHash, std::span(all).first(4));
  const uint64_t h1 = KvBlockPool::hash_block(h0, std::span(all).subspan(4, 4));
  EXPECT_EQ(kv.pool().hash_of(kv.block_table(1)[0]), std::optional<uint64_t>(h0));
  EXPECT_EQ(kv.pool().hash_of(kv.block_table(1)[1]), std::optional<uint64_t>(h1));
  EXPECT_FALSE(kv.pool().hash_of(kv.block_table(1)[2]).has_value());
  EXPECT_EQ(kv.probe_prefix(all).n_tokens, 8);
  kv.check_invariants();
}

TEST(KvCacheManager, IdenticalPromptsComputedTogetherStayConsistent) {
  // Two sequences compute the same blocks in the same step: the first
  // publishes, the second keeps private copies that are freed, not cached.
  KvCacheManager kv({.n_blocks = 8, .block_size = 4});
  const std::vector<int32_t> p = tokens_from(5, 9);
  ASSERT_EQ(kv.match_prefix(1, p), 0);
  ASSERT_EQ(kv.match_prefix(2, p), 0);
  ASSERT_TRUE(kv.reserve(1, 9));
  ASSERT_TRUE(kv.reserve(2, 9));
  kv.commit(1, p);
  kv.commit(2, p);
  kv.check_invariants();
  kv.free(2);
  EXPECT_EQ(kv.pool().n_cached(), 0);
  kv.free(1);
  EXPECT_EQ(kv.pool().n_cached(), 2);
  EXPECT_EQ(kv.pool().n_free(), 6);
  kv.check_invariants();
}

TEST(KvCacheManager, CachedBlocksAreEvictedWhenMemoryRunsOut) {
  KvCacheManager kv({.n_blocks = 4, .block_size = 4});
  const std::vector<int32_t> p = tokens_from(1, 13);
  run_prompt(kv, 1, p);
  kv.free(1);
  EXPECT_EQ(kv.pool().n_cached(), 3);
  EXPECT_EQ(kv.n_available_blocks(), 4);
  ASSERT_TRUE(kv.reserve(2, 16));  // needs every block: evicts all cached ones
  EXPECT_EQ(kv.pool().stats().evictions, 3u);
  EXPECT_EQ(kv.probe_prefix(p).n_tokens, 0);
  kv.check_invariants();
}

TEST(KvCacheManager, PrefixCachingOffCachesNothing) {
  KvCacheManager kv({.n_blocks = 8, .block_size = 4, .prefix_caching = false});
  const std::vector<int32_t> p = tokens_from(1, 13);
  run_prompt(kv, 1, p);
  kv.free(1);
  EXPECT_EQ(kv.pool().n_cached(), 0);
  EXPECT_EQ(kv.match_prefix(2, p), 0);
  kv.check_invariants();
}

TEST(KvCacheManager, CacheKeySeparatesCaches) {
  const std::vector<int32_t> p = tokens_from(1, 13);
  KvCacheManager k1({.n_blocks = 8, .block_size = 4, .cache_key = 1});
  run_prompt(k1, 1, p);
  const uint64_t h_key1 = *k1.pool().hash_of(k1.block_table(1)[0]);
  KvCacheManager k2({.n_blocks = 8, .block_size = 4, .cache_key = 2});
  run_prompt(k2, 1, p);
  EXPECT_NE(h_key1, *k2.pool().hash_of(k2.block_table(1)[0]));
}

TEST(KvCacheManager, RandomSequencesKeepRefCountsExact) {
  // Random prompts drawn from a few shared prefixes; random growth and frees.
  std::mt19937 rng(11);
  KvCacheManager kv({.n_blocks = 32, .block_size = 4});
  std::vector<std::vector<int32_t>> prefixes;
  for (int i = 0; i < 3; ++i) prefixes.push_back(tokens_from(100 * i, 12));
  std::map<int64_t, std::vector<int32_t>> live;
  int64_t next_id = 0;
  int n_shared = 0;
  for (int op = 0; op < 2000; ++op) {
    const int kind = static_cast<int>(rng() % 3);
    if (kind == 0) {
      std::vector<int32_t> p = prefixes[rng() % prefixes.size()];
      p.resize(rng() % 12 + 1);
      const int extra = static_cast<int>(rng() % 10);
      for (int i = 0; i < extra; ++i) p.push_back(static_cast<int32_t>(rng() % 50));
      const int64_t id = next_id++;
      const PrefixProbe probe = kv.probe_prefix(p);
      const int32_t need = kv.n_blocks_needed(static_cast<int32_t>(p.size())) - probe.n_blocks;
      if (need > kv.n_available_blocks() - probe.n_revived) continue;
      const int32_t m = kv.match_prefix(id, p);
      ASSERT_EQ(m, probe.n_tokens);
      n_shared += m > 0;
      ASSERT_TRUE(kv.reserve(id, static_cast<int32_t>(p.size()) - m));
      kv.commit(id, std::span<const int32_t>(p).subspan(static_cast<size_t>(m)));
      live[id] = p;
    } else if (kind == 1 && !live.empty()) {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      const int32_t tok = static_cast<int32_t>(rng() % 50);
      if (kv.reserve(it->first, 1)) {
        kv.commit(it->first, std::span<const int32_t>(&tok, 1));
        it->second.push_back(tok);
      }
    } else if (kind == 2 && !live.empty()) {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % live.size()));
      ASSERT_TRUE(kv.free(it->first));
      live.erase(it);
    }
    kv.check_invariants();
    std::set<int32_t> held;
    for (const auto& [id, toks] : live) {
      ASSERT_EQ(kv.n_tokens(id), static_cast<int32_t>(toks.size()));
      for (const int32_t b : kv.block_table(id)) held.insert(b);
    }
    ASSERT_EQ(static_cast<int32_t>(held.size()) + kv.pool().n_free() + kv.pool().n_cached(),
              kv.pool().n_blocks());
  }
  EXPECT_GT(n_shared, 50);
  for (const auto& [id, toks] : live) kv.free(id);
  EXPECT_EQ(kv.pool().n_used(), 0);
}

// A model with recurrent layers: each running sequence holds one state slot
// from its first reserve until freed; slots run out before blocks do only
// when the scheduler admits more sequences than it sized them for, and then
// reserve refuses without touching anything; no prefix is ever shared (a
// recurrent state cannot be rebuilt from cached blocks).
TEST(KvCacheManager, StateSlotsOnePerRunningSequence) {
  KvCacheManager kv({.n_blocks = 16, .block_size = 4, .prefix_caching = true, .n_state_slots = 2});
  const std::vector<int32_t> prompt = tokens_from(3, 10);
  EXPECT_EQ(run_prompt(kv, 1, prompt), 0);
  EXPECT_EQ(run_prompt(kv, 2, prompt), 0);  // the same prompt: no prefix hit
  const int32_t s1 = kv.state_slot(1), s2 = kv.state_slot(2);
  EXPECT_GE(s1, 0);
  EXPECT_GE(s2, 0);
  EXPECT_NE(s1, s2);
  EXPECT_EQ(kv.n_free_state_slots(), 0);
  // More decode room keeps the slot.
  ASSERT_TRUE(kv.reserve(1, 4));
  EXPECT_EQ(kv.state_slot(1), s1);
  // A third sequence: blocks are there, a slot is not.
  const int32_t used = kv.pool().n_used();
  EXPECT_FALSE(kv.reserve(3, 4));
  EXPECT_FALSE(kv.contains(3));
  EXPECT_EQ(kv.pool().n_used(), used);
  kv.check_invariants();
  // Freed, the slot goes to the next sequence.
  EXPECT_TRUE(kv.free(1));
  EXPECT_EQ(kv.n_free_state_slots(), 1);
  ASSERT_TRUE(kv.reserve(3, 4));
  EXPECT_EQ(kv.state_slot(3), s1);
  EXPECT_EQ(kv.probe_prefix(prompt).n_tokens, 0);
  kv.check_invariants();
  EXPECT_THROW(kv.state_slot(99), Error);
}

TEST(KvCacheManager, NoStateSlotsWithoutRecurrentLayers) {
  KvCacheManager kv({.n_blocks = 8, .block_size = 4});
  run_prompt(kv, 1, tokens_from(1, 5));
  EXPECT_EQ(kv.state_slot(1), -1);
  EXPECT_EQ(kv.n_free_state_slots(), 0);
}

}  // namespace
}  // namespace troupe

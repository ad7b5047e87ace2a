// KV cache manager: block tables per sequence over a KvBlockPool, with prefix
// reuse (match_prefix) and hash publication of full blocks (commit).
#include "memory/kv_cache_manager.hpp"

#include <algorithm>
#include <string>

#include "core/error.hpp"

namespace troupe {
namespace {

std::string seq_name(int64_t seq) { return "sequence " + std::to_string(seq); }

}  // namespace

KvCacheManager::KvCacheManager(const KvCacheOptions& opts)
    : pool_(opts.n_blocks, opts.block_size),
      prefix_caching_(opts.prefix_caching && opts.n_state_slots == 0),
      cache_key_(opts.cache_key),
      n_state_slots_(opts.n_state_slots) {
  if (n_state_slots_ < 0) throw Error(Errc::invalid_argument, "KvCacheManager: negative n_state_slots");
  for (int32_t i = n_state_slots_ - 1; i >= 0; --i) free_slots_.push_back(i);
}

const KvCacheManager::Seq& KvCacheManager::get(int64_t seq, const char* op) const {
  const auto it = seqs_.find(seq);
  if (it == seqs_.end()) {
    throw Error(Errc::invalid_argument,
                std::string("KvCacheManager::") + op + ": unknown " + seq_name(seq));
  }
  return it->second;
}

PrefixProbe KvCacheManager::probe_prefix(std::span<const int32_t> tokens) const {
  PrefixProbe probe;
  if (!prefix_caching_ || tokens.empty()) return probe;
  const size_t bs = static_cast<size_t>(block_size());
  // (n - 1) / bs full blocks at most: the last token must stay uncached.
  const size_t max_full = (tokens.size() - 1) / bs;
  uint64_t parent = KvBlockPool::kRootHash;
  for (size_t i = 0; i < max_full; ++i) {
    parent = KvBlockPool::hash_block(parent, tokens.subspan(i * bs, bs), cache_key_);
    const auto block = pool_.find(parent);
    if (!block) break;
    ++probe.n_blocks;
    if (pool_.state(*block) == BlockState::cached) ++probe.n_revived;
  }
  probe.n_tokens = probe.n_blocks * block_size();
  return probe;
}

int32_t KvCacheManager::match_prefix(int64_t seq, std::span<const int32_t> tokens) {
  Seq& s = seqs_[seq];
  if (!s.blocks.empty() || s.n_tokens != 0) {
    throw Error(Errc::invalid_argument,
                "KvCacheManager::match_prefix: " + seq_name(seq) + " already holds KV");
  }
  if (!prefix_caching_ || tokens.empty()) return 0;
  const size_t bs = static_cast<size_t>(block_size());
  const size_t max_full = (tokens.size() - 1) / bs;
  for (size_t i = 0; i < max_full; ++i) {
    const uint64_t h = KvBlockPool::hash_block(s.last_hash, tokens.subspan(i * bs, bs), cache_key_);
    const auto block = pool_.lookup(h);
    if (!block) break;
    s.blocks.push_back(*block);
    s.last_hash = h;
    ++s.n_hashed;
  }
  s.n_tokens = s.n_hashed * block_size();
  return s.n_tokens;
}

int32_t KvCacheManager::n_new_blocks_needed(int64_t seq, int32_t n_new_tokens) const {
  const auto it = seqs_.find(seq);
  const int32_t have = it == seqs_.end() ? 0 : static_cast<int32_t>(it->second.blocks.size());
  const int32_t cur = it == seqs_.end() ? 0 : it->second.n_tokens;
  return std::max(0, n_blocks_needed(cur + std::max(0, n_new_tokens)) - have);
}

bool KvCacheManager::reserve(int64_t seq, int32_t n_new_tokens) {
  if (n_new_tokens < 0) {
    throw Error(Errc::invalid_argument,
                "KvCacheManager::reserve: negative token count for " + seq_name(seq));
  }
  const int32_t need = n_new_blocks_needed(seq, n_new_tokens);
  if (need > pool_.n_available()) return false;
  const auto it = seqs_.find(seq);
  const bool wants_slot = n_state_slots_ > 0 && (it == seqs_.end() || it->second.state_slot < 0);
  if (wants_slot && free_slots_.empty()) return false;
  Seq& s = seqs_[seq];
  if (wants_slot) {
    s.state_slot = free_slots_.back();
    free_slots_.pop_back();
  }
  for (int32_t i = 0; i < need; ++i) {
    // Cannot fail: availability was checked and nothing else runs in between.
    const auto block = pool_.allocate();
    if (!block) throw Error(Errc::internal, "KvCacheManager::reserve: pool ran dry mid-reserve");
    s.blocks.push_back(*block);
  }
  return true;
}

void KvCacheManager::commit(int64_t seq, std::span<const int32_t> tokens) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) {
    throw Error(Errc::invalid_argument, "KvCacheManager::commit: unknown " + seq_name(seq));
  }
  Seq& s = it->second;
  const int64_t capacity = static_cast<int64_t>(s.blocks.size()) * block_size();
  if (s.n_tokens + static_cast<int64_t>(tokens.size()) > capacity) {
    throw Error(Errc::invalid_argument, "KvCacheManager::commit: " + seq_name(seq) + " writes " +
                                            std::to_string(tokens.size()) + " tokens after " +
                                            std::to_string(s.n_tokens) + " but only " +
                                            std::to_string(capacity) + " are reserved");
  }
  s.n_tokens += static_cast<int32_t>(tokens.size());
  if (!prefix_caching_) return;
  const size_t bs = static_cast<size_t>(block_size());
  for (const int32_t t : tokens) {
    s.partial.push_back(t);
    if (s.partial.size() < bs) continue;
    s.last_hash = KvBlockPool::hash_block(s.last_hash, s.partial, cache_key_);
    // A false return means an identical block is already published; this one
    // then stays private and is freed without caching. The chain continues
    // by content, so later blocks still hash the same as anyone else's.
    pool_.register_full_block(s.blocks[static_cast<size_t>(s.n_hashed)], s.last_hash);
    ++s.n_hashed;
    s.partial.clear();
  }
}

void KvCacheManager::release_unused(int64_t seq) {
  const auto it = seqs_.find(seq);
  if (it == seqs_.end()) throw Error(Errc::invalid_argument, "KvCacheManager::release_unused: unknown sequence");
  // Blocks past the committed tokens hold no hash (only full committed
  // blocks are published), so they go straight back to the free list.
  std::vector<int32_t>& blocks = it->second.blocks;
  const auto keep = static_cast<size_t>(n_blocks_needed(it->second.n_tokens));
  while (blocks.size() > keep) {
    pool_.decref(blocks.back());
    blocks.pop_back();
  }
}

bool KvCacheManager::free(int64_t seq) {
  const auto it = seqs_.find(seq);
  if (it == seqs_.end()) return false;
  // Tail first: the pool's eviction order does not depend on it, but a
  // failure midway would then leave a valid (shorter) table behind.
  std::vector<int32_t>& blocks = it->second.blocks;
  while (!blocks.empty()) {
    pool_.decref(blocks.back());
    blocks.pop_back();
  }
  if (it->second.state_slot >= 0) free_slots_.push_back(it->second.state_slot);
  seqs_.erase(it);
  return true;
}

std::span<const int32_t> KvCacheManager::block_table(int64_t seq) const {
  return get(seq, "block_table").blocks;
}

int32_t KvCacheManager::n_tokens(int64_t seq) const { return get(seq, "n_tokens").n_tokens; }

int32_t KvCacheManager::state_slot(int64_t seq) const { return get(seq, "state_slot").state_slot; }

void KvCacheManager::check_invariants() const {
  pool_.check_invariants();
  auto fail = [](const std::string& what) {
    throw Error(Errc::internal, "KvCacheManager invariant: " + what);
  };
  std::vector<int32_t> holders(static_cast<size_t>(pool_.n_blocks()), 0);
  for (const auto& [id, s] : seqs_) {
    for (const int32_t b : s.blocks) {
      if (b < 0 || b >= pool_.n_blocks()) fail(seq_name(id) + " holds out-of-range block");
      ++holders[static_cast<size_t>(b)];
    }
    if (static_cast<int64_t>(s.blocks.size()) * block_size() < s.n_tokens) {
      fail(seq_name(id) + " has more tokens than its blocks hold");
    }
    if (prefix_caching_ &&
        static_cast<int64_t>(s.n_hashed) * block_size() + static_cast<int64_t>(s.partial.size()) !=
            s.n_tokens) {
      fail(seq_name(id) + " hash chain does not cover its tokens");
    }
  }
  std::vector<int32_t> slot_holders(static_cast<size_t>(n_state_slots_), 0);
  for (const int32_t slot : free_slots_) {
    if (slot < 0 || slot >= n_state_slots_) fail("free state slot " + std::to_string(slot) + " out of range");
    ++slot_holders[static_cast<size_t>(slot)];
  }
  for (const auto& [id, s] : seqs_) {
    if (s.state_slot < 0) continue;
    if (s.state_slot >= n_state_slots_) fail(seq_name(id) + " holds an out-of-range state slot");
    ++slot_holders[static_cast<size_t>(s.state_slot)];
  }
  for (int32_t i = 0; i < n_state_slots_; ++i) {
    if (slot_holders[static_cast<size_t>(i)] != 1) {
      fail("state slot " + std::to_string(i) + " is held " + std::to_string(slot_holders[static_cast<size_t>(i)]) +
           " times (free list included)");
    }
  }
  for (int32_t b = 0; b < pool_.n_blocks(); ++b) {
    if (pool_.ref_count(b) != holders[static_cast<size_t>(b)]) {
      fail("block " + std::to_string(b) + " has ref " + std::to_string(pool_.ref_count(b)) +
           " but " + std::to_string(holders[static_cast<size_t>(b)]) + " holders");
    }
  }
}

}  // namespace troupe

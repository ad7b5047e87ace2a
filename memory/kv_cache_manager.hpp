// Per-sequence view of the KV block pool: each sequence's block table and
// token count, prefix matching on admission, all-or-nothing reservation before
// a step and hash publication after it. Integers only, like the pool.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "memory/kv_block_pool.hpp"

namespace troupe {

struct KvCacheOptions {
  int32_t n_blocks = 0;
  int32_t block_size = 16;
  bool prefix_caching = true;
  // Mixed into every block hash: caches of different models or adapters that
  // share one pool never match each other.
  uint64_t cache_key = 0;
  // Recurrent-state slots (a model with recurrent layers keeps a fixed state
  // per sequence beside its pages): each sequence takes one when it first
  // reserves and gives it back when freed. 0: none. A state cannot be
  // rebuilt from shared blocks, so with slots there is no prefix caching.
  int32_t n_state_slots = 0;
};

// What match_prefix would attach, computed without touching the pool.
struct PrefixProbe {
  int32_t n_tokens = 0;   // cached prompt tokens (a multiple of block_size)
  int32_t n_blocks = 0;   // blocks that would be attached
  int32_t n_revived = 0;  // of those, currently cached (ref 0): they stop being available
};

class KvCacheManager {
 public:
  explicit KvCacheManager(const KvCacheOptions& opts);

  // Attaches the longest run of cached full blocks that starts `tokens` and
  // returns how many tokens they cover. Never the whole prompt: at least one
  // token is left to compute so the model produces logits. `seq` must be new
  // (or empty); it is created here.
  int32_t match_prefix(int64_t seq, std::span<const int32_t> tokens);
  PrefixProbe probe_prefix(std::span<const int32_t> tokens) const;

  // Makes the block table cover n_tokens(seq) + n_new_tokens tokens,
  // allocating (and if need be evicting cached blocks), and gives `seq` a
  // state slot if it has none (with n_state_slots). All or nothing: false
  // leaves everything unchanged. Creates `seq` when new.
  bool reserve(int64_t seq, int32_t n_new_tokens);

  // Records that the step wrote `tokens` (the ids fed) after the sequence's
  // committed tokens; blocks that became full are published under their
  // prefix hash. Throws Errc::invalid_argument past the reserved capacity.
  void commit(int64_t seq, std::span<const int32_t> tokens);

  // Releases the blocks of `seq` past those its committed tokens use: the
  // pages reserved for proposed tokens that were rejected (speculative
  // decoding). Throws Errc::invalid_argument for an unknown sequence.
  void release_unused(int64_t seq);

  // Releases every block of `seq` (hashed ones stay cached for reuse).
  // Returns false for an unknown sequence.
  bool free(int64_t seq);

  bool contains(int64_t seq) const { return seqs_.count(seq) != 0; }
  // Throw Errc::invalid_argument for an unknown sequence.
  std::span<const int32_t> block_table(int64_t seq) const;
  int32_t n_tokens(int64_t seq) const;
  // The sequence's recurrent-state slot, -1 before its first reserve or
  // without slots. Throws Errc::invalid_argument for an unknown sequence.
  int32_t state_slot(int64_t seq) const;
  int32_t n_free_state_slots() const { return static_cast<int32_t>(free_slots_.size()); }

  int32_t block_size() const { return pool_.block_size(); }
  int32_t n_blocks_needed(int32_t n_tokens) const {
    return (n_tokens + block_size() - 1) / block_size();
  }
  // Blocks reserve(seq, n_new_tokens) would allocate (seq may be unknown).
  int32_t n_new_blocks_needed(int64_t seq, int32_t n_new_tokens) const;
  // Blocks that can still be allocated: free plus evictable cached.
  int32_t n_available_blocks() const { return pool_.n_available(); }
  // Whether a new sequence of n_tokens would fit now, ignoring prefix reuse.
  bool can_fit(int32_t n_tokens) const { return n_blocks_needed(n_tokens) <= n_available_blocks(); }
  int64_t capacity_tokens() const {
    return static_cast<int64_t>(pool_.n_blocks()) * pool_.block_size();
  }
  int32_t n_sequences() const { return static_cast<int32_t>(seqs_.size()); }

  const KvBlockPool& pool() const { return pool_; }
  // See KvBlockPool::drop_prefix_cache.
  void drop_prefix_cache() { pool_.drop_prefix_cache(); }

  // Pool invariants, plus: every block's ref count equals the number of block
  // tables holding it, every table covers its sequence's tokens, and every
  // state slot is either free or held by one sequence.
  // Throws Errc::internal.
  void check_invariants() const;

 private:
  struct Seq {
    std::vector<int32_t> blocks;
    int32_t n_tokens = 0;                         // tokens written (committed)
    int32_t n_hashed = 0;                         // leading blocks whose hash is known
    uint64_t last_hash = KvBlockPool::kRootHash;  // hash of block n_hashed - 1
    std::vector<int32_t> partial;                 // tokens of block n_hashed, not yet full
    int32_t state_slot = -1;
  };

  const Seq& get(int64_t seq, const char* op) const;

  KvBlockPool pool_;
  bool prefix_caching_;
  uint64_t cache_key_;
  int32_t n_state_slots_;
  std::vector<int32_t> free_slots_;  // a stack: the lowest slot on top
  std::unordered_map<int64_t, Seq> seqs_;
};

}  // namespace troupe

// Bookkeeping of the paged KV cache's physical blocks: ids, reference counts,
// a free queue and prefix hashes. Integers only; the tensors live elsewhere
// (memory/paged_kv.hpp) and never see this class.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <span>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace troupe {

// Every block is in exactly one state:
//  free   - ref 0, no hash, in the free queue; content is garbage.
//  used   - ref > 0, held by one or more sequences (hash optional).
//  cached - ref 0 but carries a prefix hash: its content is still valid and a
//           later request with the same prefix can revive it, until evicted.
enum class BlockState : uint8_t { free, used, cached };

struct KvBlockPoolStats {
  uint64_t prefix_queries = 0;  // lookup() calls
  uint64_t prefix_hits = 0;     // lookup() calls that returned a block
  uint64_t evictions = 0;       // cached blocks reclaimed by allocate()
};

class KvBlockPool {
 public:
  // The parent hash of a sequence's first block.
  static constexpr uint64_t kRootHash = 0x6a09e667f3bcc908ull;

  explicit KvBlockPool(int32_t n_blocks, int32_t block_size = 16);

  int32_t n_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t block_size() const { return block_size_; }

  // A fresh block with ref 1, taken from the free queue or, when that is
  // empty, by evicting a cached block (LRU-2, see next_eviction). nullopt when
  // every block is in use: "full" is an everyday answer, not an error.
  std::optional<int32_t> allocate();

  // Shares a used block (fork, beam). Throws Errc::invalid_argument for a
  // block that is not in use: reviving a cached block goes through lookup().
  void incref(int32_t block);
  // Drops one reference. At 0 a hashed block becomes cached, an unhashed one
  // goes back to the free queue. Throws on a block that is not in use, which
  // is how a double free shows.
  void decref(int32_t block);

  // Hash of one full block of tokens, chained on the hash of the block before
  // it (kRootHash for the first), so equal token runs at different prefixes
  // differ. `extra` separates caches that must not share (model, LoRA,
  // multimodal salt). Deterministic across runs and platforms.
  static uint64_t hash_block(uint64_t parent_hash, std::span<const int32_t> tokens,
                             uint64_t extra = 0);

  // Publishes a used, full block under `hash` so later requests can share it.
  // Returns false (and leaves the block unhashed) when another block already
  // holds that hash (two requests computed the same prefix at once: the first
  // one stays the shared copy). Re-registering the same hash is a no-op.
  bool register_full_block(int32_t block, uint64_t hash);

  // The block holding `hash`, with one more reference: a cached block is
  // revived, a used one is shared. Counts a prefix query (and hit).
  std::optional<int32_t> lookup(uint64_t hash);
  // Same question without side effects (for admission planning).
  std::optional<int32_t> find(uint64_t hash) const;

  int32_t ref_count(int32_t block) const;
  BlockState state(int32_t block) const;
  std::optional<uint64_t> hash_of(int32_t block) const;

  int32_t n_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t n_cached() const { return static_cast<int32_t>(evictable_.size()); }
  int32_t n_used() const { return n_blocks() - n_free() - n_cached(); }
  // Blocks allocate() can still hand out: free plus evictable.
  int32_t n_available() const { return n_free() + n_cached(); }
  const KvBlockPoolStats& stats() const { return stats_; }

  // The cached block allocate() would evict next, if the free queue is empty.
  // LRU-K with K = 2: the block whose second most recent access is oldest
  // goes first; a block accessed fewer than twice counts as infinitely old;
  // ties go to the least recently accessed. Accesses are allocate(),
  // incref() and lookup() hits, stamped by a logical clock (deterministic).
  std::optional<int32_t> next_eviction() const;

  // Forgets every prefix hash: cached blocks become free, blocks in use keep
  // their sequences but can no longer be shared. For when the KV contents
  // can no longer be trusted (a remote stage that held them was lost).
  void drop_prefix_cache();

  // Throws Errc::internal naming the first inconsistency: every block in
  // exactly one state and container, ref counts matching states, the hash map
  // and the block hashes mirroring each other.
  void check_invariants() const;

 private:
  struct Block {
    int32_t ref = 0;
    BlockState state = BlockState::free;
    bool has_hash = false;
    uint64_t hash = 0;
    uint64_t last_access = 0;  // logical time of the latest access; 0 = none
    uint64_t prev_access = 0;  // the access before that; 0 = none
  };
  // Eviction order: (second most recent access, most recent access, id).
  using EvictKey = std::tuple<uint64_t, uint64_t, int32_t>;

  void check_id(int32_t block, const char* op) const;
  void touch(Block& b);
  EvictKey evict_key(int32_t block) const;

  int32_t block_size_;
  std::vector<Block> blocks_;
  std::deque<int32_t> free_;      // FIFO of free blocks
  std::set<EvictKey> evictable_;  // cached blocks, first = next to evict
  std::unordered_map<uint64_t, int32_t> by_hash_;
  uint64_t clock_ = 0;
  KvBlockPoolStats stats_;
};

}  // namespace troupe

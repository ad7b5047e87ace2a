// KV block pool: reference counting, the free queue, prefix-hash sharing and
// LRU-2 eviction of cached blocks. See kv_block_pool.hpp for the states.
#include "memory/kv_block_pool.hpp"

#include <string>
#include <tuple>

#include "core/error.hpp"

namespace troupe {
namespace {

// splitmix64's finaliser: a bijection with full avalanche, so chained hashes
// stay well mixed however regular the token ids are.
uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

std::string block_name(int32_t block) { return "KV block " + std::to_string(block); }

}  // namespace

KvBlockPool::KvBlockPool(int32_t n_blocks, int32_t block_size) : block_size_(block_size) {
  if (n_blocks <= 0 || block_size <= 0) {
    throw Error(Errc::invalid_argument, "KvBlockPool: n_blocks (" + std::to_string(n_blocks) +
                                            ") and block_size (" + std::to_string(block_size) +
                                            ") must be positive");
  }
  blocks_.resize(static_cast<size_t>(n_blocks));
  for (int32_t i = 0; i < n_blocks; ++i) free_.push_back(i);
}

uint64_t KvBlockPool::hash_block(uint64_t parent_hash, std::span<const int32_t> tokens,
                                 uint64_t extra) {
  uint64_t h = mix64(parent_hash ^ 0x9e3779b97f4a7c15ull);
  h = mix64(h ^ mix64(extra + 0x3c6ef372fe94f82bull));
  // Two token ids per 64-bit word: half the mixing rounds of one per word.
  size_t i = 0;
  for (; i + 1 < tokens.size(); i += 2) {
    const uint64_t w = static_cast<uint64_t>(static_cast<uint32_t>(tokens[i])) |
                       (static_cast<uint64_t>(static_cast<uint32_t>(tokens[i + 1])) << 32);
    h = mix64(h ^ mix64(w + 0xbb67ae8584caa73bull));
  }
  if (i < tokens.size()) {
    h = mix64(h ^ mix64(static_cast<uint32_t>(tokens[i]) + 0xa54ff53a5f1d36f1ull));
  }
  // The length separates a block from its own prefix padded with zeros.
  return mix64(h ^ (static_cast<uint64_t>(tokens.size()) * 0x510e527fade682d1ull));
}

void KvBlockPool::check_id(int32_t block, const char* op) const {
  if (block < 0 || block >= n_blocks()) {
    throw Error(Errc::invalid_argument, std::string("KvBlockPool::") + op + ": " +
                                            block_name(block) + " out of range [0, " +
                                            std::to_string(n_blocks()) + ")");
  }
}

void KvBlockPool::touch(Block& b) {
  b.prev_access = b.last_access;
  b.last_access = ++clock_;
}

KvBlockPool::EvictKey KvBlockPool::evict_key(int32_t block) const {
  const Block& b = blocks_[static_cast<size_t>(block)];
  // prev_access == 0 (fewer than two accesses) sorts first: infinitely old.
  return {b.prev_access, b.last_access, block};
}

std::optional<int32_t> KvBlockPool::allocate() {
  int32_t id;
  if (!free_.empty()) {
    id = free_.front();
    free_.pop_front();
  } else if (!evictable_.empty()) {
    id = std::get<2>(*evictable_.begin());
    evictable_.erase(evictable_.begin());
    by_hash_.erase(blocks_[static_cast<size_t>(id)].hash);
    ++stats_.evictions;
  } else {
    return std::nullopt;
  }
  Block& b = blocks_[static_cast<size_t>(id)];
  // New content: the old access history and hash belong to the old content.
  b = Block{};
  b.ref = 1;
  b.state = BlockState::used;
  touch(b);
  return id;
}

void KvBlockPool::incref(int32_t block) {
  check_id(block, "incref");
  Block& b = blocks_[static_cast<size_t>(block)];
  if (b.state != BlockState::used) {
    throw Error(Errc::invalid_argument,
                "KvBlockPool::incref: " + block_name(block) + " is not in use");
  }
  ++b.ref;
  touch(b);
}

void KvBlockPool::decref(int32_t block) {
  check_id(block, "decref");
  Block& b = blocks_[static_cast<size_t>(block)];
  if (b.state != BlockState::used) {
    throw Error(Errc::invalid_argument,
                "KvBlockPool::decref: " + block_name(block) + " is not in use (double free?)");
  }
  if (--b.ref > 0) return;
  if (b.has_hash) {
    b.state = BlockState::cached;
    evictable_.insert(evict_key(block));
  } else {
    b.state = BlockState::free;
    free_.push_back(block);
  }
}

void KvBlockPool::drop_prefix_cache() {
  for (const EvictKey& key : evictable_) {
    const int32_t id = std::get<2>(key);
    Block& b = blocks_[static_cast<size_t>(id)];
    b.state = BlockState::free;
    free_.push_back(id);
  }
  evictable_.clear();
  for (Block& b : blocks_) {
    b.has_hash = false;
    b.hash = 0;
  }
  by_hash_.clear();
}

bool KvBlockPool::register_full_block(int32_t block, uint64_t hash) {
  check_id(block, "register_full_block");
  Block& b = blocks_[static_cast<size_t>(block)];
  if (b.state != BlockState::used) {
    throw Error(Errc::invalid_argument,
                "KvBlockPool::register_full_block: " + block_name(block) + " is not in use");
  }
  if (b.has_hash) {
    if (b.hash == hash) return true;
    throw Error(Errc::invalid_argument, "KvBlockPool::register_full_block: " + block_name(block) +
                                            " already carries a different hash");
  }
  if (by_hash_.count(hash) != 0) return false;
  b.has_hash = true;
  b.hash = hash;
  by_hash_.emplace(hash, block);
  return true;
}

std::optional<int32_t> KvBlockPool::find(uint64_t hash) const {
  const auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  return it->second;
}

std::optional<int32_t> KvBlockPool::lookup(uint64_t hash) {
  ++stats_.prefix_queries;
  const auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  ++stats_.prefix_hits;
  const int32_t id = it->second;
  Block& b = blocks_[static_cast<size_t>(id)];
  if (b.state == BlockState::cached) {
    // The key must be erased before touch() changes it.
    evictable_.erase(evict_key(id));
    b.state = BlockState::used;
  }
  ++b.ref;
  touch(b);
  return id;
}

int32_t KvBlockPool::ref_count(int32_t block) const {
  check_id(block, "ref_count");
  return blocks_[static_cast<size_t>(block)].ref;
}

BlockState KvBlockPool::state(int32_t block) const {
  check_id(block, "state");
  return blocks_[static_cast<size_t>(block)].state;
}

std::optional<uint64_t> KvBlockPool::hash_of(int32_t block) const {
  check_id(block, "hash_of");
  const Block& b = blocks_[static_cast<size_t>(block)];
  if (!b.has_hash) return std::nullopt;
  return b.hash;
}

std::optional<int32_t> KvBlockPool::next_eviction() const {
  if (evictable_.empty()) return std::nullopt;
  return std::get<2>(*evictable_.begin());
}

void KvBlockPool::check_invariants() const {
  auto fail = [](const std::string& what) {
    throw Error(Errc::internal, "KvBlockPool invariant: " + what);
  };
  std::vector<int> in_free(blocks_.size(), 0);
  for (const int32_t id : free_) {
    if (id < 0 || id >= n_blocks()) fail("free queue holds out-of-range id " + std::to_string(id));
    if (++in_free[static_cast<size_t>(id)] > 1) fail(block_name(id) + " twice in the free queue");
  }
  std::vector<int> in_evictable(blocks_.size(), 0);
  for (const EvictKey& key : evictable_) {
    const int32_t id = std::get<2>(key);
    if (id < 0 || id >= n_blocks()) fail("evictable set holds out-of-range id");
    if (key != evict_key(id)) fail(block_name(id) + " has a stale eviction key");
    if (++in_evictable[static_cast<size_t>(id)] > 1) fail(block_name(id) + " twice in evictable");
  }
  size_t n_hashed = 0;
  for (int32_t id = 0; id < n_blocks(); ++id) {
    const Block& b = blocks_[static_cast<size_t>(id)];
    const bool free_q = in_free[static_cast<size_t>(id)] == 1;
    const bool evict_q = in_evictable[static_cast<size_t>(id)] == 1;
    switch (b.state) {
      case BlockState::free:
        if (b.ref != 0 || b.has_hash || !free_q || evict_q)
          fail(block_name(id) + " free but inconsistent");
        break;
      case BlockState::used:
        if (b.ref <= 0 || free_q || evict_q) fail(block_name(id) + " used but inconsistent");
        break;
      case BlockState::cached:
        if (b.ref != 0 || !b.has_hash || free_q || !evict_q)
          fail(block_name(id) + " cached but inconsistent");
        break;
    }
    const bool stamps_ok = b.last_access == 0
                               ? b.prev_access == 0
                               : b.prev_access < b.last_access && b.last_access <= clock_;
    if (!stamps_ok) fail(block_name(id) + " has bad access stamps");
    if (b.has_hash) {
      ++n_hashed;
      const auto it = by_hash_.find(b.hash);
      if (it == by_hash_.end() || it->second != id)
        fail(block_name(id) + " hash not mapped back to it");
    }
  }
  if (n_hashed != by_hash_.size()) fail("hash map has entries for unhashed blocks");
}

}  // namespace troupe

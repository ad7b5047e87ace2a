// The vision actor's memory of recent images: their features by the digest
// of their bytes, within a byte budget, the least recently used dropped
// first. A conversation's later turns send its images again; with this, the
// tower runs once per image, as the prefix cache computes its tokens' KV
// once. Plain class, no actors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <string_view>
#include <unordered_map>

#include "actors/tensor_pool.hpp"

namespace troupe {

// Who an image is: two independent 64-bit hashes of its bytes and their
// count, so that a match is the same bytes but for a chance of 2^-128.
struct ImageKey {
  uint64_t digest = 0;  // keys the prefix cache too (PromptImage::digest)
  uint64_t check = 0;
  size_t size = 0;

  static ImageKey of(std::string_view bytes);
  bool operator==(const ImageKey&) const = default;
};

class ImageFeatureCache {
 public:
  explicit ImageFeatureCache(size_t max_bytes) : max_bytes_(max_bytes) {}

  // The features kept for this image (now the most recently used), or null.
  TensorHandle find(const ImageKey& key);
  // Keeps `features` (immutable from now on: requests share them), dropping
  // the least recently used entries to stay within the budget. Features
  // larger than the whole budget are not kept.
  void insert(const ImageKey& key, TensorHandle features);

  size_t bytes() const { return bytes_; }
  size_t size() const { return lru_.size(); }

 private:
  struct Entry {
    ImageKey key;
    TensorHandle features;
    size_t bytes = 0;
  };
  size_t max_bytes_;
  size_t bytes_ = 0;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<uint64_t, std::list<Entry>::iterator> by_digest_;
};

}  // namespace troupe

#include "actors/image_feature_cache.hpp"

namespace troupe {
namespace {

// FNV-1a from a given basis: two bases give two independent hashes.
uint64_t fnv1a(std::string_view bytes, uint64_t h) {
  for (const char c : bytes) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

ImageKey ImageKey::of(std::string_view bytes) {
  // The second hash runs over the bytes in another state, from another
  // basis; equal bytes agree on both, and a collision must hit both.
  return {.digest = fnv1a(bytes, 0xcbf29ce484222325ull),
          .check = fnv1a(bytes, 0x84222325cbf29ce4ull) ^ (bytes.size() * 0x9e3779b97f4a7c15ull),
          .size = bytes.size()};
}

TensorHandle ImageFeatureCache::find(const ImageKey& key) {
  const auto it = by_digest_.find(key.digest);
  if (it == by_digest_.end() || !(it->second->key == key)) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->features;
}

void ImageFeatureCache::insert(const ImageKey& key, TensorHandle features) {
  if (!features) return;
  const size_t bytes = features->size() * sizeof(float);
  if (bytes > max_bytes_) return;
  if (const auto it = by_digest_.find(key.digest); it != by_digest_.end()) {
    bytes_ -= it->second->bytes;
    lru_.erase(it->second);
    by_digest_.erase(it);
  }
  while (!lru_.empty() && bytes_ + bytes > max_bytes_) {
    bytes_ -= lru_.back().bytes;
    by_digest_.erase(lru_.back().key.digest);
    lru_.pop_back();
  }
  lru_.push_front({.key = key, .features = std::move(features), .bytes = bytes});
  by_digest_[key.digest] = lru_.begin();
  bytes_ += bytes;
}

}  // namespace troupe

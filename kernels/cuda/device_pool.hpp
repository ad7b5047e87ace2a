// The persistent weight pool: device memory in large chunks, bump-allocated
// at upload time (never per step). A chunk is returned to the driver when
// every weight in it has been released.
#pragma once

#include <cstddef>
#include <unordered_map>
#include <vector>

namespace troupe::cuda {

class DevicePool {
 public:
  explicit DevicePool(size_t chunk_bytes) : chunk_bytes_(chunk_bytes) {}
  ~DevicePool();
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  // 256-byte aligned; throws Error(out_of_memory) when the device is full.
  void* alloc(size_t bytes);
  // False when p did not come from this pool.
  bool release(void* p);
  bool owns(const void* p) const { return blocks_.count(const_cast<void*>(p)) != 0; }
  size_t live_bytes() const { return live_bytes_; }

 private:
  struct Chunk {
    char* base;
    size_t cap;
    size_t used;
    int live;
  };
  struct Block {
    size_t chunk;
    size_t bytes;
  };
  size_t chunk_bytes_;
  std::vector<Chunk> chunks_;  // freed chunks keep their slot with base == nullptr
  std::unordered_map<void*, Block> blocks_;
  size_t live_bytes_ = 0;
};

}  // namespace troupe::cuda

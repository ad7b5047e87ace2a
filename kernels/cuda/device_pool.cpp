// DevicePool: chunked bump allocation with per-chunk live counts.
#include "kernels/cuda/device_pool.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "core/error.hpp"
#include "kernels/cuda/cuda_check.hpp"

namespace troupe::cuda {
namespace {
constexpr size_t kAlign = 256;
}  // namespace

DevicePool::~DevicePool() {
  for (Chunk& c : chunks_) {
    if (c.base != nullptr) cudaFree(c.base);
  }
}

void* DevicePool::alloc(size_t bytes) {
  const size_t need = std::max<size_t>(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  if (chunks_.empty() || chunks_.back().base == nullptr || chunks_.back().cap - chunks_.back().used < need) {
    const size_t cap = std::max(chunk_bytes_, need);
    void* base = nullptr;
    const cudaError_t e = cudaMalloc(&base, cap);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      throw Error(Errc::out_of_memory, "CUDA weight pool: cannot allocate a chunk of " + std::to_string(cap) +
                                           " bytes (" + cudaGetErrorString(e) + "); " + std::to_string(live_bytes_) +
                                           " bytes of weights already on the device");
    }
    chunks_.push_back({static_cast<char*>(base), cap, 0, 0});
  }
  Chunk& c = chunks_.back();
  void* p = c.base + c.used;
  c.used += need;
  ++c.live;
  blocks_[p] = {chunks_.size() - 1, bytes};
  live_bytes_ += bytes;
  return p;
}

bool DevicePool::release(void* p) {
  const auto it = blocks_.find(p);
  if (it == blocks_.end()) return false;
  Chunk& c = chunks_[it->second.chunk];
  live_bytes_ -= it->second.bytes;
  blocks_.erase(it);
  if (--c.live == 0) {
    // Unchecked: a free fails only on a device that already failed, and
    // teardown (destructors) must go on then.
    cudaFree(c.base);
    (void)cudaGetLastError();
    c.base = nullptr;
  }
  return true;
}

}  // namespace troupe::cuda

// Staging: pinned host buffer, device mirror, shared identical blobs.
#include "kernels/cuda/staging.hpp"

#include <cuda_runtime.h>

#include <cstring>

#include "kernels/cuda/cuda_check.hpp"

namespace troupe::cuda {
namespace {
constexpr size_t kStagingAlign = 256;
constexpr size_t kMaxShared = 32;  // blobs remembered for sharing (a step stages a handful)
}  // namespace

Staging::Staging(size_t bytes) : cap_(bytes) {
  void* host = nullptr;
  void* dev = nullptr;
  TROUPE_CUDA_CHECK(cudaHostAlloc(&host, cap_, cudaHostAllocDefault));
  const cudaError_t e = cudaMalloc(&dev, cap_);
  if (e != cudaSuccess) {
    cudaFreeHost(host);
    TROUPE_CUDA_CHECK(e);
  }
  host_ = static_cast<unsigned char*>(host);
  dev_ = static_cast<unsigned char*>(dev);
}

Staging::~Staging() {
  cudaFreeHost(host_);
  cudaFree(dev_);
}

std::optional<Staging::Slot> Staging::put(StageTag tag, const void* data, size_t bytes) {
  for (const Blob& b : blobs_) {
    if (b.tag == tag && b.bytes == bytes && std::memcmp(host_ + b.offset, data, bytes) == 0) {
      return Slot{dev_ + b.offset, host_ + b.offset, bytes, false};
    }
  }
  const size_t start = (used_ + kStagingAlign - 1) / kStagingAlign * kStagingAlign;
  if (start > cap_ || bytes > cap_ - start) return std::nullopt;
  if (bytes > 0) std::memcpy(host_ + start, data, bytes);
  used_ = start + bytes;
  if (blobs_.size() < kMaxShared) blobs_.push_back({tag, start, bytes});
  return Slot{dev_ + start, host_ + start, bytes, true};
}

void Staging::reset() {
  ++epoch_;
  used_ = 0;
  blobs_.clear();
}

}  // namespace troupe::cuda

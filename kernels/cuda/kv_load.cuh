// Reading one cached K or V row on the device, whatever the cache's type
// (memory/kv_type.hpp): the attention kernels (attention.cu,
// attention_mma.cu) read rows in place and convert in registers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "memory/kv_type.hpp"

namespace troupe::cuda {

// KvType as a template argument (nvcc takes the enum's value).
constexpr int kF32 = static_cast<int>(KvType::f32);
constexpr int kF16 = static_cast<int>(KvType::f16);
constexpr int kBf16 = static_cast<int>(KvType::bf16);
constexpr int kQ8 = static_cast<int>(KvType::q8_0);
constexpr int kQ8Group = static_cast<int>(kKvQ8Group);

// Value d of a cached row of head_dim values in type KT, as f32. Rows are
// 2-byte aligned for every 16-bit read (row bytes and head_dim are even).
template <int KT>
__device__ __forceinline__ float kv_load(const unsigned char* __restrict__ row, int64_t d, int64_t head_dim) {
  if constexpr (KT == kF32) {
    return reinterpret_cast<const float*>(row)[d];
  } else if constexpr (KT == kF16) {
    return __half2float(reinterpret_cast<const __half*>(row)[d]);
  } else if constexpr (KT == kBf16) {
    return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(row)[d]);
  } else {
    const float scale = __half2float(reinterpret_cast<const __half*>(row + head_dim)[d / kQ8Group]);
    return scale * static_cast<float>(static_cast<int8_t>(row[d]));
  }
}

}  // namespace troupe::cuda

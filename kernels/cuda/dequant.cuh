// Device-side readers of the weight dtypes (f32, f16, bf16, the GGUF
// q8_0/q4_0/q4_1 blocks of core/dtype.hpp, and through block_decode.hpp
// q5_0/q5_1 and the k-quants), shared by the embedding, GEMV
// and dequantize kernels. Block fields are read as 16-bit words: GGUF blocks
// are only 2-byte aligned, so wider loads would be misaligned.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "core/dtype.hpp"
#include "kernels/cuda/block_decode.hpp"

namespace troupe::cuda {

__device__ __forceinline__ float half_bits_to_float(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float bf16_bits_to_float(uint16_t h) {
  return __uint_as_float(static_cast<uint32_t>(h) << 16);
}

// Element i of a row in dtype t (row: the row's first byte).
__device__ __forceinline__ float load_element(const unsigned char* row, DType t, int64_t i) {
  switch (t) {
    case DType::f32: return reinterpret_cast<const float*>(row)[i];
    case DType::f16: return half_bits_to_float(reinterpret_cast<const uint16_t*>(row)[i]);
    case DType::bf16: return bf16_bits_to_float(reinterpret_cast<const uint16_t*>(row)[i]);
    case DType::q8_0: {
      const unsigned char* b = row + (i / kQK) * sizeof(BlockQ8_0);
      const float d = half_bits_to_float(*reinterpret_cast<const uint16_t*>(b));
      return d * static_cast<float>(static_cast<int8_t>(b[2 + i % kQK]));
    }
    case DType::q4_0: {
      const unsigned char* b = row + (i / kQK) * sizeof(BlockQ4_0);
      const float d = half_bits_to_float(*reinterpret_cast<const uint16_t*>(b));
      const int j = static_cast<int>(i % kQK);
      const int q = j < kQK / 2 ? (b[2 + j] & 0x0F) : (b[2 + j - kQK / 2] >> 4);
      return d * static_cast<float>(q - 8);
    }
    case DType::q4_1: {
      const unsigned char* b = row + (i / kQK) * sizeof(BlockQ4_1);
      const float d = half_bits_to_float(reinterpret_cast<const uint16_t*>(b)[0]);
      const float m = half_bits_to_float(reinterpret_cast<const uint16_t*>(b)[1]);
      const int j = static_cast<int>(i % kQK);
      const int q = j < kQK / 2 ? (b[4 + j] & 0x0F) : (b[4 + j - kQK / 2] >> 4);
      return d * static_cast<float>(q) + m;
    }
    default: {  // q5_0/q5_1 and the k-quants: the element's whole chunk (embedding rows only)
      float w[kQK];
      if (decode_block_chunk(row, t, i / kQK, w)) return w[i % kQK];
      break;
    }
  }
  return 0.0f;
}

}  // namespace troupe::cuda

// The GEMV kernels' readers (gemv.cu, gemv_staged.cu): a row's chunk of
// weights dequantized to f32 in registers, per weight type, and the dot of
// a chunk with the activations in the order every GEMV kernel sums it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "core/dtype.hpp"
#include "kernels/cuda/dequant.cuh"

namespace troupe::cuda::gemv_detail {

// ---- per-dtype chunk loaders: elements [c * kChunk, (c + 1) * kChunk) of a row

__device__ __forceinline__ void unpack_bf16x2(uint32_t v, float* out) {
  out[0] = __uint_as_float(v << 16);
  out[1] = __uint_as_float(v & 0xffff0000u);
}

__device__ __forceinline__ void unpack_f16x2(uint32_t v, float* out) {
  out[0] = half_bits_to_float(static_cast<uint16_t>(v & 0xffffu));
  out[1] = half_bits_to_float(static_cast<uint16_t>(v >> 16));
}

struct LoadBf16 {
  static constexpr int kChunk = 8;
  __device__ static void load(const unsigned char* row, int64_t c, float* w) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(row) + c);
    unpack_bf16x2(v.x, w);
    unpack_bf16x2(v.y, w + 2);
    unpack_bf16x2(v.z, w + 4);
    unpack_bf16x2(v.w, w + 6);
  }
};

struct LoadF16 {
  static constexpr int kChunk = 8;
  __device__ static void load(const unsigned char* row, int64_t c, float* w) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(row) + c);
    unpack_f16x2(v.x, w);
    unpack_f16x2(v.y, w + 2);
    unpack_f16x2(v.z, w + 4);
    unpack_f16x2(v.w, w + 6);
  }
};

struct LoadF32 {
  static constexpr int kChunk = 8;
  __device__ static void load(const unsigned char* row, int64_t c, float* w) {
    const float4* p = reinterpret_cast<const float4*>(row) + 2 * c;
    const float4 a = __ldg(p);
    const float4 b = __ldg(p + 1);
    w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w;
    w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
  }
};

// q8_0: 34-byte blocks, so only 2-byte alignment: 17 half-word loads.
struct LoadQ8_0 {
  static constexpr int kChunk = 32;
  __device__ static void load(const unsigned char* row, int64_t c, float* w) {
    const uint16_t* b = reinterpret_cast<const uint16_t*>(row + c * static_cast<int64_t>(sizeof(BlockQ8_0)));
    const float d = half_bits_to_float(__ldg(b));
#pragma unroll
    for (int j = 0; j < kQK / 2; ++j) {
      const uint16_t v = __ldg(b + 1 + j);
      w[2 * j] = d * static_cast<float>(static_cast<int8_t>(v & 0xff));
      w[2 * j + 1] = d * static_cast<float>(static_cast<int8_t>(v >> 8));
    }
  }
};

// q4_0: 18-byte blocks; byte j holds elements j (low nibble) and j + 16.
struct LoadQ4_0 {
  static constexpr int kChunk = 32;
  __device__ static void load(const unsigned char* row, int64_t c, float* w) {
    const uint16_t* b = reinterpret_cast<const uint16_t*>(row + c * static_cast<int64_t>(sizeof(BlockQ4_0)));
    const float d = half_bits_to_float(__ldg(b));
#pragma unroll
    for (int j = 0; j < kQK / 4; ++j) {
      const uint16_t v = __ldg(b + 1 + j);
      w[2 * j] = d * static_cast<float>(static_cast<int>(v & 0x0f) - 8);
      w[2 * j + 16] = d * static_cast<float>(static_cast<int>((v >> 4) & 0x0f) - 8);
      w[2 * j + 1] = d * static_cast<float>(static_cast<int>((v >> 8) & 0x0f) - 8);
      w[2 * j + 17] = d * static_cast<float>(static_cast<int>(v >> 12) - 8);
    }
  }
};

// q4_1: 20-byte blocks are 4-byte aligned: word loads.
struct LoadQ4_1 {
  static constexpr int kChunk = 32;
  __device__ static void load(const unsigned char* row, int64_t c, float* w) {
    const uint32_t* b = reinterpret_cast<const uint32_t*>(row + c * static_cast<int64_t>(sizeof(BlockQ4_1)));
    const uint32_t dm = __ldg(b);
    const float d = half_bits_to_float(static_cast<uint16_t>(dm & 0xffffu));
    const float m = half_bits_to_float(static_cast<uint16_t>(dm >> 16));
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t v = __ldg(b + 1 + j);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const uint32_t byte = (v >> (8 * k)) & 0xffu;
        w[4 * j + k] = d * static_cast<float>(byte & 0x0f) + m;
        w[4 * j + k + 16] = d * static_cast<float>(byte >> 4) + m;
      }
    }
  }
};

// q5_0/q5_1 and the k-quants (block_decode.hpp): 32 weights a chunk, every
// field read a byte at a time (their blocks are only 2-byte aligned).
template <DType T>
struct LoadBlocks {
  static constexpr int kChunk = 32;
  __device__ static void load(const unsigned char* row, int64_t c, float* w) { decode_block_chunk(row, T, c, w); }
};

// dot(w chunk, x chunk) with x read by xload (a global or a shared-memory
// read): the one order every GEMV kernel sums a chunk in, so the staged
// kernel's rows are the plain kernel's bit for bit.
template <int K, class XLoad>
__device__ __forceinline__ float chunk_dot(const float* w, const float4* xp, XLoad xload) {
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < K / 4; ++j) {
    const float4 v = xload(xp + j);
    s += w[4 * j] * v.x + w[4 * j + 1] * v.y + w[4 * j + 2] * v.z + w[4 * j + 3] * v.w;
  }
  return s;
}

struct GlobalX {
  __device__ float4 operator()(const float4* p) const { return __ldg(p); }
};

// acc[t] += dot(w chunk, x[t] chunk) for every token.
template <int K, int MaxT>
__device__ __forceinline__ void accumulate(float* acc, const float* w, const float* __restrict__ x, int64_t n_in,
                                           int n_tokens, int64_t e0) {
#pragma unroll
  for (int t = 0; t < MaxT; ++t) {
    if (t < n_tokens) acc[t] += chunk_dot<K>(w, reinterpret_cast<const float4*>(x + t * n_in + e0), GlobalX{});
  }
}

// Host side: calls f(Loader{}) with the chunk loader of weight type t, so a
// launcher picks its kernel instantiation from one list of types.
template <class F>
void with_loader(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f(LoadF32{});
    case DType::f16: return f(LoadF16{});
    case DType::bf16: return f(LoadBf16{});
    case DType::q8_0: return f(LoadQ8_0{});
    case DType::q4_0: return f(LoadQ4_0{});
    case DType::q4_1: return f(LoadQ4_1{});
    case DType::q5_0: return f(LoadBlocks<DType::q5_0>{});
    case DType::q5_1: return f(LoadBlocks<DType::q5_1>{});
    case DType::q2_K: return f(LoadBlocks<DType::q2_K>{});
    case DType::q3_K: return f(LoadBlocks<DType::q3_K>{});
    case DType::q4_K: return f(LoadBlocks<DType::q4_K>{});
    case DType::q5_K: return f(LoadBlocks<DType::q5_K>{});
    case DType::q6_K: return f(LoadBlocks<DType::q6_K>{});
    case DType::iq4_nl: return f(LoadBlocks<DType::iq4_nl>{});
    case DType::iq4_xs: return f(LoadBlocks<DType::iq4_xs>{});
    case DType::mxfp4: return f(LoadBlocks<DType::mxfp4>{});
  }
}

}  // namespace troupe::cuda::gemv_detail

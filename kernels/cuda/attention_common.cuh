// What the attention kernels (attention.cu, attention_mma.cu) share: reading
// one cached K or V row on the device, whatever the cache's type
// (memory/kv_type.hpp; rows are read in place and converted in registers),
// and where a prefill tile's queries and visible keys are.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/launchers.hpp"
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

// One unit of a row written by one thread: a value, or for q8_0 a whole
// group of 32 (its scale needs the group's max), rounded as
// kv_quantize_row rounds (scale = max|x| / 127 in fp16, values round(x / scale)).
template <int KT>
__device__ __forceinline__ void kv_store_unit(unsigned char* __restrict__ row, const float* __restrict__ x,
                                              int64_t u, int64_t head_dim) {
  if constexpr (KT == kF32) {
    reinterpret_cast<float*>(row)[u] = x[u];
  } else if constexpr (KT == kF16) {
    reinterpret_cast<__half*>(row)[u] = __float2half_rn(x[u]);
  } else if constexpr (KT == kBf16) {
    reinterpret_cast<__nv_bfloat16*>(row)[u] = __float2bfloat16_rn(x[u]);
  } else {
    const int64_t g0 = u * kQ8Group;
    float amax = 0.0f;
    for (int i = 0; i < kQ8Group; ++i) amax = fmaxf(amax, fabsf(x[g0 + i]));
    const float dscale = amax / 127.0f;
    const float id = dscale != 0.0f ? 1.0f / dscale : 0.0f;
    for (int i = 0; i < kQ8Group; ++i) {
      row[g0 + i] = static_cast<unsigned char>(static_cast<int8_t>(roundf(x[g0 + i] * id)));
    }
    reinterpret_cast<__half*>(row + head_dim)[u] = __float2half_rn(dscale);
  }
}

// The prefill tile of block blockIdx.x for head blockIdx.y: kAttnTileQ
// queries of one sequence from q0 on, of which n_rows exist.
struct PrefillTile {
  DevSeq seq;
  int q0;
  int n_rows;
  int64_t head, kv_head;       // kv_head = head / (n_head / n_head_kv): grouped-query
  int64_t first_row;           // the first query's row in q and out
  const int32_t* table;        // the sequence's block table
  int64_t pos0;                // the first query's position
  int64_t k_lo, k_hi;          // keys any of its queries sees: [k_lo, k_hi)
};

__device__ __forceinline__ PrefillTile prefill_tile(const AttnMeta& meta, int64_t n_head, int64_t n_head_kv,
                                                    int32_t window, bool causal) {
  PrefillTile t;
  t.seq = meta.seqs[meta.tiles[2 * blockIdx.x]];
  t.q0 = meta.tiles[2 * blockIdx.x + 1];
  t.n_rows = min(kAttnTileQ, t.seq.n_q - t.q0);
  t.head = blockIdx.y;
  t.kv_head = t.head / (n_head / n_head_kv);
  t.first_row = static_cast<int64_t>(t.seq.q_begin) + t.q0;
  t.table = meta.tables + t.seq.table;
  t.pos0 = static_cast<int64_t>(t.seq.n_past) + t.q0;
  // Both ends of the visible range grow with the query, so the tile's union
  // is [first row's lo, last row's hi).
  t.k_lo = window > 0 ? max(int64_t{0}, t.pos0 - window + 1) : int64_t{0};
  // Bidirectional (an encoder): every query sees the whole sequence. Rows
  // with a key_end (an image's tokens) see to it; it never falls as the row rises.
  const int64_t own_end = meta.key_end != nullptr ? meta.key_end[t.first_row + t.n_rows - 1] : t.pos0 + t.n_rows;
  t.k_hi = causal ? own_end : static_cast<int64_t>(t.seq.n_past) + t.seq.n_q;
  return t;
}

// Whether query row r of a tile (at position pr) sees key t.
__device__ __forceinline__ bool key_visible(const AttnMeta& meta, const PrefillTile& tile, int r, int64_t pr, int64_t t,
                                            int32_t window, bool causal) {
  if (r >= tile.n_rows) return false;
  const int64_t end = !causal                   ? tile.k_hi
                      : meta.key_end != nullptr ? int64_t{meta.key_end[tile.first_row + r]}
                                                : pr + 1;
  return t < end && (window <= 0 || t > pr - window);
}

// Gemma 2's soft-capping of a scaled score: cap * tanh(s / cap); cap 0: off.
__device__ __forceinline__ float soft_cap(float s, float cap) { return cap > 0.0f ? cap * tanhf(s / cap) : s; }

}  // namespace troupe::cuda

// quantize_acts (matmul_int8.hpp) on AVX-512: each token row to int8 blocks
// of 32 with their scale, the per-sub-block sums the bias and min terms use,
// and, for a GEMM, the tiled copy the VNNI panel tiles read. The values are
// the same for every path (quantize_acts_avx2 in matmul_int8_avx2.cpp gives
// the same q, d and sums); only how they are computed is this file's.
#include "kernels/cpu/matmul_int8.hpp"

#if defined(__x86_64__) || defined(__i386__)

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/error.hpp"
#include "kernels/cpu/scratch.hpp"
#include "kernels/cpu/x86_intrinsics.hpp"

namespace troupe::kernels::detail {
namespace {

size_t round64(size_t n) { return (n + 63) / 64 * 64; }

// One token row: blocks of 32 to int8 with d = absmax / 127 (round to
// nearest), the padding blocks zero; then the sum of each 16 q.
void quantize_row(const float* x, int64_t n_in, int64_t nb, int8_t* q, float* d, int32_t* sum16) {
  const int64_t nb_real = n_in / 32;
  for (int64_t b = 0; b < nb_real; ++b) {
    const __m512 x0 = _mm512_loadu_ps(x + 32 * b);
    const __m512 x1 = _mm512_loadu_ps(x + 32 * b + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
    const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
    const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(x0, _mm512_set1_ps(id)));
    const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(x1, _mm512_set1_ps(id)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 32 * b), _mm512_cvtsepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 32 * b + 16), _mm512_cvtsepi32_epi8(q1));
    d[b] = amax / 127.0f;
  }
  std::memset(q + 32 * nb_real, 0, static_cast<size_t>(32 * (nb - nb_real)));
  std::fill(d + nb_real, d + nb, 0.0f);
  // Sums of 16 from vpsadbw over q + 128 (each 8 bytes' sum in a 64-bit
  // lane), 64 inputs at a time: a horizontal add per 16 cost more than the
  // quantization itself. |q| <= 127, so the sums are the int32 q's.
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m256i evens = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  for (int64_t i = 0; i < nb / 2; ++i) {
    const __m512i u = _mm512_xor_si512(_mm512_loadu_si512(q + 64 * i), flip);
    const __m512i s8 = _mm512_sad_epu8(u, _mm512_setzero_si512());
    const __m512i s16 = _mm512_add_epi64(s8, _mm512_bsrli_epi128(s8, 8));  // 64-bit lanes 0, 2, 4, 6
    const __m256i s = _mm256_permutevar8x32_epi32(_mm512_cvtepi64_epi32(s16), evens);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(sum16 + 4 * i),
                     _mm_sub_epi32(_mm256_castsi256_si128(s), _mm_set1_epi32(16 * 128)));
  }
}

// A token's per-sub-block values from its sums of 16: bias = -offset * sum
// and dsum = d * sum, d of the sub-block's block.
void sub_values(const int32_t* sum16, const float* d, int64_t n_sub, int64_t sub_k, int32_t offset, int32_t* bias,
                float* dsum) {
  int64_t k = 0;
  const __m512i neg_offset = _mm512_set1_epi32(-offset);
  if (sub_k == 16) {  // sub-block k: sum16[k], block k / 2
    const __m512i half = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    for (; k + 16 <= n_sub; k += 16) {
      const __m512i s = _mm512_loadu_si512(sum16 + k);
      const __m512 dk = _mm512_permutexvar_ps(half, _mm512_castps256_ps512(_mm256_loadu_ps(d + k / 2)));
      _mm512_storeu_si512(bias + k, _mm512_mullo_epi32(s, neg_offset));
      _mm512_storeu_ps(dsum + k, _mm512_mul_ps(dk, _mm512_cvtepi32_ps(s)));
    }
  } else if (sub_k == 32) {  // sub-block k: sum16[2 k] + sum16[2 k + 1], block k
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    for (; k + 16 <= n_sub; k += 16) {
      const __m512i a = _mm512_loadu_si512(sum16 + 2 * k);
      const __m512i b = _mm512_loadu_si512(sum16 + 2 * k + 16);
      const __m512i s = _mm512_add_epi32(_mm512_permutex2var_epi32(a, even, b), _mm512_permutex2var_epi32(a, odd, b));
      const __m512 dk = _mm512_loadu_ps(d + k);
      _mm512_storeu_si512(bias + k, _mm512_mullo_epi32(s, neg_offset));
      _mm512_storeu_ps(dsum + k, _mm512_mul_ps(dk, _mm512_cvtepi32_ps(s)));
    }
  }
  const int64_t per_sub = sub_k / 16;
  for (; k < n_sub; ++k) {
    int32_t sum = 0;
    for (int64_t i = 0; i < per_sub; ++i) sum += sum16[k * per_sub + i];
    bias[k] = -offset * sum;
    dsum[k] = d[k * sub_k / 32] * static_cast<float>(sum);
  }
}

// dst + c * dst_stride holds column c of 8 rows of n 32-bit values (row t at
// src + t * src_stride values), t = 0..7 side by side: an 8x8 transpose in
// registers per 8 columns.
void transpose8(const void* src, int64_t src_stride, int64_t n, void* dst, int64_t dst_stride) {
  const auto* s = static_cast<const int32_t*>(src);
  auto* out = static_cast<uint8_t*>(dst);
  int64_t c = 0;
  for (; c + 8 <= n; c += 8) {
    __m256i r[8], t[8], u[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i * src_stride + c));
    for (int i = 0; i < 8; i += 2) {
      t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
      t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
      u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
      u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
      u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
      u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int i = 0; i < 4; ++i) {  // u[i]: columns i, i + 4 of rows 0-3; u[i + 4]: of rows 4-7
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (c + i) * dst_stride),
                          _mm256_permute2x128_si256(u[i], u[i + 4], 0x20));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (c + i + 4) * dst_stride),
                          _mm256_permute2x128_si256(u[i], u[i + 4], 0x31));
    }
  }
  for (; c < n; ++c) {
    for (int i = 0; i < 8; ++i) std::memcpy(out + c * dst_stride + 4 * i, s + i * src_stride + c, 4);
  }
}

}  // namespace

QuantizedActs quantize_acts(const float* x, int64_t n_tokens, int64_t n_in, bool lanes, int32_t offset,
                            int64_t sub_k, ThreadPool* pool) {
  static_assert(kActTile == 8, "transpose8 writes tiles of 8 tokens");
  if (sub_k != 16 && sub_k != 32) {  // the readers' sub-blocks (int8_readers.hpp)
    throw Error(Errc::internal, "quantize_acts: sub-blocks of " + std::to_string(sub_k) + " inputs");
  }
  QuantizedActs qa = act_sizes(n_tokens, n_in, sub_k);
  // Only a GEMM meets AMX's 16-row tiles; a decode's rows stay unpadded.
  const bool tiles = n_tokens >= kInt8GemmMinTokens;
  const int64_t padded = tiles ? (n_tokens + kActTokenPad - 1) / kActTokenPad * kActTokenPad : n_tokens;
  const int64_t n_lanes = qa.ldq / kLaneInputs;
  const size_t q_bytes = round64(static_cast<size_t>(padded * qa.ldq));
  const size_t d_bytes = round64(static_cast<size_t>(padded * qa.nb) * sizeof(float));
  const size_t s_bytes = round64(static_cast<size_t>(padded * qa.n_sub) * 4);
  const size_t t_bytes = round64(static_cast<size_t>(padded * 2 * qa.nb) * sizeof(int32_t));
  const size_t l_bytes = lanes ? round64(static_cast<size_t>(n_tokens * n_lanes) * 4) : 0;
  const size_t tq_bytes = tiles ? q_bytes : 0;
  const size_t ts_bytes = tiles ? round64(static_cast<size_t>(padded / kActTile * qa.n_sub) * sizeof(TileSub)) : 0;
  // q, d, sub_bias, sub_dsum, sum16, the lane arrays, the tiled copy.
  uint8_t* mem =
      scratch(Scratch::int8_acts, q_bytes + d_bytes + 2 * s_bytes + t_bytes + 3 * l_bytes + tq_bytes + ts_bytes);
  auto* q = reinterpret_cast<int8_t*>(mem);
  auto* d = reinterpret_cast<float*>(mem + q_bytes);
  auto* sub_bias = reinterpret_cast<int32_t*>(mem + q_bytes + d_bytes);
  auto* sub_dsum = reinterpret_cast<float*>(mem + q_bytes + d_bytes + s_bytes);
  auto* sum16 = reinterpret_cast<int32_t*>(mem + q_bytes + d_bytes + 2 * s_bytes);
  uint8_t* lane_mem = mem + q_bytes + d_bytes + 2 * s_bytes + t_bytes;
  uint8_t* tile_mem = lane_mem + 3 * l_bytes;
  auto* tile_q = reinterpret_cast<int8_t*>(tile_mem);
  auto* tile_sub = reinterpret_cast<TileSub*>(tile_mem + tq_bytes);
  auto token = [&](int64_t t) {
    int8_t* qt = q + t * qa.ldq;
    float* dt = d + t * qa.nb;
    int32_t* st = sum16 + t * 2 * qa.nb;
    if (t < n_tokens) {
      quantize_row(x + t * n_in, n_in, qa.nb, qt, dt, st);
    } else {  // padding rows
      std::memset(qt, 0, static_cast<size_t>(qa.ldq));
      std::fill(dt, dt + qa.nb, 0.0f);
      std::fill(st, st + 2 * qa.nb, 0);
    }
    const int64_t k0 = t * qa.n_sub;
    sub_values(st, dt, qa.n_sub, sub_k, offset, sub_bias + k0, sub_dsum + k0);
  };
  // A tile's copy: its 8 tokens' rows (q as 32-bit lanes, and the three
  // per-sub-block arrays) transposed, token minor.
  auto tile = [&](int64_t i) {
    const int64_t t0 = i * kActTile, k0 = t0 * qa.n_sub;
    transpose8(q + t0 * qa.ldq, n_lanes, n_lanes, tile_q + i * n_lanes * kActTile * kLaneInputs,
               kActTile * kLaneInputs);
    TileSub* ts = tile_sub + i * qa.n_sub;
    constexpr auto kStride = static_cast<int64_t>(sizeof(TileSub));
    transpose8(sub_bias + k0, qa.n_sub, qa.n_sub, ts->bias, kStride);
    // d per sub-block: each block's d, in every sub-block of the block.
    const int64_t per_block = 32 / sub_k;
    transpose8(d + t0 * qa.nb, qa.nb, qa.nb, ts->d, per_block * kStride);
    for (int64_t k = 0; k < qa.n_sub; k += per_block) {
      for (int64_t j = 1; j < per_block; ++j) std::memcpy(ts[k + j].d, ts[k].d, sizeof ts[k].d);
    }
    transpose8(sub_dsum + k0, qa.n_sub, qa.n_sub, ts->dsum, kStride);
  };
  if (tiles) {
    // A prefill's rows are quantized by all threads, a tile at a time (done
    // by the caller alone, it was a serial part of every prefill matmul).
    auto tiles_of = [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        for (int64_t t = i * kActTile; t < (i + 1) * kActTile; ++t) token(t);
        tile(i);
      }
    };
    if (pool != nullptr) {
      pool->parallel_for(padded / kActTile, tiles_of);
    } else {
      tiles_of(0, padded / kActTile);
    }
    qa.tile_q = tile_q;
    qa.tile_sub = tile_sub;
  } else {  // a decode's few rows inline
    for (int64_t t = 0; t < padded; ++t) token(t);
  }
  qa.q = q;
  qa.d = d;
  qa.sub_bias = sub_bias;
  qa.sub_dsum = sub_dsum;
  if (lanes) {
    auto* lane_d = reinterpret_cast<float*>(lane_mem);
    auto* lane_bias = reinterpret_cast<int32_t*>(lane_mem + l_bytes);
    auto* lane_dsum = reinterpret_cast<float*>(lane_mem + 2 * l_bytes);
    const __m512i ones = _mm512_set1_epi8(1);
    // Lane l of a 64-input pair belongs to block 2 p + l / 8.
    const __m512i block_of = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t pr = 0; pr < qa.nb / 2; ++pr) {
        const __m512i xq = _mm512_load_si512(q + t * qa.ldq + 64 * pr);
        // The sum of each lane's 4 signed q: vpdpbusd with 1s as the unsigned side.
        const __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, xq);
        double two_d;
        std::memcpy(&two_d, d + t * qa.nb + 2 * pr, sizeof two_d);
        const __m512 dd = _mm512_permutexvar_ps(block_of, _mm512_zextps128_ps512(_mm_castpd_ps(_mm_set_sd(two_d))));
        const int64_t l = t * n_lanes + 16 * pr;
        _mm512_store_ps(lane_d + l, dd);
        _mm512_store_si512(lane_bias + l, _mm512_mullo_epi32(sums, _mm512_set1_epi32(-offset)));
        _mm512_store_ps(lane_dsum + l, _mm512_mul_ps(dd, _mm512_cvtepi32_ps(sums)));
      }
    }
    qa.lane_d = lane_d;
    qa.lane_bias = lane_bias;
    qa.lane_dsum = lane_dsum;
  }
  return qa;
}

}  // namespace troupe::kernels::detail

#endif  // x86

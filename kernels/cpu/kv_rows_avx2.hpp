// Rows of a quantized KV cache (f16, bf16, q8_0) to and from AVX2
// registers, 8 values at a time: what the AVX2 attention tiles and lane
// attention read, and what kv_write stores. Include only from files built
// with -mavx2 -mfma -mf16c.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/dtype.hpp"
#include "kernels/cpu/kv_q8_scale.hpp"
#include "kernels/cpu/simd_avx2.hpp"
#include "memory/kv_type.hpp"

namespace troupe::kernels::cpu {
namespace {  // NOLINT: per-ISA translation units only

// Values [i, i + 8) of a row (q8_0 unscaled).
template <KvType T>
inline __m256 load8(const unsigned char* row, int64_t i) {
  if constexpr (T == KvType::f16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
  } else if constexpr (T == KvType::bf16) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  } else {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + i))));
  }
}

// Values [i, i + rem) (rem < 8), zero above: staged through 16 bytes so no
// load reads past the row.
template <KvType T>
inline __m256 load_part(const unsigned char* row, int64_t i, int64_t rem) {
  alignas(16) unsigned char buf[16] = {};
  const int64_t esize = T == KvType::q8_0 ? 1 : 2;
  std::memcpy(buf, row + esize * i, static_cast<size_t>(esize * rem));
  return load8<T>(buf, 0);
}

// dst[0, d) = the row's values as f32 (q8_0 times its group's scale, as
// kv_dequantize_row gives them).
template <KvType T>
inline void row_to_f32(float* dst, const unsigned char* row, int64_t d) {
  for (int64_t i = 0; i < d; i += 8) {
    __m256 x = d - i >= 8 ? load8<T>(row, i) : load_part<T>(row, i, d - i);
    if constexpr (T == KvType::q8_0) x = _mm256_mul_ps(x, _mm256_set1_ps(q8_scale(row, d, i / kKvQ8Group)));
    store_first(dst + i, x, d - i);
  }
}

// 8 values as f16 or bf16, with the bits of f32_to_fp16 / f32_to_bf16
// (core/dtype.cpp): round to nearest even, every NaN the quiet NaN with its
// sign (vcvtps2ph alone would keep the payload's top bits).
template <KvType T>
inline __m128i to_16bit(__m256 x) {
  const __m256i b = _mm256_castps_si256(x);
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  if constexpr (T == KvType::f16) {
    const __m256i quiet = _mm256_or_si256(_mm256_and_si256(b, _mm256_set1_epi32(INT32_MIN)),
                                          _mm256_set1_epi32(0x7fc00000));  // converts to sign | 0x7e00
    return _mm256_cvtps_ph(_mm256_castsi256_ps(_mm256_blendv_epi8(b, quiet, nan)),
                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  } else {
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
    const __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(b, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd)), 16);
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(0x40));
    // Each lane is below 2^16, so the saturating pack keeps it; the pack
    // works per 128-bit half, and qwords 0 and 2 hold the 8 results.
    const __m256i packed = _mm256_packus_epi32(_mm256_blendv_epi8(rounded, quiet, nan), _mm256_setzero_si256());
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08));
  }
}

// round(y) half away from zero, as std::lround, to int32 (a NaN gives
// INT32_MIN, whose low byte, like lround's, is 0). Exact: |y| - trunc(|y|)
// is representable for every float.
inline __m256i round_away(__m256 y) {
  const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN));
  const __m256 a = _mm256_andnot_ps(sign, y);
  const __m256 t = _mm256_round_ps(a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 up = _mm256_cmp_ps(_mm256_sub_ps(a, t), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  const __m256 r = _mm256_add_ps(t, _mm256_and_ps(up, _mm256_set1_ps(1.0f)));
  return _mm256_cvttps_epi32(_mm256_or_ps(r, _mm256_and_ps(y, sign)));
}

// The low byte of each of v's 8 lanes at dst (vpmovdb's truncation).
inline void store_low_bytes(unsigned char* dst, __m256i v) {
  const __m256i pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,  //
                                        0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m256i b = _mm256_shuffle_epi8(v, pick);
  const int32_t lo = _mm256_extract_epi32(b, 0), hi = _mm256_extract_epi32(b, 4);
  std::memcpy(dst, &lo, 4);
  std::memcpy(dst + 4, &hi, 4);
}

// Group [g0, g0 + 32) of a q8_0 row of d values (d a multiple of 8; shorter
// at the row's end): kv_quantize_row's amax (a NaN skipped), scale and
// rounding.
inline void store_q8_group(unsigned char* row, const float* src, int64_t d, int64_t g0) {
  const int64_t n = std::min(kKvQ8Group, d - g0);
  const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN));
  // maxps returns its second operand when either is NaN: a NaN |x| leaves
  // the running max, as std::max(amax, |x|) does.
  __m256 a = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) a = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(src + g0 + i)), a);
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  const float scale = _mm_cvtss_f32(m) / 127.0f;
  const __m256 inv = _mm256_set1_ps(scale != 0.0f ? 1.0f / scale : 0.0f);
  for (int64_t i = 0; i < n; i += 8) {
    store_low_bytes(row + g0 + i, round_away(_mm256_mul_ps(_mm256_loadu_ps(src + g0 + i), inv)));
  }
  const uint16_t h = f32_to_fp16(scale);
  std::memcpy(row + d + 2 * (g0 / kKvQ8Group), &h, sizeof h);
}

// row = src[0, d) as the cache stores it: kv_quantize_row's bytes
// (memory/kv_type.cpp), which the tests compare. A head_dim that is not a
// multiple of 8 takes kv_quantize_row itself.
template <KvType T>
inline void store_row(unsigned char* row, const float* src, int64_t d) {
  if (d % 8 != 0) return kv_quantize_row(T, src, row, d);
  if constexpr (T == KvType::q8_0) {
    for (int64_t g0 = 0; g0 < d; g0 += kKvQ8Group) store_q8_group(row, src, d, g0);
  } else {
    for (int64_t i = 0; i < d; i += 8) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(row + 2 * i), to_16bit<T>(_mm256_loadu_ps(src + i)));
    }
  }
}

}  // namespace
}  // namespace troupe::kernels::cpu

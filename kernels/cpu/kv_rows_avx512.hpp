// Rows of a quantized KV cache (f16, bf16, q8_0) to and from AVX-512
// registers, 16 values at a time: what the attention tiles and the lane
// attention read, and what kv_write stores. Include only from files built
// with -mavx512*.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/dtype.hpp"
#include "kernels/cpu/kv_q8_scale.hpp"
#include "kernels/cpu/simd_avx512.hpp"
#include "memory/kv_type.hpp"

namespace troupe::kernels::cpu {
namespace {  // NOLINT: per-ISA translation units only

// Values [i, i + 16) of a row (q8_0 unscaled); m masks a tail (lanes past
// it read nothing and are zero).
template <KvType T>
inline __m512 load16(const unsigned char* row, int64_t i, __mmask16 m = 0xffff) {
  if constexpr (T == KvType::f16) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + 2 * i));
  } else if constexpr (T == KvType::bf16) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, row + 2 * i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  } else {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, row + i)));
  }
}

// dst[0, d) = the row's values as f32 (q8_0 times its group's scale, as
// kv_dequantize_row gives them).
template <KvType T>
inline void row_to_f32(float* dst, const unsigned char* row, int64_t d) {
  for (int64_t i = 0; i < d; i += 16) {
    const __mmask16 m = d - i >= 16 ? 0xffff : tail_mask(d - i);
    __m512 x = load16<T>(row, i, m);
    if constexpr (T == KvType::q8_0) {
      // A group of 32 spans two registers; both take its scale.
      x = _mm512_mul_ps(x, _mm512_set1_ps(q8_scale(row, d, i / kKvQ8Group)));
    }
    _mm512_mask_storeu_ps(dst + i, m, x);
  }
}

// 16 values as f16 or bf16, with the bits of f32_to_fp16 / f32_to_bf16
// (core/dtype.cpp): round to nearest even, every NaN the quiet NaN with its
// sign (vcvtps2ph alone would keep the payload's top bits).
template <KvType T>
inline __m256i to_16bit(__m512 x) {
  const __m512i b = _mm512_castps_si512(x);
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  if constexpr (T == KvType::f16) {
    const __m512i quiet = _mm512_or_si512(_mm512_and_si512(b, _mm512_set1_epi32(INT32_MIN)),
                                          _mm512_set1_epi32(0x7fc00000));  // converts to sign | 0x7e00
    return _mm512_cvtps_ph(_mm512_castsi512_ps(_mm512_mask_blend_epi32(nan, b, quiet)),
                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  } else {
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
    const __m512i rounded =
        _mm512_srli_epi32(_mm512_add_epi32(b, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd)), 16);
    const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet));
  }
}

// round(y) half away from zero, as std::lround, to int32 (a NaN gives
// INT32_MIN, whose low byte, like lround's, is 0). Exact: |y| - trunc(|y|)
// is representable for every float.
inline __m512i round_away(__m512 y) {
  const __m512 a = _mm512_abs_ps(y);
  const __m512 t = _mm512_roundscale_ps(a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __mmask16 up = _mm512_cmp_ps_mask(_mm512_sub_ps(a, t), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __m512 r = _mm512_mask_add_ps(t, up, t, _mm512_set1_ps(1.0f));
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(y), _mm512_set1_epi32(INT32_MIN));
  return _mm512_cvttps_epi32(_mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(r), sign)));
}

// Group [g0, g0 + 32) of a q8_0 row of d values (shorter at the row's end):
// kv_quantize_row's amax (a NaN skipped), scale and rounding.
inline void store_q8_group(unsigned char* row, const float* src, int64_t d, int64_t g0) {
  const int64_t n = std::min(kKvQ8Group, d - g0);
  const __mmask16 m0 = n >= 16 ? 0xffff : tail_mask(n);
  const __mmask16 m1 = n >= 32 ? 0xffff : n > 16 ? tail_mask(n - 16) : 0;
  const __m512 x0 = _mm512_maskz_loadu_ps(m0, src + g0);
  const __m512 x1 = _mm512_maskz_loadu_ps(m1, src + g0 + 16);
  // maxps returns its second operand when either is NaN: a NaN |x| leaves
  // the running max, as std::max(amax, |x|) does.
  const __m512 a = _mm512_max_ps(_mm512_abs_ps(x1), _mm512_max_ps(_mm512_abs_ps(x0), _mm512_setzero_ps()));
  const float scale = _mm512_reduce_max_ps(a) / 127.0f;
  const __m512 inv = _mm512_set1_ps(scale != 0.0f ? 1.0f / scale : 0.0f);
  _mm512_mask_cvtepi32_storeu_epi8(row + g0, m0, round_away(_mm512_mul_ps(x0, inv)));
  _mm512_mask_cvtepi32_storeu_epi8(row + g0 + 16, m1, round_away(_mm512_mul_ps(x1, inv)));
  const uint16_t h = f32_to_fp16(scale);
  std::memcpy(row + d + 2 * (g0 / kKvQ8Group), &h, sizeof h);
}

// row = src[0, d) as the cache stores it: kv_quantize_row's bytes
// (memory/kv_type.cpp), which the tests compare.
template <KvType T>
inline void store_row(unsigned char* row, const float* src, int64_t d) {
  if constexpr (T == KvType::q8_0) {
    for (int64_t g0 = 0; g0 < d; g0 += kKvQ8Group) store_q8_group(row, src, d, g0);
  } else {
    for (int64_t i = 0; i < d; i += 16) {
      const __mmask16 m = d - i >= 16 ? 0xffff : tail_mask(d - i);
      _mm256_mask_storeu_epi16(row + 2 * i, m, to_16bit<T>(_mm512_maskz_loadu_ps(m, src + i)));
    }
  }
}

}  // namespace
}  // namespace troupe::kernels::cpu

// Reading rows of a quantized KV cache (f16, bf16, q8_0) into AVX-512
// registers, 16 values at a time: what the attention tiles and the lane
// attention share. Include only from files built with -mavx512*.
#pragma once

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

}  // namespace
}  // namespace troupe::kernels::cpu

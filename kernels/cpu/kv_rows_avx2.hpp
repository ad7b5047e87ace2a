// Reading rows of a quantized KV cache (f16, bf16, q8_0) into AVX2
// registers, 8 values at a time: what the AVX2 attention tiles and lane
// attention share. Include only from files built with -mavx2 -mfma -mf16c.
#pragma once

#include <cstring>

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

}  // namespace
}  // namespace troupe::kernels::cpu

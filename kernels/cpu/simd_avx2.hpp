// Helpers shared by the AVX2+FMA kernel files (vec_ops_avx2.cpp,
// attention_tiles_avx2.cpp, the packed matmuls). Include only from files built with -mavx2:
// internal linkage keeps each copy in its own -mavx2 translation unit, so
// none can leak into the portable path through the linker.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace troupe::kernels::cpu {
namespace {  // NOLINT: per-ISA translation units only

// Lanes < rem set (rem in 1..7).
inline __m256i tail_mask(int64_t rem) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(rem)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The first n (0..8) lanes of v at y.
inline void store_first(float* y, __m256 v, int64_t n) {
  if (n >= 8) {
    _mm256_storeu_ps(y, v);
  } else if (n > 0) {
    _mm256_maskstore_ps(y, tail_mask(n), v);
  }
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace
}  // namespace troupe::kernels::cpu

// Helpers shared by the AVX2+FMA kernel files (vec_ops_avx2.cpp, the
// attention tiles and lanes, the packed matmuls). Include only from files built with -mavx2:
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

// exp(x) as exp(r) * 2^k, k = round(x / ln2), |r| <= ln2/2, degree-7 Taylor
// polynomial (1e-8 relative). Saturates at exp(88); below ln(2^-126) gives
// 0; NaN propagates (max/min return their second operand on NaN).
inline __m256 exp_ps(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.33654475f);
  const __m256 hi = _mm256_set1_ps(88.0f);
  const __m256 tiny = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  x = _mm256_min_ps(hi, _mm256_max_ps(lo, x));
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // ln2 split in two so k * ln2_hi is exact (Cody-Waite).
  __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(tiny, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace
}  // namespace troupe::kernels::cpu

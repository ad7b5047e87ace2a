// What the AVX-512 kernel files (matmul, vec_ops, attention tiles, the int8
// path) share: <immintrin.h> (x86_intrinsics.hpp), the tail mask, the 8-way
// reduction, exp and the weight prefetch (weight_prefetch.hpp). Include only
// from files built with -mavx512*: internal linkage keeps each copy in its
// own translation unit.
#pragma once

#include <cstdint>

#include "kernels/cpu/weight_prefetch.hpp"
#include "kernels/cpu/x86_intrinsics.hpp"

namespace troupe::kernels::cpu {
namespace {  // NOLINT: per-ISA translation units only

// Lanes < rem set (rem in 0..16).
inline __mmask16 tail_mask(int64_t rem) { return static_cast<__mmask16>((1u << rem) - 1u); }

// Sums each of v[0..7] across its 16 lanes; lane i of the result is v[i]'s
// sum. Every vector is reduced in the same order whatever its slot, so a row's
// result does not depend on which tile it fell in.
[[gnu::always_inline]] inline __m256 reduce8(const __m512 (&v)[8]) {
  __m512 s[4];
  for (int i = 0; i < 4; ++i) {  // 512 -> 256 bits: [a.lo + a.hi | b.lo + b.hi]
    const __m512 a = v[2 * i], b = v[2 * i + 1];
    s[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  __m512 q[2];
  for (int i = 0; i < 2; ++i) {  // 256 -> 128 bits: one 128-bit lane per vector
    const __m512 a = s[2 * i], b = s[2 * i + 1];
    q[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
  }
  // 128 -> 32 bits: lane L of q[0] holds v[L], of q[1] holds v[4 + L].
  const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(q[0], q[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_ps(q[0], q[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 t = _mm512_add_ps(r, _mm512_permute_ps(r, _MM_SHUFFLE(2, 3, 0, 1)));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castps512_ps256(_mm512_permutexvar_ps(order, t));
}

// s[j] = sc * (sum of the lanes of row(j)) for j < n, eight rows per
// reduce8 instead of a horizontal sum each: the attention tiles' scores. A
// pass past n repeats row n - 1 and stores nothing for it.
template <class Row>
[[gnu::always_inline]] inline void sum_rows(float* s, int64_t n, float sc, Row row) {
  for (int64_t j = 0; j < n; j += 8) {
    __m512 a[8];
    for (int64_t u = 0; u < 8; ++u) a[u] = row(j + u < n ? j + u : n - 1);
    const __m256 r = _mm256_mul_ps(reduce8(a), _mm256_set1_ps(sc));
    _mm256_mask_storeu_ps(s + j, static_cast<__mmask8>(n - j >= 8 ? 0xff : (1u << (n - j)) - 1u), r);
  }
}

// exp(x) through exp(r) * 2^k with k = round(x / ln2) and |r| <= ln2/2; a
// degree-7 Taylor polynomial in r is within 1e-8 relative there. Inputs
// above 88 saturate at exp(88) (callers take exp of values <= 0, or feed it
// to 1/(1+e) where saturation is harmless); below ln(2^-126) gives 0. NaN
// propagates because max/min return their second operand on NaN.
inline __m512 exp_ps(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.33654475f);
  const __m512 hi = _mm512_set1_ps(88.0f);
  const __mmask16 tiny = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
  x = _mm512_min_ps(hi, _mm512_max_ps(lo, x));
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // ln2 split in two so k * ln2_hi is exact (Cody-Waite).
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127)), 23);
  return _mm512_maskz_mov_ps(static_cast<__mmask16>(~tiny), _mm512_mul_ps(p, _mm512_castsi512_ps(e)));
}

}  // namespace
}  // namespace troupe::kernels::cpu

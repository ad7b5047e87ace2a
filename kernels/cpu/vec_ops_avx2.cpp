// AVX2+FMA vector primitives (8 floats a register). Tails go through
// maskload/maskstore so odd sizes stay on the vector path. Everything is
// TU-local except the table getter, so no -mavx2 code leaks into the
// portable path.
#include "kernels/cpu/vec_ops.hpp"

#if defined(__AVX2__) && defined(__FMA__)
#include "kernels/cpu/simd_avx2.hpp"

namespace troupe::kernels::cpu {
namespace {

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// x / (1 + exp(-z)): silu when z = x, gelu_tanh when z = 2 * sqrt(2/pi) * (x + 0.044715 x^3).
inline __m256 times_sigmoid(__m256 x, __m256 z) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(x, _mm256_add_ps(one, exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), z))));
}

inline __m256 gelu_ps(__m256 x) {
  const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
  const __m256 inner = _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), x3, x);
  return times_sigmoid(x, _mm256_mul_ps(_mm256_set1_ps(2.0f * 0.7978845608028654f), inner));
}

// x * Phi(x) with erfc(|z|), z = x / sqrt(2), from Abramowitz & Stegun
// 7.1.26 (erf within 1.5e-7; the GELU within 3e-7 of x Phi(x)): x (1 - erfc / 2) for x >= 0,
// x erfc / 2 below. torch's "gelu" is the erf form; this stays within f32
// noise of it, where the tanh form is up to 5e-4 away (near x = 2.7).
inline __m256 gelu_erf_ps(__m256 x) {
  const __m256 z = _mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f));
  const __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), z);
  const __m256 t =
      _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), a, _mm256_set1_ps(1.0f)));
  __m256 p = _mm256_set1_ps(1.061405429f);
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.453152027f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.421413741f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.284496736f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.254829592f));
  p = _mm256_mul_ps(p, t);
  const __m256 half_erfc = _mm256_mul_ps(
      _mm256_set1_ps(0.5f), _mm256_mul_ps(p, exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(a, a)))));
  const __m256 pos = _mm256_fnmadd_ps(x, half_erfc, x);
  const __m256 neg_v = _mm256_mul_ps(x, half_erfc);
  const __m256 neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
  return _mm256_blendv_ps(pos, neg_v, neg);
}

float sum(const float* x, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_add_ps(s0, _mm256_loadu_ps(x + i));
    s1 = _mm256_add_ps(s1, _mm256_loadu_ps(x + i + 8));
    s2 = _mm256_add_ps(s2, _mm256_loadu_ps(x + i + 16));
    s3 = _mm256_add_ps(s3, _mm256_loadu_ps(x + i + 24));
  }
  for (; i + 8 <= n; i += 8) s0 = _mm256_add_ps(s0, _mm256_loadu_ps(x + i));
  if (i < n) s1 = _mm256_add_ps(s1, _mm256_maskload_ps(x + i, tail_mask(n - i)));
  return hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
}

float sum_sq_diff(const float* x, float c, int64_t n) {
  const __m256 vc = _mm256_set1_ps(c);
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + i), vc);
    const __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vc);
    const __m256 d2 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 16), vc);
    const __m256 d3 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 24), vc);
    s0 = _mm256_fmadd_ps(d0, d0, s0);
    s1 = _mm256_fmadd_ps(d1, d1, s1);
    s2 = _mm256_fmadd_ps(d2, d2, s2);
    s3 = _mm256_fmadd_ps(d3, d3, s3);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), vc);
    s0 = _mm256_fmadd_ps(d, d, s0);
  }
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    const __m256 d = _mm256_and_ps(_mm256_castsi256_ps(m), _mm256_sub_ps(_mm256_maskload_ps(x + i, m), vc));
    s1 = _mm256_fmadd_ps(d, d, s1);
  }
  return hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
}

void norm_apply(float* y, const float* x, float c, float s, const float* w, const float* b, int64_t n) {
  const __m256 vc = _mm256_set1_ps(c);
  const __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 r = _mm256_mul_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vc), vs), _mm256_loadu_ps(w + i));
    if (b != nullptr) r = _mm256_add_ps(r, _mm256_loadu_ps(b + i));
    _mm256_storeu_ps(y + i, r);
  }
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    __m256 r = _mm256_mul_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), vc), vs),
                             _mm256_maskload_ps(w + i, m));
    if (b != nullptr) r = _mm256_add_ps(r, _mm256_maskload_ps(b + i, m));
    _mm256_maskstore_ps(y + i, m, r);
  }
}

float max(const float* x, int64_t n) {
  const __m256 ninf = _mm256_set1_ps(-__builtin_inff());
  __m256 m0 = ninf, m1 = ninf;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
    m1 = _mm256_max_ps(m1, _mm256_loadu_ps(x + i + 8));
  }
  for (; i + 8 <= n; i += 8) m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    m1 = _mm256_max_ps(m1, _mm256_blendv_ps(ninf, _mm256_maskload_ps(x + i, m), _mm256_castsi256_ps(m)));
  }
  return hmax(_mm256_max_ps(m0, m1));
}

float exp_sum(float* x, float c, int64_t n) {
  const __m256 vc = _mm256_set1_ps(c);
  __m256 s0 = _mm256_setzero_ps(), s1 = s0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 e0 = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vc));
    const __m256 e1 = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vc));
    _mm256_storeu_ps(x + i, e0);
    _mm256_storeu_ps(x + i + 8, e1);
    s0 = _mm256_add_ps(s0, e0);
    s1 = _mm256_add_ps(s1, e1);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vc));
    _mm256_storeu_ps(x + i, e);
    s0 = _mm256_add_ps(s0, e);
  }
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    const __m256 e =
        _mm256_and_ps(_mm256_castsi256_ps(m), exp_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), vc)));
    _mm256_maskstore_ps(x + i, m, e);
    s1 = _mm256_add_ps(s1, e);
  }
  return hsum(_mm256_add_ps(s0, s1));
}

void scale(float* x, float s, int64_t n) {
  const __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    _mm256_maskstore_ps(x + i, m, _mm256_mul_ps(_mm256_maskload_ps(x + i, m), vs));
  }
}

void swiglu(float* y, const float* g, const float* u, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 vg = _mm256_loadu_ps(g + i);
    _mm256_storeu_ps(y + i, _mm256_mul_ps(times_sigmoid(vg, vg), _mm256_loadu_ps(u + i)));
  }
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    const __m256 vg = _mm256_maskload_ps(g + i, m);
    _mm256_maskstore_ps(y + i, m, _mm256_mul_ps(times_sigmoid(vg, vg), _mm256_maskload_ps(u + i, m)));
  }
}

void gelu(float* y, const float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, gelu_ps(_mm256_loadu_ps(x + i)));
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    _mm256_maskstore_ps(y + i, m, gelu_ps(_mm256_maskload_ps(x + i, m)));
  }
}

void gelu_erf(float* y, const float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, gelu_erf_ps(_mm256_loadu_ps(x + i)));
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    _mm256_maskstore_ps(y + i, m, gelu_erf_ps(_mm256_maskload_ps(x + i, m)));
  }
}

// D > 0 fixes head_dim at compile time (64, 128: fully unrolled); D == 0 reads d.
template <int64_t D>
inline float dot(const float* a, const float* b, int64_t d) {
  const int64_t n = D > 0 ? D : d;
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
    s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
  }
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    s1 = _mm256_fmadd_ps(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m), s1);
  }
  return hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
}

template <int64_t D>
void dot_tile_d(float* s, const float* q, const float* k, int64_t stride, int64_t n, int64_t d, float sc) {
  for (int64_t j = 0; j < n; ++j) s[j] = sc * dot<D>(q, k + j * stride, d);
}

void dot_tile(float* s, const float* q, const float* k, int64_t stride, int64_t n, int64_t d, float sc) {
  if (d == 128) return dot_tile_d<128>(s, q, k, stride, n, d, sc);
  if (d == 64) return dot_tile_d<64>(s, q, k, stride, n, d, sc);
  dot_tile_d<0>(s, q, k, stride, n, d, sc);
}

// acc is walked in slices of 32 floats held in registers while all n values
// stream through, so acc is loaded and stored once per tile.
template <int64_t D>
void acc_tile_d(float* acc, float c, const float* p, const float* v, int64_t stride, int64_t n, int64_t d) {
  const int64_t dd = D > 0 ? D : d;
  const __m256 vc = _mm256_set1_ps(c);
  int64_t i = 0;
  for (; i + 32 <= dd; i += 32) {
    __m256 a0 = _mm256_mul_ps(_mm256_loadu_ps(acc + i), vc);
    __m256 a1 = _mm256_mul_ps(_mm256_loadu_ps(acc + i + 8), vc);
    __m256 a2 = _mm256_mul_ps(_mm256_loadu_ps(acc + i + 16), vc);
    __m256 a3 = _mm256_mul_ps(_mm256_loadu_ps(acc + i + 24), vc);
    for (int64_t j = 0; j < n; ++j) {
      const __m256 pj = _mm256_set1_ps(p[j]);
      const float* vj = v + j * stride + i;
      a0 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj), a0);
      a1 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj + 8), a1);
      a2 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj + 16), a2);
      a3 = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj + 24), a3);
    }
    _mm256_storeu_ps(acc + i, a0);
    _mm256_storeu_ps(acc + i + 8, a1);
    _mm256_storeu_ps(acc + i + 16, a2);
    _mm256_storeu_ps(acc + i + 24, a3);
  }
  for (; i + 8 <= dd; i += 8) {
    __m256 a = _mm256_mul_ps(_mm256_loadu_ps(acc + i), vc);
    for (int64_t j = 0; j < n; ++j) a = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), _mm256_loadu_ps(v + j * stride + i), a);
    _mm256_storeu_ps(acc + i, a);
  }
  if (i < dd) {
    const __m256i m = tail_mask(dd - i);
    __m256 a = _mm256_mul_ps(_mm256_maskload_ps(acc + i, m), vc);
    for (int64_t j = 0; j < n; ++j) {
      a = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), _mm256_maskload_ps(v + j * stride + i, m), a);
    }
    _mm256_maskstore_ps(acc + i, m, a);
  }
}

void acc_tile(float* acc, float c, const float* p, const float* v, int64_t stride, int64_t n, int64_t d) {
  if (d == 128) return acc_tile_d<128>(acc, c, p, v, stride, n, d);
  if (d == 64) return acc_tile_d<64>(acc, c, p, v, stride, n, d);
  acc_tile_d<0>(acc, c, p, v, stride, n, d);
}

const VecOps kAvx2{
    .sum = sum,
    .sum_sq_diff = sum_sq_diff,
    .norm_apply = norm_apply,
    .max = max,
    .exp_sum = exp_sum,
    .scale = scale,
    .swiglu = swiglu,
    .gelu = gelu,
    .gelu_erf = gelu_erf,
    .dot_tile = dot_tile,
    .acc_tile = acc_tile,
};

}  // namespace

const VecOps& vec_ops_avx2() { return kAvx2; }

}  // namespace troupe::kernels::cpu

#else

namespace troupe::kernels::cpu {
const VecOps& vec_ops_avx2() { return vec_ops_scalar(); }
}  // namespace troupe::kernels::cpu

#endif

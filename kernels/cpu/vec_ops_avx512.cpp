// AVX-512 vector primitives (16 floats a register). Tails use mask registers,
// so any n (head_dim 8, odd sizes) stays on the vector path. Everything here
// is TU-local except the table getter: this file alone is built with
// -mavx512*, and no inline code from it may leak into the portable path.
#include "kernels/cpu/vec_ops.hpp"

#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__FMA__)
#include "kernels/cpu/simd_avx512.hpp"

namespace troupe::kernels::cpu {
namespace {

// x / (1 + exp(-z)): silu when z = x, gelu_tanh when z = 2 * sqrt(2/pi) * (x + 0.044715 x^3).
inline __m512 times_sigmoid(__m512 x, __m512 z) {
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_div_ps(x, _mm512_add_ps(one, exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), z))));
}

inline __m512 gelu_ps(__m512 x) {
  const __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
  const __m512 inner = _mm512_fmadd_ps(_mm512_set1_ps(0.044715f), x3, x);
  return times_sigmoid(x, _mm512_mul_ps(_mm512_set1_ps(2.0f * 0.7978845608028654f), inner));
}

// x * Phi(x) with erfc(|z|), z = x / sqrt(2), from Abramowitz & Stegun
// 7.1.26 (erf within 1.5e-7; the GELU within 3e-7 of x Phi(x)): x (1 - erfc / 2) for x >= 0,
// x erfc / 2 below. torch's "gelu" is the erf form; this stays within f32
// noise of it, where the tanh form is up to 5e-4 away (near x = 2.7).
inline __m512 gelu_erf_ps(__m512 x) {
  const __m512 z = _mm512_mul_ps(x, _mm512_set1_ps(0.70710678118654752f));
  const __m512 a = _mm512_abs_ps(z);
  const __m512 t =
      _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_fmadd_ps(_mm512_set1_ps(0.3275911f), a, _mm512_set1_ps(1.0f)));
  __m512 p = _mm512_set1_ps(1.061405429f);
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.453152027f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.421413741f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.284496736f));
  p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.254829592f));
  p = _mm512_mul_ps(p, t);
  const __m512 half_erfc = _mm512_mul_ps(
      _mm512_set1_ps(0.5f), _mm512_mul_ps(p, exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(a, a)))));
  const __m512 pos = _mm512_fnmadd_ps(x, half_erfc, x);
  const __m512 neg_v = _mm512_mul_ps(x, half_erfc);
  const __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
  return _mm512_mask_blend_ps(neg, pos, neg_v);
}

float sum(const float* x, int64_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    s0 = _mm512_add_ps(s0, _mm512_loadu_ps(x + i));
    s1 = _mm512_add_ps(s1, _mm512_loadu_ps(x + i + 16));
    s2 = _mm512_add_ps(s2, _mm512_loadu_ps(x + i + 32));
    s3 = _mm512_add_ps(s3, _mm512_loadu_ps(x + i + 48));
  }
  for (; i + 16 <= n; i += 16) s0 = _mm512_add_ps(s0, _mm512_loadu_ps(x + i));
  if (i < n) s1 = _mm512_add_ps(s1, _mm512_maskz_loadu_ps(tail_mask(n - i), x + i));
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

float sum_sq_diff(const float* x, float c, int64_t n) {
  const __m512 vc = _mm512_set1_ps(c);
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(x + i), vc);
    const __m512 d1 = _mm512_sub_ps(_mm512_loadu_ps(x + i + 16), vc);
    const __m512 d2 = _mm512_sub_ps(_mm512_loadu_ps(x + i + 32), vc);
    const __m512 d3 = _mm512_sub_ps(_mm512_loadu_ps(x + i + 48), vc);
    s0 = _mm512_fmadd_ps(d0, d0, s0);
    s1 = _mm512_fmadd_ps(d1, d1, s1);
    s2 = _mm512_fmadd_ps(d2, d2, s2);
    s3 = _mm512_fmadd_ps(d3, d3, s3);
  }
  for (; i + 16 <= n; i += 16) {
    const __m512 d = _mm512_sub_ps(_mm512_loadu_ps(x + i), vc);
    s0 = _mm512_fmadd_ps(d, d, s0);
  }
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 d = _mm512_maskz_sub_ps(m, _mm512_maskz_loadu_ps(m, x + i), vc);
    s1 = _mm512_fmadd_ps(d, d, s1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
}

void norm_apply(float* y, const float* x, float c, float s, const float* w, const float* b, int64_t n) {
  const __m512 vc = _mm512_set1_ps(c);
  const __m512 vs = _mm512_set1_ps(s);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 r = _mm512_mul_ps(_mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), vc), vs), _mm512_loadu_ps(w + i));
    if (b != nullptr) r = _mm512_add_ps(r, _mm512_loadu_ps(b + i));
    _mm512_storeu_ps(y + i, r);
  }
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    __m512 r = _mm512_mul_ps(_mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vc), vs),
                             _mm512_maskz_loadu_ps(m, w + i));
    if (b != nullptr) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(m, b + i));
    _mm512_mask_storeu_ps(y + i, m, r);
  }
}

float max(const float* x, int64_t n) {
  const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
  __m512 m0 = ninf, m1 = ninf;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + i));
    m1 = _mm512_max_ps(m1, _mm512_loadu_ps(x + i + 16));
  }
  for (; i + 16 <= n; i += 16) m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + i));
  if (i < n) m1 = _mm512_max_ps(m1, _mm512_mask_loadu_ps(ninf, tail_mask(n - i), x + i));
  return _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
}

float exp_sum(float* x, float c, int64_t n) {
  const __m512 vc = _mm512_set1_ps(c);
  __m512 s0 = _mm512_setzero_ps(), s1 = s0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 e0 = exp_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), vc));
    const __m512 e1 = exp_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), vc));
    _mm512_storeu_ps(x + i, e0);
    _mm512_storeu_ps(x + i + 16, e1);
    s0 = _mm512_add_ps(s0, e0);
    s1 = _mm512_add_ps(s1, e1);
  }
  for (; i + 16 <= n; i += 16) {
    const __m512 e = exp_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), vc));
    _mm512_storeu_ps(x + i, e);
    s0 = _mm512_add_ps(s0, e);
  }
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 e = _mm512_maskz_mov_ps(m, exp_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vc)));
    _mm512_mask_storeu_ps(x + i, m, e);
    s1 = _mm512_add_ps(s1, e);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

void scale(float* x, float s, int64_t n) {
  const __m512 vs = _mm512_set1_ps(s);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), vs));
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vs));
  }
}

void swiglu(float* y, const float* g, const float* u, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 vg = _mm512_loadu_ps(g + i);
    _mm512_storeu_ps(y + i, _mm512_mul_ps(times_sigmoid(vg, vg), _mm512_loadu_ps(u + i)));
  }
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 vg = _mm512_maskz_loadu_ps(m, g + i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(times_sigmoid(vg, vg), _mm512_maskz_loadu_ps(m, u + i)));
  }
}

void gelu(float* y, const float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, gelu_ps(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, m, gelu_ps(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

void gelu_erf(float* y, const float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, gelu_erf_ps(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, m, gelu_erf_ps(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

// a . b as 16 partial sums (sum_rows adds them up). D > 0 fixes head_dim at
// compile time (64, 128: fully unrolled); D == 0 reads d.
template <int64_t D>
inline __m512 dot(const float* a, const float* b, int64_t d) {
  const int64_t n = D > 0 ? D : d;
  __m512 s0 = _mm512_setzero_ps(), s1 = s0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
  }
  for (; i + 16 <= n; i += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s1);
  }
  return _mm512_add_ps(s0, s1);
}

// Eight keys per reduce8: their dot products run side by side.
template <int64_t D>
void dot_tile_d(float* s, const float* q, const float* k, int64_t stride, int64_t n, int64_t d, float sc) {
  sum_rows(s, n, sc, [&](int64_t j) { return dot<D>(q, k + j * stride, d); });
}

void dot_tile(float* s, const float* q, const float* k, int64_t stride, int64_t n, int64_t d, float sc) {
  if (d == 128) return dot_tile_d<128>(s, q, k, stride, n, d, sc);
  if (d == 64) return dot_tile_d<64>(s, q, k, stride, n, d, sc);
  dot_tile_d<0>(s, q, k, stride, n, d, sc);
}

// acc is walked in slices of 64 floats held in registers while all n values
// stream through, so acc is loaded and stored once per tile.
template <int64_t D>
void acc_tile_d(float* acc, float c, const float* p, const float* v, int64_t stride, int64_t n, int64_t d) {
  const int64_t dd = D > 0 ? D : d;
  const __m512 vc = _mm512_set1_ps(c);
  int64_t i = 0;
  for (; i + 64 <= dd; i += 64) {
    __m512 a0 = _mm512_mul_ps(_mm512_loadu_ps(acc + i), vc);
    __m512 a1 = _mm512_mul_ps(_mm512_loadu_ps(acc + i + 16), vc);
    __m512 a2 = _mm512_mul_ps(_mm512_loadu_ps(acc + i + 32), vc);
    __m512 a3 = _mm512_mul_ps(_mm512_loadu_ps(acc + i + 48), vc);
    for (int64_t j = 0; j < n; ++j) {
      const __m512 pj = _mm512_set1_ps(p[j]);
      const float* vj = v + j * stride + i;
      a0 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(vj), a0);
      a1 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(vj + 16), a1);
      a2 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(vj + 32), a2);
      a3 = _mm512_fmadd_ps(pj, _mm512_loadu_ps(vj + 48), a3);
    }
    _mm512_storeu_ps(acc + i, a0);
    _mm512_storeu_ps(acc + i + 16, a1);
    _mm512_storeu_ps(acc + i + 32, a2);
    _mm512_storeu_ps(acc + i + 48, a3);
  }
  for (; i + 16 <= dd; i += 16) {
    __m512 a = _mm512_mul_ps(_mm512_loadu_ps(acc + i), vc);
    for (int64_t j = 0; j < n; ++j) a = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), _mm512_loadu_ps(v + j * stride + i), a);
    _mm512_storeu_ps(acc + i, a);
  }
  if (i < dd) {
    const __mmask16 m = tail_mask(dd - i);
    __m512 a = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, acc + i), vc);
    for (int64_t j = 0; j < n; ++j) {
      a = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), _mm512_maskz_loadu_ps(m, v + j * stride + i), a);
    }
    _mm512_mask_storeu_ps(acc + i, m, a);
  }
}

void acc_tile(float* acc, float c, const float* p, const float* v, int64_t stride, int64_t n, int64_t d) {
  if (d == 128) return acc_tile_d<128>(acc, c, p, v, stride, n, d);
  if (d == 64) return acc_tile_d<64>(acc, c, p, v, stride, n, d);
  acc_tile_d<0>(acc, c, p, v, stride, n, d);
}

const VecOps kAvx512{
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

const VecOps& vec_ops_avx512() { return kAvx512; }

}  // namespace troupe::kernels::cpu

#else

namespace troupe::kernels::cpu {
const VecOps& vec_ops_avx512() { return vec_ops_scalar(); }
}  // namespace troupe::kernels::cpu

#endif

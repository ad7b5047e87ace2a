// AVX-512 attention tiles over quantized KV rows (16 floats a register):
// f16 through vcvtph2ps, bf16 by widening to the high half of a float, q8_0
// by sign-extending int8 and scaling once per group of 32 (two registers).
// Tails use masked loads (AVX512BW/VL), so head_dim 8 stays vectorised.
// TU-local except the getter: only this file is built with -mavx512*.
#include "kernels/cpu/attention_tiles.hpp"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__FMA__)
#include "kernels/cpu/kv_rows_avx512.hpp"

namespace troupe::kernels::cpu {
namespace {

// q . row as 16 partial sums (sum_rows adds them up).
template <KvType T, int64_t D>
inline __m512 dot_row(const float* q, const unsigned char* r, int64_t d) {
  const int64_t n = D > 0 ? D : d;
  if constexpr (T == KvType::q8_0) {
    __m512 total = _mm512_setzero_ps();
    int64_t g0 = 0;
    for (; g0 + 32 <= n; g0 += 32) {
      __m512 s = _mm512_mul_ps(_mm512_loadu_ps(q + g0), load16<T>(r, g0));
      s = _mm512_fmadd_ps(_mm512_loadu_ps(q + g0 + 16), load16<T>(r, g0 + 16), s);
      total = _mm512_fmadd_ps(s, _mm512_set1_ps(q8_scale(r, n, g0 / 32)), total);
    }
    if (g0 < n) {  // a last, shorter group
      __m512 s = _mm512_setzero_ps();
      for (int64_t i = g0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? 0xffff : tail_mask(n - i);
        s = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + i), load16<T>(r, i, m), s);
      }
      total = _mm512_fmadd_ps(s, _mm512_set1_ps(q8_scale(r, n, g0 / 32)), total);
    }
    return total;
  } else {
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
      s0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + i), load16<T>(r, i), s0);
      s1 = _mm512_fmadd_ps(_mm512_loadu_ps(q + i + 16), load16<T>(r, i + 16), s1);
    }
    for (; i < n; i += 16) {
      const __mmask16 m = n - i >= 16 ? 0xffff : tail_mask(n - i);
      s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + i), load16<T>(r, i, m), s0);
    }
    return _mm512_add_ps(s0, s1);
  }
}

template <KvType T, int64_t D>
void dot_tile_d(float* s, const float* q, const unsigned char* k, int64_t stride, int64_t n, int64_t d, float sc) {
  sum_rows(s, n, sc, [&](int64_t j) { return dot_row<T, D>(q, k + j * stride, d); });
}

template <KvType T>
void dot_tile(float* s, const float* q, const unsigned char* k, int64_t stride, int64_t n, int64_t d, float sc) {
  if (d == 128) return dot_tile_d<T, 128>(s, q, k, stride, n, d, sc);
  if (d == 64) return dot_tile_d<T, 64>(s, q, k, stride, n, d, sc);
  dot_tile_d<T, 0>(s, q, k, stride, n, d, sc);
}

// Weight of row j for values at i: p[j], times the group's scale for q8_0.
template <KvType T>
inline __m512 weight(const float* p, int64_t j, const unsigned char* row, int64_t d, int64_t i) {
  if constexpr (T == KvType::q8_0) {
    return _mm512_set1_ps(p[j] * q8_scale(row, d, i / 32));
  } else {
    (void)row;
    (void)d;
    (void)i;
    return _mm512_set1_ps(p[j]);
  }
}

// acc is walked in slices of 32 floats (one q8_0 group, two registers) held
// in registers while all n rows stream through.
template <KvType T, int64_t D>
void acc_tile_d(float* acc, float c, const float* p, const unsigned char* v, int64_t stride, int64_t n, int64_t d) {
  const int64_t dd = D > 0 ? D : d;
  const __m512 vc = _mm512_set1_ps(c);
  int64_t i = 0;
  for (; i + 32 <= dd; i += 32) {
    __m512 a0 = _mm512_mul_ps(_mm512_loadu_ps(acc + i), vc);
    __m512 a1 = _mm512_mul_ps(_mm512_loadu_ps(acc + i + 16), vc);
    for (int64_t j = 0; j < n; ++j) {
      const unsigned char* row = v + j * stride;
      const __m512 w = weight<T>(p, j, row, dd, i);
      a0 = _mm512_fmadd_ps(w, load16<T>(row, i), a0);
      a1 = _mm512_fmadd_ps(w, load16<T>(row, i + 16), a1);
    }
    _mm512_storeu_ps(acc + i, a0);
    _mm512_storeu_ps(acc + i + 16, a1);
  }
  for (; i < dd; i += 16) {
    const __mmask16 m = dd - i >= 16 ? 0xffff : tail_mask(dd - i);
    __m512 a = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, acc + i), vc);
    for (int64_t j = 0; j < n; ++j) {
      const unsigned char* row = v + j * stride;
      a = _mm512_fmadd_ps(weight<T>(p, j, row, dd, i), load16<T>(row, i, m), a);
    }
    _mm512_mask_storeu_ps(acc + i, m, a);
  }
}

template <KvType T>
void acc_tile(float* acc, float c, const float* p, const unsigned char* v, int64_t stride, int64_t n, int64_t d) {
  if (d == 128) return acc_tile_d<T, 128>(acc, c, p, v, stride, n, d);
  if (d == 64) return acc_tile_d<T, 64>(acc, c, p, v, stride, n, d);
  acc_tile_d<T, 0>(acc, c, p, v, stride, n, d);
}

template <KvType T>
constexpr KvTileOps kOps{
    .dot_tile = dot_tile<T>, .acc_tile = acc_tile<T>, .write_row = store_row<T>, .read_row = row_to_f32<T>};

}  // namespace

const KvTileOps& kv_tile_ops_avx512(KvType t) {
  return kv_tile_ops_for(t, kOps<KvType::f16>, kOps<KvType::bf16>, kOps<KvType::q8_0>);
}

}  // namespace troupe::kernels::cpu

#else

namespace troupe::kernels::cpu {
const KvTileOps& kv_tile_ops_avx512(KvType t) { return kv_tile_ops_scalar(t); }
}  // namespace troupe::kernels::cpu

#endif

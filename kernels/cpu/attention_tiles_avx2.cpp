// AVX2+F16C attention tiles over quantized KV rows (8 floats a register):
// f16 through vcvtph2ps, bf16 by widening to the high half of a float, q8_0
// by sign-extending int8 and scaling once per group of 32 (the dot sums a
// group unscaled, then scales the sum; acc folds the scale into p[j]).
// TU-local except the getter, so no -mavx2 code leaks into the portable path.
#include "kernels/cpu/attention_tiles.hpp"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "kernels/cpu/kv_rows_avx2.hpp"

namespace troupe::kernels::cpu {
namespace {

// D > 0 fixes head_dim at compile time (64, 128); D == 0 reads d.
template <KvType T, int64_t D>
inline float dot_row(const float* q, const unsigned char* r, int64_t d) {
  const int64_t n = D > 0 ? D : d;
  if constexpr (T == KvType::q8_0) {
    __m256 total = _mm256_setzero_ps();
    int64_t g0 = 0;
    for (; g0 + 32 <= n; g0 += 32) {
      __m256 s0 = _mm256_mul_ps(_mm256_loadu_ps(q + g0), load8<T>(r, g0));
      __m256 s1 = _mm256_mul_ps(_mm256_loadu_ps(q + g0 + 8), load8<T>(r, g0 + 8));
      s0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + g0 + 16), load8<T>(r, g0 + 16), s0);
      s1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + g0 + 24), load8<T>(r, g0 + 24), s1);
      total = _mm256_fmadd_ps(_mm256_add_ps(s0, s1), _mm256_set1_ps(q8_scale(r, n, g0 / 32)), total);
    }
    if (g0 < n) {  // a last, shorter group
      __m256 s = _mm256_setzero_ps();
      int64_t i = g0;
      for (; i + 8 <= n; i += 8) s = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load8<T>(r, i), s);
      if (i < n) s = _mm256_fmadd_ps(_mm256_maskload_ps(q + i, tail_mask(n - i)), load_part<T>(r, i, n - i), s);
      total = _mm256_fmadd_ps(s, _mm256_set1_ps(q8_scale(r, n, g0 / 32)), total);
    }
    return hsum(total);
  } else {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
      s0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load8<T>(r, i), s0);
      s1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), load8<T>(r, i + 8), s1);
      s2 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 16), load8<T>(r, i + 16), s2);
      s3 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 24), load8<T>(r, i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load8<T>(r, i), s0);
    if (i < n) s1 = _mm256_fmadd_ps(_mm256_maskload_ps(q + i, tail_mask(n - i)), load_part<T>(r, i, n - i), s1);
    return hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  }
}

template <KvType T, int64_t D>
void dot_tile_d(float* s, const float* q, const unsigned char* k, int64_t stride, int64_t n, int64_t d, float sc) {
  for (int64_t j = 0; j < n; ++j) s[j] = sc * dot_row<T, D>(q, k + j * stride, d);
}

template <KvType T>
void dot_tile(float* s, const float* q, const unsigned char* k, int64_t stride, int64_t n, int64_t d, float sc) {
  if (d == 128) return dot_tile_d<T, 128>(s, q, k, stride, n, d, sc);
  if (d == 64) return dot_tile_d<T, 64>(s, q, k, stride, n, d, sc);
  dot_tile_d<T, 0>(s, q, k, stride, n, d, sc);
}

// Weight of row j for values at i: p[j], times the group's scale for q8_0.
template <KvType T>
inline __m256 weight(const float* p, int64_t j, const unsigned char* row, int64_t d, int64_t i) {
  if constexpr (T == KvType::q8_0) {
    return _mm256_set1_ps(p[j] * q8_scale(row, d, i / 32));
  } else {
    (void)row;
    (void)d;
    (void)i;
    return _mm256_set1_ps(p[j]);
  }
}

// acc is walked in slices of 32 floats (one q8_0 group) held in registers
// while all n rows stream through, so acc is loaded and stored once a tile.
template <KvType T, int64_t D>
void acc_tile_d(float* acc, float c, const float* p, const unsigned char* v, int64_t stride, int64_t n, int64_t d) {
  const int64_t dd = D > 0 ? D : d;
  const __m256 vc = _mm256_set1_ps(c);
  int64_t i = 0;
  for (; i + 32 <= dd; i += 32) {
    __m256 a0 = _mm256_mul_ps(_mm256_loadu_ps(acc + i), vc);
    __m256 a1 = _mm256_mul_ps(_mm256_loadu_ps(acc + i + 8), vc);
    __m256 a2 = _mm256_mul_ps(_mm256_loadu_ps(acc + i + 16), vc);
    __m256 a3 = _mm256_mul_ps(_mm256_loadu_ps(acc + i + 24), vc);
    for (int64_t j = 0; j < n; ++j) {
      const unsigned char* row = v + j * stride;
      const __m256 w = weight<T>(p, j, row, dd, i);
      a0 = _mm256_fmadd_ps(w, load8<T>(row, i), a0);
      a1 = _mm256_fmadd_ps(w, load8<T>(row, i + 8), a1);
      a2 = _mm256_fmadd_ps(w, load8<T>(row, i + 16), a2);
      a3 = _mm256_fmadd_ps(w, load8<T>(row, i + 24), a3);
    }
    _mm256_storeu_ps(acc + i, a0);
    _mm256_storeu_ps(acc + i + 8, a1);
    _mm256_storeu_ps(acc + i + 16, a2);
    _mm256_storeu_ps(acc + i + 24, a3);
  }
  for (; i + 8 <= dd; i += 8) {
    __m256 a = _mm256_mul_ps(_mm256_loadu_ps(acc + i), vc);
    for (int64_t j = 0; j < n; ++j) {
      const unsigned char* row = v + j * stride;
      a = _mm256_fmadd_ps(weight<T>(p, j, row, dd, i), load8<T>(row, i), a);
    }
    _mm256_storeu_ps(acc + i, a);
  }
  if (i < dd) {
    const __m256i m = tail_mask(dd - i);
    __m256 a = _mm256_mul_ps(_mm256_maskload_ps(acc + i, m), vc);
    for (int64_t j = 0; j < n; ++j) {
      const unsigned char* row = v + j * stride;
      a = _mm256_fmadd_ps(weight<T>(p, j, row, dd, i), load_part<T>(row, i, dd - i), a);
    }
    _mm256_maskstore_ps(acc + i, m, a);
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

const KvTileOps& kv_tile_ops_avx2(KvType t) {
  return kv_tile_ops_for(t, kOps<KvType::f16>, kOps<KvType::bf16>, kOps<KvType::q8_0>);
}

}  // namespace troupe::kernels::cpu

#else

namespace troupe::kernels::cpu {
const KvTileOps& kv_tile_ops_avx2(KvType t) { return kv_tile_ops_scalar(t); }
}  // namespace troupe::kernels::cpu

#endif

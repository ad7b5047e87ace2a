// The lane attention (attention_lanes.hpp) for AVX-512: a work item's 16
// (query, head) rows sit in the 16 lanes of every register. Per tile of 32
// key positions:
//   st[j]  = scale * sum_i k_j[i] * qT[i]      [32 keys] x [16 rows]
//   m, l   = the running max and sum, per lane; st becomes exp(st - m)
//   oT[i]  = oT[i] * corr + sum_j v_j[i] * st[j]   [head_dim] x [16 rows]
// qT [head_dim][16] and oT [head_dim][16] live on the stack for the item;
// quantized K/V rows are converted to f32 once per tile, shared by all rows.
#include "kernels/cpu/attention_lanes.hpp"

#include <string>

#include "core/cpu_features.hpp"
#include "core/error.hpp"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__) && \
    defined(__FMA__)
#include <algorithm>
#include <cmath>

#include "kernels/cpu/kv_rows_avx512.hpp"

namespace troupe::kernels::cpu {
namespace {

constexpr int64_t kKeys = 32;  // key positions per tile
constexpr int64_t kBlock = 8;  // keys (scores) or head_dim values (output) per pass: 8 FMA chains

// st[j] = scale * (k_j . qT) for j < n, 16 rows at once. Each of the 8 keys
// of a pass has its own FMA chain, so both FMA ports stay busy; a pass past
// n reuses the last key (its scores are not kept).
template <int64_t D>
void score_tile(__m512* st, const float* const* kp, int64_t n, const float* qt, int64_t d, __m512 scale) {
  const int64_t dd = D > 0 ? D : d;
  for (int64_t j = 0; j < n; j += kBlock) {
    const float* k[kBlock];
    __m512 a[kBlock];
    for (int64_t u = 0; u < kBlock; ++u) {
      k[u] = kp[std::min(j + u, n - 1)];
      a[u] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < dd; ++i) {
      const __m512 q = _mm512_load_ps(qt + i * kLaneRows);
      for (int64_t u = 0; u < kBlock; ++u) a[u] = _mm512_fmadd_ps(_mm512_set1_ps(k[u][i]), q, a[u]);
    }
    for (int64_t u = 0; u < kBlock && j + u < n; ++u) st[j + u] = _mm512_mul_ps(a[u], scale);
  }
}

// oT[i] = oT[i] * corr + sum_j v_j[i] * p[j] for i < d, 16 rows at once; 8
// values of head_dim per pass, each its own chain, while the n rows stream.
template <int64_t D>
void acc_tile(float* ot, __m512 corr, const __m512* p, const float* const* vp, int64_t n, int64_t d) {
  const int64_t dd = D > 0 ? D : d;
  int64_t i = 0;
  for (; i + kBlock <= dd; i += kBlock) {
    __m512 a[kBlock];
    for (int64_t u = 0; u < kBlock; ++u) a[u] = _mm512_mul_ps(_mm512_load_ps(ot + (i + u) * kLaneRows), corr);
    for (int64_t j = 0; j < n; ++j) {
      const float* v = vp[j] + i;
      for (int64_t u = 0; u < kBlock; ++u) a[u] = _mm512_fmadd_ps(_mm512_set1_ps(v[u]), p[j], a[u]);
    }
    for (int64_t u = 0; u < kBlock; ++u) _mm512_store_ps(ot + (i + u) * kLaneRows, a[u]);
  }
  if constexpr (D % kBlock != 0 || D == 0) {  // a head_dim not a multiple of 8
    for (; i < dd; ++i) {
      __m512 a = _mm512_mul_ps(_mm512_load_ps(ot + i * kLaneRows), corr);
      for (int64_t j = 0; j < n; ++j) a = _mm512_fmadd_ps(_mm512_set1_ps(vp[j][i]), p[j], a);
      _mm512_store_ps(ot + i * kLaneRows, a);
    }
  }
}

template <KvType T, int64_t D>
void attend(const LaneItem& it, const PagedKvView& kv, const int32_t* block_table, int64_t kvh, float scale) {
  constexpr int64_t kDim = D > 0 ? D : kLaneMaxHeadDim;
  // f32 rows are read in place; other types are converted once per tile.
  constexpr int64_t kConv = T == KvType::f32 ? 1 : kKeys * kDim;
  alignas(64) float qt[kDim * kLaneRows];  // [head_dim][16]
  alignas(64) float ot[kDim * kLaneRows];  // [head_dim][16]
  alignas(64) float kbuf[kConv];           // [32][head_dim]
  alignas(64) float vbuf[kConv];           // [32][head_dim]
  __m512 st[kKeys];                        // [32 keys] of 16 rows
  const float* kp[kKeys];
  const float* vp[kKeys];

  const int64_t d = kv.head_dim;
  const int n_rows = it.n_rows;
  for (int64_t i = 0; i < d; ++i) {
    for (int r = 0; r < kLaneRows; ++r) qt[i * kLaneRows + r] = r < n_rows ? it.q[r][i] : 0.0f;
  }
  std::fill(ot, ot + d * kLaneRows, 0.0f);
  // Lanes past n_rows see nothing (lo = hi = 0) and are never written out.
  alignas(64) int32_t lo_a[kLaneRows] = {}, hi_a[kLaneRows] = {};
  for (int r = 0; r < n_rows; ++r) {
    lo_a[r] = static_cast<int32_t>(it.lo[r]);
    hi_a[r] = static_cast<int32_t>(it.hi[r]);
  }
  const __m512i lo = _mm512_load_si512(lo_a);
  const __m512i hi = _mm512_load_si512(hi_a);
  const __m512 neg_inf = _mm512_set1_ps(-INFINITY);
  const __m512 vscale = _mm512_set1_ps(scale);
  __m512 m = neg_inf;              // running max of each row
  __m512 l = _mm512_setzero_ps();  // running sum of exp(score - m)

  const auto* kc = static_cast<const unsigned char*>(kv.k);
  const auto* vc = static_cast<const unsigned char*>(kv.v);
  const int64_t bs = kv.block_size;
  const int64_t u_hi = it.hi[n_rows - 1];
  for (int64_t t = it.lo[0]; t < u_hi; t += kKeys) {
    const int64_t n = std::min(kKeys, u_hi - t);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t p = t + j;
      const int64_t off = kv.byte_offset(block_table[p / bs], p % bs, kvh);
      if constexpr (T == KvType::f32) {
        kp[j] = reinterpret_cast<const float*>(kc + off);
        vp[j] = reinterpret_cast<const float*>(vc + off);
      } else {
        row_to_f32<T>(kbuf + j * d, kc + off, d);
        row_to_f32<T>(vbuf + j * d, vc + off, d);
        kp[j] = kbuf + j * d;
        vp[j] = vbuf + j * d;
      }
    }
    score_tile<D>(st, kp, n, qt, d, vscale);

    // Positions a row cannot see score -inf; the tile's max per row.
    __m512 mt = neg_inf;
    for (int64_t j = 0; j < n; ++j) {
      const __m512i pos = _mm512_set1_epi32(static_cast<int32_t>(t + j));
      const __mmask16 seen =
          _mm512_cmp_epi32_mask(lo, pos, _MM_CMPINT_LE) & _mm512_cmp_epi32_mask(pos, hi, _MM_CMPINT_LT);
      st[j] = _mm512_mask_mov_ps(neg_inf, seen, st[j]);
      mt = _mm512_max_ps(mt, st[j]);
    }
    const __m512 m_new = _mm512_max_ps(m, mt);
    // A row that has seen nothing yet keeps m = -inf; subtracting 0 instead
    // keeps its exps at exp(-inf) = 0 rather than NaN.
    const __m512 m_sub = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(m_new, neg_inf, _CMP_NEQ_OQ), m_new);
    const __m512 corr = exp_ps(_mm512_sub_ps(m, m_sub));  // 0 on a row's first keys (m = -inf)
    __m512 sum = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; ++j) {
      st[j] = exp_ps(_mm512_sub_ps(st[j], m_sub));
      sum = _mm512_add_ps(sum, st[j]);
    }
    l = _mm512_fmadd_ps(l, corr, sum);
    acc_tile<D>(ot, corr, st, vp, n, d);
    m = m_new;
  }

  // Every real row sees at least its own position, so its l > 0.
  const __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.0f), l);
  for (int64_t i = 0; i < d; ++i) {
    _mm512_store_ps(ot + i * kLaneRows, _mm512_mul_ps(_mm512_load_ps(ot + i * kLaneRows), inv));
  }
  for (int r = 0; r < n_rows; ++r) {
    for (int64_t i = 0; i < d; ++i) it.out[r][i] = ot[i * kLaneRows + r];
  }
}

template <KvType T>
void attend_type(const LaneItem& it, const PagedKvView& kv, const int32_t* bt, int64_t kvh, float scale) {
  if (kv.head_dim == 64) return attend<T, 64>(it, kv, bt, kvh, scale);
  if (kv.head_dim == 128) return attend<T, 128>(it, kv, bt, kvh, scale);
  attend<T, 0>(it, kv, bt, kvh, scale);
}

}  // namespace

bool lanes_available() { return isa_supported(Isa::avx512); }

void attend_lanes(const LaneItem& it, const PagedKvView& kv, const int32_t* block_table, int64_t kv_head,
                  float scale) {
  if (it.n_rows < 1 || it.n_rows > kLaneRows || kv.head_dim < 1 || kv.head_dim > kLaneMaxHeadDim) {
    throw Error(Errc::internal, "attend_lanes: " + std::to_string(it.n_rows) + " rows of head_dim " +
                                    std::to_string(kv.head_dim) + " do not fit the lanes");
  }
  switch (kv.type) {
    case KvType::f32: return attend_type<KvType::f32>(it, kv, block_table, kv_head, scale);
    case KvType::f16: return attend_type<KvType::f16>(it, kv, block_table, kv_head, scale);
    case KvType::bf16: return attend_type<KvType::bf16>(it, kv, block_table, kv_head, scale);
    case KvType::q8_0: return attend_type<KvType::q8_0>(it, kv, block_table, kv_head, scale);
  }
  throw Error(Errc::internal, "attend_lanes: unknown KV cache type");
}

}  // namespace troupe::kernels::cpu

#else

namespace troupe::kernels::cpu {

bool lanes_available() { return false; }

void attend_lanes(const LaneItem&, const PagedKvView&, const int32_t*, int64_t, float) {
  throw Error(Errc::internal, "attend_lanes: this build has no AVX-512 path");
}

}  // namespace troupe::kernels::cpu

#endif

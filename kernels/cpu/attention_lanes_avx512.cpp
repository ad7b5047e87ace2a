// The lane attention (attention_lanes.hpp) for AVX-512: a work item's rows
// sit in the 16 lanes of R registers (R = 1 or 2). Per tile of 32 key
// positions:
//   st[j]  = scale * sum_i k_j[i] * qT[i]      [32 keys] x [R * 16 rows]
//   m, l   = the running max and sum, per lane; st becomes exp(st - m)
//   oT[i]  = oT[i] * corr + sum_j v_j[i] * st[j]   [head_dim] x [R * 16 rows]
// qT and oT [head_dim][R * 16] live on the stack for the item; quantized
// K/V rows are converted to f32 once per tile, shared by all rows.
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
constexpr int64_t kBlock = 8;  // keys (scores) or head_dim values (output) per pass
constexpr int kRegRows = 16;   // rows in one register

// An item's rows sit in R registers (16 rows each); row r is lane r % 16 of
// register r / 16. Two registers (17 to 32 rows) give each pass 16 FMA
// chains and use every broadcast key or value twice: one register's 8
// chains only just cover the FMA latency.

// st[j * R + h] = scale * (k_j . qT[h]) for j < n. Each of the 8 keys of a
// pass has R chains of its own; a pass past n reuses the last key (its
// scores are not kept).
template <int64_t D, int R>
void score_tile(__m512* st, const float* const* kp, int64_t n, const float* qt, int64_t d, __m512 scale) {
  const int64_t dd = D > 0 ? D : d;
  for (int64_t j = 0; j < n; j += kBlock) {
    const float* k[kBlock];
    __m512 a[kBlock][R];
    for (int64_t u = 0; u < kBlock; ++u) {
      k[u] = kp[std::min(j + u, n - 1)];
      for (int h = 0; h < R; ++h) a[u][h] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < dd; ++i) {
      __m512 q[R];
      for (int h = 0; h < R; ++h) q[h] = _mm512_load_ps(qt + (i * R + h) * kRegRows);
      for (int64_t u = 0; u < kBlock; ++u) {
        const __m512 kb = _mm512_set1_ps(k[u][i]);
        for (int h = 0; h < R; ++h) a[u][h] = _mm512_fmadd_ps(kb, q[h], a[u][h]);
      }
    }
    for (int64_t u = 0; u < kBlock && j + u < n; ++u) {
      for (int h = 0; h < R; ++h) st[(j + u) * R + h] = _mm512_mul_ps(a[u][h], scale);
    }
  }
}

// oT[i] = oT[i] * corr + sum_j v_j[i] * p[j] for i < d; 8 values of head_dim
// per pass, R chains each, while the n keys stream.
template <int64_t D, int R>
void acc_tile(float* ot, const __m512* corr, const __m512* p, const float* const* vp, int64_t n, int64_t d) {
  const int64_t dd = D > 0 ? D : d;
  int64_t i = 0;
  for (; i + kBlock <= dd; i += kBlock) {
    __m512 a[kBlock][R];
    for (int64_t u = 0; u < kBlock; ++u) {
      for (int h = 0; h < R; ++h) a[u][h] = _mm512_mul_ps(_mm512_load_ps(ot + ((i + u) * R + h) * kRegRows), corr[h]);
    }
    for (int64_t j = 0; j < n; ++j) {
      const float* v = vp[j] + i;
      __m512 pj[R];
      for (int h = 0; h < R; ++h) pj[h] = p[j * R + h];
      for (int64_t u = 0; u < kBlock; ++u) {
        const __m512 vb = _mm512_set1_ps(v[u]);
        for (int h = 0; h < R; ++h) a[u][h] = _mm512_fmadd_ps(vb, pj[h], a[u][h]);
      }
    }
    for (int64_t u = 0; u < kBlock; ++u) {
      for (int h = 0; h < R; ++h) _mm512_store_ps(ot + ((i + u) * R + h) * kRegRows, a[u][h]);
    }
  }
  if constexpr (D % kBlock != 0 || D == 0) {  // a head_dim not a multiple of 8
    for (; i < dd; ++i) {
      for (int h = 0; h < R; ++h) {
        float* o = ot + (i * R + h) * kRegRows;
        __m512 a = _mm512_mul_ps(_mm512_load_ps(o), corr[h]);
        for (int64_t j = 0; j < n; ++j) a = _mm512_fmadd_ps(_mm512_set1_ps(vp[j][i]), p[j * R + h], a);
        _mm512_store_ps(o, a);
      }
    }
  }
}

template <KvType T, int64_t D, int R>
void attend(const LaneItem& it, const PagedKvView& kv, const int32_t* block_table, int64_t kvh, float scale) {
  constexpr int64_t kDim = D > 0 ? D : kLaneMaxHeadDim;
  constexpr int kRows = R * kRegRows;
  // f32 rows are read in place; other types are converted once per tile.
  constexpr int64_t kConv = T == KvType::f32 ? 1 : kKeys * kDim;
  alignas(64) float qt[kDim * kRows];  // [head_dim][R * 16]
  alignas(64) float ot[kDim * kRows];  // [head_dim][R * 16]
  alignas(64) float kbuf[kConv];       // [32][head_dim]
  alignas(64) float vbuf[kConv];       // [32][head_dim]
  __m512 st[kKeys * R];                // [32 keys][R] of 16 rows
  const float* kp[kKeys];
  const float* vp[kKeys];

  const int64_t d = kv.head_dim;
  const int n_rows = it.n_rows;
  for (int64_t i = 0; i < d; ++i) {
    for (int r = 0; r < kRows; ++r) qt[i * kRows + r] = r < n_rows ? it.q[r][i] : 0.0f;
  }
  std::fill(ot, ot + d * kRows, 0.0f);
  // Lanes past n_rows see nothing (lo = hi = 0) and are never written out.
  alignas(64) int32_t lo_a[kRows] = {}, hi_a[kRows] = {};
  for (int r = 0; r < n_rows; ++r) {
    lo_a[r] = static_cast<int32_t>(it.lo[r]);
    hi_a[r] = static_cast<int32_t>(it.hi[r]);
  }
  const __m512 neg_inf = _mm512_set1_ps(-INFINITY);
  const __m512 vscale = _mm512_set1_ps(scale);
  __m512i lo[R], hi[R];
  __m512 m[R], l[R], corr[R];  // running max and sum of exp(score - m) of each row
  for (int h = 0; h < R; ++h) {
    lo[h] = _mm512_load_si512(lo_a + h * kRegRows);
    hi[h] = _mm512_load_si512(hi_a + h * kRegRows);
    m[h] = neg_inf;
    l[h] = _mm512_setzero_ps();
  }

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
    score_tile<D, R>(st, kp, n, qt, d, vscale);

    for (int h = 0; h < R; ++h) {
      // Positions a row cannot see score -inf; the tile's max per row.
      __m512 mt = neg_inf;
      for (int64_t j = 0; j < n; ++j) {
        const __m512i pos = _mm512_set1_epi32(static_cast<int32_t>(t + j));
        const __mmask16 seen =
            _mm512_cmp_epi32_mask(lo[h], pos, _MM_CMPINT_LE) & _mm512_cmp_epi32_mask(pos, hi[h], _MM_CMPINT_LT);
        st[j * R + h] = _mm512_mask_mov_ps(neg_inf, seen, st[j * R + h]);
        mt = _mm512_max_ps(mt, st[j * R + h]);
      }
      const __m512 m_new = _mm512_max_ps(m[h], mt);
      // A row that has seen nothing yet keeps m = -inf; subtracting 0
      // instead keeps its exps at exp(-inf) = 0 rather than NaN.
      const __m512 m_sub = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(m_new, neg_inf, _CMP_NEQ_OQ), m_new);
      corr[h] = exp_ps(_mm512_sub_ps(m[h], m_sub));  // 0 on a row's first keys (m = -inf)
      __m512 sum = _mm512_setzero_ps();
      for (int64_t j = 0; j < n; ++j) {
        st[j * R + h] = exp_ps(_mm512_sub_ps(st[j * R + h], m_sub));
        sum = _mm512_add_ps(sum, st[j * R + h]);
      }
      l[h] = _mm512_fmadd_ps(l[h], corr[h], sum);
      m[h] = m_new;
    }
    acc_tile<D, R>(ot, corr, st, vp, n, d);
  }

  // Every real row sees at least its own position, so its l > 0.
  for (int h = 0; h < R; ++h) {
    const __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.0f), l[h]);
    for (int64_t i = 0; i < d; ++i) {
      float* o = ot + (i * R + h) * kRegRows;
      _mm512_store_ps(o, _mm512_mul_ps(_mm512_load_ps(o), inv));
    }
  }
  for (int r = 0; r < n_rows; ++r) {
    for (int64_t i = 0; i < d; ++i) it.out[r][i] = ot[i * kRows + r];
  }
}

template <KvType T, int64_t D>
void attend_rows(const LaneItem& it, const PagedKvView& kv, const int32_t* bt, int64_t kvh, float scale) {
  if (it.n_rows > kRegRows) return attend<T, D, 2>(it, kv, bt, kvh, scale);
  attend<T, D, 1>(it, kv, bt, kvh, scale);
}

template <KvType T>
void attend_type(const LaneItem& it, const PagedKvView& kv, const int32_t* bt, int64_t kvh, float scale) {
  if (kv.head_dim == 64) return attend_rows<T, 64>(it, kv, bt, kvh, scale);
  if (kv.head_dim == 128) return attend_rows<T, 128>(it, kv, bt, kvh, scale);
  attend_rows<T, 0>(it, kv, bt, kvh, scale);
}

}  // namespace

bool lanes_available_avx512() { return isa_supported(Isa::avx512); }

void attend_lanes_avx512(const LaneItem& it, const PagedKvView& kv, const int32_t* block_table, int64_t kv_head,
                         float scale) {
  if (it.n_rows < 1 || it.n_rows > kLaneRows || kv.head_dim < 1 || kv.head_dim > kLaneMaxHeadDim) {
    throw Error(Errc::internal, "attend_lanes_avx512: " + std::to_string(it.n_rows) + " rows of head_dim " +
                                    std::to_string(kv.head_dim) + " do not fit the lanes");
  }
  switch (kv.type) {
    case KvType::f32: return attend_type<KvType::f32>(it, kv, block_table, kv_head, scale);
    case KvType::f16: return attend_type<KvType::f16>(it, kv, block_table, kv_head, scale);
    case KvType::bf16: return attend_type<KvType::bf16>(it, kv, block_table, kv_head, scale);
    case KvType::q8_0: return attend_type<KvType::q8_0>(it, kv, block_table, kv_head, scale);
  }
  throw Error(Errc::internal, "attend_lanes_avx512: unknown KV cache type");
}

}  // namespace troupe::kernels::cpu

#else

namespace troupe::kernels::cpu {

bool lanes_available_avx512() { return false; }

void attend_lanes_avx512(const LaneItem&, const PagedKvView&, const int32_t*, int64_t, float) {
  throw Error(Errc::internal, "attend_lanes_avx512: this build has no AVX-512 path");
}

}  // namespace troupe::kernels::cpu

#endif

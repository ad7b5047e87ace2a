// The lane attention (attention_lanes.hpp) for AVX2: a work item's rows sit
// in the 8 lanes of R registers (R = 1 to 4). Per tile of 32 key positions,
// as the AVX-512 kernel:
//   st[j]  = scale * sum_i k_j[i] * qT[i]      [32 keys] x [R * 8 rows]
//   m, l   = the running max and sum, per lane; st becomes exp(st - m)
//   oT[i]  = oT[i] * corr + sum_j v_j[i] * st[j]   [head_dim] x [R * 8 rows]
// AVX2 has 16 registers, so a pass takes fewer keys (or head_dim values) as
// R grows, keeping 8 to 12 FMA chains and every accumulator in a register.
#include "kernels/cpu/attention_lanes.hpp"

#include <string>

#include "core/cpu_features.hpp"
#include "core/error.hpp"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <algorithm>
#include <cmath>

#include "kernels/cpu/kv_rows_avx2.hpp"

namespace troupe::kernels::cpu {
namespace {

constexpr int64_t kKeys = 32;  // key positions per tile
constexpr int kRegRows = 8;    // rows in one register

// Keys a scoring pass takes, and head_dim values an accumulating pass
// takes, for R registers of rows: pass x R accumulators (at most 12; the
// queries, weights and broadcast fill the 16 registers). 32 rows on a Zen 4
// core (bench_attention --isa avx2, f32): scores 2 keys a pass and
// accumulating 2 values 52-61 GFLOP/s, 3 keys 61-70; 4 values (16
// accumulators, spilled) 40-60.
template <int R>
constexpr int64_t kScoreKeys = R == 1 ? 8 : R == 2 ? 6 : R == 3 ? 4 : 3;
template <int R>
constexpr int64_t kAccValues = R == 1 ? 8 : R == 2 ? 4 : R == 3 ? 4 : 2;

// st[j * R + h] = scale * (k_j . qT[h]) for j < n. A pass past n reuses the
// last key (its scores are not kept).
template <int64_t D, int R>
void score_tile(__m256* st, const float* const* kp, int64_t n, const float* qt, int64_t d, __m256 scale) {
  constexpr int64_t kB = kScoreKeys<R>;
  const int64_t dd = D > 0 ? D : d;
  for (int64_t j = 0; j < n; j += kB) {
    const float* k[kB];
    __m256 a[kB][R];
    for (int64_t u = 0; u < kB; ++u) {
      k[u] = kp[std::min(j + u, n - 1)];
      for (int h = 0; h < R; ++h) a[u][h] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < dd; ++i) {
      __m256 q[R];
      for (int h = 0; h < R; ++h) q[h] = _mm256_load_ps(qt + (i * R + h) * kRegRows);
      for (int64_t u = 0; u < kB; ++u) {
        const __m256 kb = _mm256_broadcast_ss(k[u] + i);
        for (int h = 0; h < R; ++h) a[u][h] = _mm256_fmadd_ps(kb, q[h], a[u][h]);
      }
    }
    for (int64_t u = 0; u < kB && j + u < n; ++u) {
      for (int h = 0; h < R; ++h) st[(j + u) * R + h] = _mm256_mul_ps(a[u][h], scale);
    }
  }
}

// oT[i] = oT[i] * corr + sum_j v_j[i] * p[j] for i < d, a few values of
// head_dim a pass, R chains each, while the n keys stream.
template <int64_t D, int R>
void acc_tile(float* ot, const __m256* corr, const __m256* p, const float* const* vp, int64_t n, int64_t d) {
  constexpr int64_t kB = kAccValues<R>;
  const int64_t dd = D > 0 ? D : d;
  int64_t i = 0;
  for (; i + kB <= dd; i += kB) {
    __m256 a[kB][R];
    for (int64_t u = 0; u < kB; ++u) {
      for (int h = 0; h < R; ++h) a[u][h] = _mm256_mul_ps(_mm256_load_ps(ot + ((i + u) * R + h) * kRegRows), corr[h]);
    }
    for (int64_t j = 0; j < n; ++j) {
      const float* v = vp[j] + i;
      for (int64_t u = 0; u < kB; ++u) {
        const __m256 vb = _mm256_broadcast_ss(v + u);
        for (int h = 0; h < R; ++h) a[u][h] = _mm256_fmadd_ps(vb, p[j * R + h], a[u][h]);
      }
    }
    for (int64_t u = 0; u < kB; ++u) {
      for (int h = 0; h < R; ++h) _mm256_store_ps(ot + ((i + u) * R + h) * kRegRows, a[u][h]);
    }
  }
  if constexpr (D % kB != 0 || D == 0) {  // a head_dim not a multiple of the pass
    for (; i < dd; ++i) {
      for (int h = 0; h < R; ++h) {
        float* o = ot + (i * R + h) * kRegRows;
        __m256 a = _mm256_mul_ps(_mm256_load_ps(o), corr[h]);
        for (int64_t j = 0; j < n; ++j) a = _mm256_fmadd_ps(_mm256_broadcast_ss(vp[j] + i), p[j * R + h], a);
        _mm256_store_ps(o, a);
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
  alignas(32) float qt[kDim * kRows];  // [head_dim][R * 8]
  alignas(32) float ot[kDim * kRows];  // [head_dim][R * 8]
  alignas(32) float kbuf[kConv];       // [32][head_dim]
  alignas(32) float vbuf[kConv];       // [32][head_dim]
  __m256 st[kKeys * R];                // [32 keys][R] of 8 rows
  const float* kp[kKeys];
  const float* vp[kKeys];

  const int64_t d = kv.head_dim;
  const int n_rows = it.n_rows;
  for (int64_t i = 0; i < d; ++i) {
    for (int r = 0; r < kRows; ++r) qt[i * kRows + r] = r < n_rows ? it.q[r][i] : 0.0f;
  }
  std::fill(ot, ot + d * kRows, 0.0f);
  // Lanes past n_rows see nothing (lo = hi = 0) and are never written out.
  alignas(32) int32_t lo_a[kRows] = {}, hi_a[kRows] = {};
  for (int r = 0; r < n_rows; ++r) {
    lo_a[r] = static_cast<int32_t>(it.lo[r]);
    hi_a[r] = static_cast<int32_t>(it.hi[r]);
  }
  const __m256 neg_inf = _mm256_set1_ps(-INFINITY);
  const __m256 vscale = _mm256_set1_ps(scale);
  __m256i lo[R], hi[R];
  __m256 m[R], l[R], corr[R];  // running max and sum of exp(score - m) of each row
  for (int h = 0; h < R; ++h) {
    lo[h] = _mm256_load_si256(reinterpret_cast<const __m256i*>(lo_a + h * kRegRows));
    hi[h] = _mm256_load_si256(reinterpret_cast<const __m256i*>(hi_a + h * kRegRows));
    m[h] = neg_inf;
    l[h] = _mm256_setzero_ps();
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
      // Positions a row cannot see score -inf (lo <= pos < hi); the tile's
      // max per row.
      __m256 mt = neg_inf;
      for (int64_t j = 0; j < n; ++j) {
        const __m256i pos = _mm256_set1_epi32(static_cast<int32_t>(t + j));
        const __m256i seen = _mm256_andnot_si256(_mm256_cmpgt_epi32(lo[h], pos), _mm256_cmpgt_epi32(hi[h], pos));
        st[j * R + h] = _mm256_blendv_ps(neg_inf, st[j * R + h], _mm256_castsi256_ps(seen));
        mt = _mm256_max_ps(mt, st[j * R + h]);
      }
      const __m256 m_new = _mm256_max_ps(m[h], mt);
      // A row that has seen nothing yet keeps m = -inf; subtracting 0
      // instead keeps its exps at exp(-inf) = 0 rather than NaN.
      const __m256 m_sub = _mm256_and_ps(m_new, _mm256_cmp_ps(m_new, neg_inf, _CMP_NEQ_OQ));
      corr[h] = exp_ps(_mm256_sub_ps(m[h], m_sub));  // 0 on a row's first keys (m = -inf)
      __m256 sum = _mm256_setzero_ps();
      for (int64_t j = 0; j < n; ++j) {
        st[j * R + h] = exp_ps(_mm256_sub_ps(st[j * R + h], m_sub));
        sum = _mm256_add_ps(sum, st[j * R + h]);
      }
      l[h] = _mm256_fmadd_ps(l[h], corr[h], sum);
      m[h] = m_new;
    }
    acc_tile<D, R>(ot, corr, st, vp, n, d);
  }

  // Every real row sees at least its own position, so its l > 0.
  for (int h = 0; h < R; ++h) {
    const __m256 inv = _mm256_div_ps(_mm256_set1_ps(1.0f), l[h]);
    for (int64_t i = 0; i < d; ++i) {
      float* o = ot + (i * R + h) * kRegRows;
      _mm256_store_ps(o, _mm256_mul_ps(_mm256_load_ps(o), inv));
    }
  }
  for (int r = 0; r < n_rows; ++r) {
    for (int64_t i = 0; i < d; ++i) it.out[r][i] = ot[i * kRows + r];
  }
}

template <KvType T, int64_t D>
void attend_rows(const LaneItem& it, const PagedKvView& kv, const int32_t* bt, int64_t kvh, float scale) {
  switch ((it.n_rows + kRegRows - 1) / kRegRows) {
    case 1: return attend<T, D, 1>(it, kv, bt, kvh, scale);
    case 2: return attend<T, D, 2>(it, kv, bt, kvh, scale);
    case 3: return attend<T, D, 3>(it, kv, bt, kvh, scale);
    default: return attend<T, D, 4>(it, kv, bt, kvh, scale);
  }
}

template <KvType T>
void attend_type(const LaneItem& it, const PagedKvView& kv, const int32_t* bt, int64_t kvh, float scale) {
  if (kv.head_dim == 64) return attend_rows<T, 64>(it, kv, bt, kvh, scale);
  if (kv.head_dim == 128) return attend_rows<T, 128>(it, kv, bt, kvh, scale);
  attend_rows<T, 0>(it, kv, bt, kvh, scale);
}

}  // namespace

bool lanes_available_avx2() { return isa_supported(Isa::avx2); }

void attend_lanes_avx2(const LaneItem& it, const PagedKvView& kv, const int32_t* block_table, int64_t kv_head,
                       float scale) {
  static_assert(kLaneRows <= 4 * kRegRows);
  if (it.n_rows < 1 || it.n_rows > kLaneRows || kv.head_dim < 1 || kv.head_dim > kLaneMaxHeadDim) {
    throw Error(Errc::internal, "attend_lanes_avx2: " + std::to_string(it.n_rows) + " rows of head_dim " +
                                    std::to_string(kv.head_dim) + " do not fit the lanes");
  }
  switch (kv.type) {
    case KvType::f32: return attend_type<KvType::f32>(it, kv, block_table, kv_head, scale);
    case KvType::f16: return attend_type<KvType::f16>(it, kv, block_table, kv_head, scale);
    case KvType::bf16: return attend_type<KvType::bf16>(it, kv, block_table, kv_head, scale);
    case KvType::q8_0: return attend_type<KvType::q8_0>(it, kv, block_table, kv_head, scale);
  }
  throw Error(Errc::internal, "attend_lanes_avx2: unknown KV cache type");
}

}  // namespace troupe::kernels::cpu

#else

namespace troupe::kernels::cpu {

bool lanes_available_avx2() { return false; }

void attend_lanes_avx2(const LaneItem&, const PagedKvView&, const int32_t*, int64_t, float) {
  throw Error(Errc::internal, "attend_lanes_avx2: this build has no AVX2 path");
}

}  // namespace troupe::kernels::cpu

#endif

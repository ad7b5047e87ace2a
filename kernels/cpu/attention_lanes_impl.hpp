// The lane attention's walk (attention_lanes.hpp) over a lane policy V: a
// work item's rows sit in the V::kRows lanes of R registers. Per tile of 32
// key positions:
//   st[j]  = scale * sum_i k_j[i] * qT[i]      [32 keys] x [R * kRows rows]
//   m, l   = the running max and sum, per lane; st becomes exp(st - m)
//   oT[i]  = oT[i] * corr + sum_j v_j[i] * st[j]   [head_dim] x [R * kRows rows]
// qT and oT [head_dim][R * kRows] live on the stack for each group of the
// item (one, or up to four of kLaneRows in a wide item); quantized K/V rows
// are converted to f32 once per tile, shared by all rows.
//
// V (Lanes16 in attention_lanes_avx512.cpp, Lanes8 in attention_lanes_avx2.cpp):
// Vec, IVec, kRows, kScoreKeys<R> and kAccValues<R> (keys or head_dim values
// a pass takes: every accumulator of a pass stays in a register), and the
// operations used below. Include only from those two files (internal
// linkage).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "core/error.hpp"
#include "kernels/cpu/attention_lanes.hpp"

namespace troupe::kernels::cpu {
namespace {  // NOLINT: per-ISA translation units only

constexpr int64_t kKeys = 32;  // key positions per tile

// st[j * R + h] = scale * (k_j . qT[h]) for j < n. Each key of a pass has R
// chains of its own; a pass past n reuses the last key (its scores are not
// kept).
template <class V, int64_t D, int R>
void score_tile(typename V::Vec* st, const float* const* kp, int64_t n, const float* qt, int64_t d,
                typename V::Vec scale) {
  using Vec = typename V::Vec;
  constexpr int64_t kB = V::template kScoreKeys<R>;
  const int64_t dd = D > 0 ? D : d;
  for (int64_t j = 0; j < n; j += kB) {
    const float* k[kB];
    Vec a[kB][R];
    for (int64_t u = 0; u < kB; ++u) {
      k[u] = kp[std::min(j + u, n - 1)];
      for (int h = 0; h < R; ++h) a[u][h] = V::zero();
    }
    for (int64_t i = 0; i < dd; ++i) {
      Vec q[R];
      for (int h = 0; h < R; ++h) q[h] = V::load(qt + (i * R + h) * V::kRows);
      for (int64_t u = 0; u < kB; ++u) {
        const Vec kb = V::broadcast(k[u] + i);
        for (int h = 0; h < R; ++h) a[u][h] = V::fmadd(kb, q[h], a[u][h]);
      }
    }
    for (int64_t u = 0; u < kB && j + u < n; ++u) {
      for (int h = 0; h < R; ++h) st[(j + u) * R + h] = V::mul(a[u][h], scale);
    }
  }
}

// oT[i] = oT[i] * corr + sum_j v_j[i] * p[j] for i < d; a few values of
// head_dim per pass, R chains each, while the n keys stream.
template <class V, int64_t D, int R>
void acc_tile(float* ot, const typename V::Vec* corr, const typename V::Vec* p, const float* const* vp, int64_t n,
              int64_t d) {
  using Vec = typename V::Vec;
  constexpr int64_t kB = V::template kAccValues<R>;
  const int64_t dd = D > 0 ? D : d;
  int64_t i = 0;
  for (; i + kB <= dd; i += kB) {
    Vec a[kB][R];
    for (int64_t u = 0; u < kB; ++u) {
      for (int h = 0; h < R; ++h) a[u][h] = V::mul(V::load(ot + ((i + u) * R + h) * V::kRows), corr[h]);
    }
    for (int64_t j = 0; j < n; ++j) {
      const float* v = vp[j] + i;
      for (int64_t u = 0; u < kB; ++u) {
        const Vec vb = V::broadcast(v + u);
        for (int h = 0; h < R; ++h) a[u][h] = V::fmadd(vb, p[j * R + h], a[u][h]);
      }
    }
    for (int64_t u = 0; u < kB; ++u) {
      for (int h = 0; h < R; ++h) V::store(ot + ((i + u) * R + h) * V::kRows, a[u][h]);
    }
  }
  if constexpr (D % kB != 0 || D == 0) {  // a head_dim not a multiple of the pass
    for (; i < dd; ++i) {
      for (int h = 0; h < R; ++h) {
        float* o = ot + (i * R + h) * V::kRows;
        Vec a = V::mul(V::load(o), corr[h]);
        for (int64_t j = 0; j < n; ++j) a = V::fmadd(V::broadcast(vp[j] + i), p[j * R + h], a);
        V::store(o, a);
      }
    }
  }
}

// A group of an item: up to R * V::kRows of its rows in the lanes of R
// registers, with their online softmax state.
template <class V, int64_t kDim, int R>
struct LaneGroup {
  static constexpr int kRows = R * V::kRows;
  alignas(64) float qt[kDim * kRows];  // [head_dim][kRows]
  alignas(64) float ot[kDim * kRows];  // [head_dim][kRows]
  typename V::IVec lo[R], hi[R];
  typename V::Vec m[R], l[R];  // running max and sum of exp(score - m) of each row
  int64_t key_lo, key_hi;      // the union of its rows' visible ranges
  int row0, n_rows;
};

template <class V, int64_t kDim, int R>
void group_begin(LaneGroup<V, kDim, R>& g, const LaneItem& it, int row0, int n_rows, int64_t d) {
  constexpr int kRows = LaneGroup<V, kDim, R>::kRows;
  g.row0 = row0;
  g.n_rows = n_rows;
  for (int64_t i = 0; i < d; ++i) {
    for (int r = 0; r < kRows; ++r) g.qt[i * kRows + r] = r < n_rows ? it.q[row0 + r][i] : 0.0f;
  }
  std::fill(g.ot, g.ot + d * kRows, 0.0f);
  // Lanes past n_rows see nothing (lo = hi = 0) and are never written out.
  alignas(64) int32_t lo_a[kRows] = {}, hi_a[kRows] = {};
  for (int r = 0; r < n_rows; ++r) {
    lo_a[r] = static_cast<int32_t>(it.lo[row0 + r]);
    hi_a[r] = static_cast<int32_t>(it.hi[row0 + r]);
  }
  for (int h = 0; h < R; ++h) {
    g.lo[h] = V::load_i(lo_a + h * V::kRows);
    g.hi[h] = V::load_i(hi_a + h * V::kRows);
    g.m[h] = V::set1(-INFINITY);
    g.l[h] = V::zero();
  }
  g.key_lo = it.lo[row0];
  g.key_hi = it.hi[row0 + n_rows - 1];
}

// The group's rows over the n keys of the tile at position t.
template <class V, int64_t D, int64_t kDim, int R>
void group_tile(LaneGroup<V, kDim, R>& g, typename V::Vec* st, const float* const* kp, const float* const* vp,
                int64_t t, int64_t n, int64_t d, typename V::Vec vscale) {
  using Vec = typename V::Vec;
  const Vec neg_inf = V::set1(-INFINITY);
  score_tile<V, D, R>(st, kp, n, g.qt, d, vscale);
  Vec corr[R];
  for (int h = 0; h < R; ++h) {
    // Positions a row cannot see score -inf; the tile's max per row.
    Vec mt = neg_inf;
    for (int64_t j = 0; j < n; ++j) {
      st[j * R + h] = V::visible(st[j * R + h], g.lo[h], g.hi[h], static_cast<int32_t>(t + j), neg_inf);
      mt = V::max(mt, st[j * R + h]);
    }
    const Vec m_new = V::max(g.m[h], mt);
    // A row that has seen nothing yet keeps m = -inf; subtracting 0
    // instead keeps its exps at exp(-inf) = 0 rather than NaN.
    const Vec m_sub = V::finite_or_zero(m_new, neg_inf);
    corr[h] = V::exp(V::sub(g.m[h], m_sub));  // 0 on a row's first keys (m = -inf)
    Vec sum = V::zero();
    for (int64_t j = 0; j < n; ++j) {
      st[j * R + h] = V::exp(V::sub(st[j * R + h], m_sub));
      sum = V::add(sum, st[j * R + h]);
    }
    g.l[h] = V::fmadd(g.l[h], corr[h], sum);
    g.m[h] = m_new;
  }
  acc_tile<V, D, R>(g.ot, corr, st, vp, n, d);
}

template <class V, int64_t kDim, int R>
void group_end(LaneGroup<V, kDim, R>& g, const LaneItem& it, int64_t d) {
  using Vec = typename V::Vec;
  constexpr int kRows = LaneGroup<V, kDim, R>::kRows;
  const Vec neg_inf = V::set1(-INFINITY);
  // Every real row sees at least its own position, so its l > 0. A sink
  // adds exp(sink - m) to the denominator (lanes past n_rows get a sink of
  // 0: finite, and never written out).
  alignas(64) float sink_a[kRows] = {};
  if (it.has_sinks) {
    for (int r = 0; r < g.n_rows; ++r) sink_a[r] = it.sink[g.row0 + r];
  }
  for (int h = 0; h < R; ++h) {
    Vec l = g.l[h];
    if (it.has_sinks) {
      const Vec m_sub = V::finite_or_zero(g.m[h], neg_inf);
      l = V::add(l, V::exp(V::sub(V::load(sink_a + h * V::kRows), m_sub)));
    }
    const Vec inv = V::div(V::set1(1.0f), l);
    for (int64_t i = 0; i < d; ++i) {
      float* o = g.ot + (i * R + h) * V::kRows;
      V::store(o, V::mul(V::load(o), inv));
    }
  }
  for (int r = 0; r < g.n_rows; ++r) {
    for (int64_t i = 0; i < d; ++i) it.out[g.row0 + r][i] = g.ot[i * kRows + r];
  }
}

// The item's rows in up to G groups of R registers. Each tile of keys is
// read (and, for a 16- or 8-bit cache, converted) once for all the groups:
// a wide item of kWideRows rows reads the keys and values a quarter as
// often as four items of kLaneRows. A group skips the tiles none of its
// rows sees, work an item of its rows alone would not do. Where the item's
// rows all start their ranges at one position (causal prefill without a
// window, an encoder), the tiles fall where a narrow item's do, and a row
// gets the bits it gets in a narrow item (tests/kernels/attention_test.cpp).
template <class V, KvType T, int64_t D, int R, int G>
void attend(const LaneItem& it, const PagedKvView& kv, const int32_t* block_table, int64_t kvh, float scale) {
  using Vec = typename V::Vec;
  constexpr int64_t kDim = D > 0 ? D : kLaneMaxHeadDim;
  constexpr int kRows = R * V::kRows;
  // f32 rows are read in place; other types are converted once per tile.
  constexpr int64_t kConv = T == KvType::f32 ? 1 : kKeys * kDim;
  LaneGroup<V, kDim, R> groups[G];
  alignas(64) float kbuf[kConv];  // [32][head_dim]
  alignas(64) float vbuf[kConv];  // [32][head_dim]
  Vec st[kKeys * R];              // [32 keys][R] of V::kRows rows
  const float* kp[kKeys];
  const float* vp[kKeys];

  const int64_t d = kv.head_dim;
  const int n_groups = (it.n_rows + kRows - 1) / kRows;
  for (int g = 0; g < n_groups; ++g) group_begin(groups[g], it, g * kRows, std::min(kRows, it.n_rows - g * kRows), d);
  const Vec vscale = V::set1(scale);

  const auto* kc = static_cast<const unsigned char*>(kv.k);
  const auto* vc = static_cast<const unsigned char*>(kv.v);
  const int64_t bs = kv.block_size;
  const int64_t u_hi = it.hi[it.n_rows - 1];
  for (int64_t t = it.lo[0]; t < u_hi; t += kKeys) {
    const int64_t n = std::min(kKeys, u_hi - t);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t p = t + j;
      const int64_t off = kv.byte_offset(block_table[p / bs], p % bs, kvh);
      if constexpr (T == KvType::f32) {
        kp[j] = reinterpret_cast<const float*>(kc + off);
        vp[j] = reinterpret_cast<const float*>(vc + off);
      } else {
        V::template row_to_f32<T>(kbuf + j * d, kc + off, d);
        V::template row_to_f32<T>(vbuf + j * d, vc + off, d);
        kp[j] = kbuf + j * d;
        vp[j] = vbuf + j * d;
      }
    }
    for (int g = 0; g < n_groups; ++g) {
      if (t >= groups[g].key_hi || t + n <= groups[g].key_lo) continue;  // no row of the group sees the tile
      group_tile<V, D>(groups[g], st, kp, vp, t, n, d, vscale);
    }
  }
  for (int g = 0; g < n_groups; ++g) group_end(groups[g], it, d);
}

// As few registers as hold a narrow item's rows; a wide one (more than
// kLaneRows) in groups of kLaneRows.
template <class V, KvType T, int64_t D>
void attend_rows(const LaneItem& it, const PagedKvView& kv, const int32_t* bt, int64_t kvh, float scale) {
  constexpr int kMaxR = kLaneRows / V::kRows;
  static_assert(kMaxR * V::kRows == kLaneRows && (kMaxR == 2 || kMaxR == 4));
  static_assert(kWideRows % kLaneRows == 0);
  if (it.n_rows > kLaneRows) return attend<V, T, D, kMaxR, kWideRows / kLaneRows>(it, kv, bt, kvh, scale);
  const int regs = (it.n_rows + V::kRows - 1) / V::kRows;
  if (regs <= 1) return attend<V, T, D, 1, 1>(it, kv, bt, kvh, scale);
  if (regs == 2 || kMaxR == 2) return attend<V, T, D, 2, 1>(it, kv, bt, kvh, scale);
  if constexpr (kMaxR == 4) {
    if (regs == 3) return attend<V, T, D, 3, 1>(it, kv, bt, kvh, scale);
    return attend<V, T, D, 4, 1>(it, kv, bt, kvh, scale);
  }
}

template <class V, KvType T>
void attend_type(const LaneItem& it, const PagedKvView& kv, const int32_t* bt, int64_t kvh, float scale) {
  if (kv.head_dim == 64) return attend_rows<V, T, 64>(it, kv, bt, kvh, scale);
  if (kv.head_dim == 128) return attend_rows<V, T, 128>(it, kv, bt, kvh, scale);
  attend_rows<V, T, 0>(it, kv, bt, kvh, scale);
}

// The checks and the cache type's instantiation; `fn` names the caller in
// errors.
template <class V>
void attend_lanes_with(const char* fn, const LaneItem& it, const PagedKvView& kv, const int32_t* block_table,
                       int64_t kv_head, float scale) {
  if (it.n_rows < 1 || it.n_rows > kWideRows || kv.head_dim < 1 || kv.head_dim > kLaneMaxHeadDim) {
    throw Error(Errc::internal, std::string(fn) + ": " + std::to_string(it.n_rows) + " rows of head_dim " +
                                    std::to_string(kv.head_dim) + " do not fit the lanes");
  }
  switch (kv.type) {
    case KvType::f32: return attend_type<V, KvType::f32>(it, kv, block_table, kv_head, scale);
    case KvType::f16: return attend_type<V, KvType::f16>(it, kv, block_table, kv_head, scale);
    case KvType::bf16: return attend_type<V, KvType::bf16>(it, kv, block_table, kv_head, scale);
    case KvType::q8_0: return attend_type<V, KvType::q8_0>(it, kv, block_table, kv_head, scale);
  }
  throw Error(Errc::internal, std::string(fn) + ": unknown KV cache type");
}

}  // namespace
}  // namespace troupe::kernels::cpu

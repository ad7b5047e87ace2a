// Prefill attention on AMX-BF16 tiles (attention_lanes.hpp): a work item's
// (query, head) rows (up to kWideRows) in groups of 16, the keys of its visible range in
// blocks of 64, and per block and group
//   S [16 rows, 64 keys] = (scale log2(e) q) · k^T   four C tiles, tdpbf16ps over head_dim 32 at a time
//   online softmax of S per row (f32, AVX-512): m, l, corr, P = 2^(S - m) as bf16
//     (base 2: log2(e) rides on q's scale, and 2^x is a few instructions)
//   T [16 rows, head_dim] = P · v           a C tile per 16 values, over the 64 keys
//   O = corr O + T                          (AVX-512: a tile cannot be rescaled in place)
// with q, k, v and P rounded to bf16 and every sum in f32, as the AMX bf16
// prefill of the matmuls rounds activations. The block's k and v are staged
// once for all the item's row groups: k transposed into tdpbf16ps's B layout (rows of
// dimension pairs, a column per key), v into rows of key pairs. Independent
// C tiles keep several products in flight: one tile's chain of products
// would wait out the latency of each.
#include "kernels/cpu/attention_lanes.hpp"

#include "core/cpu_features.hpp"
#include "core/error.hpp"

#if defined(__x86_64__) && defined(__AMX_BF16__) && defined(__AVX512BF16__)

// clang-format off
#include "kernels/cpu/x86_intrinsics.hpp"  // first: <immintrin.h> without GCC 12's false warnings
// clang-format on

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "kernels/cpu/amx_tile_config.hpp"
#include "kernels/cpu/kv_rows_avx512.hpp"

namespace troupe::kernels::cpu {
namespace {

constexpr int kRows = 16;                    // rows of an A or C tile
constexpr int kKeys = 64;                    // keys a block: four S tiles, two P tiles
constexpr int64_t kMaxDq = kLaneMaxHeadDim;  // head_dim rounded up to 32 (the Q · K^T depth)
constexpr int kGroups = kWideRows / kRows;

// Tiles 0-3: C (S by 16 keys, then T by 16 values, in turn); 4-5: A (q, or
// P by 32 keys); 6-7: B (k or v). All 16 rows of 64 bytes. (Spreading the B
// loads over more tiles measured slower.)
void configure() {
  detail::TileConfig cfg;
  for (int i = 0; i < 8; ++i) {
    cfg.rows[i] = kRows;
    cfg.colsb[i] = 64;
  }
  _tile_loadconfig(&cfg);
}

inline __m256i bf16x16(__m512 x) { return std::bit_cast<__m256i>(_mm512_cvtneps_pbh(x)); }

constexpr float kLog2e = 1.44269504088896341f;

// 2^x for x <= 0: 2^k p(f), k = round(x), f = x - k in [-1/2, 1/2], p the
// degree-5 Taylor polynomial of e^(f ln 2) (relative error below 3e-6,
// beside bf16's 2^-9 for the weights it makes). Below 2^-126, 2^-126: next
// to a row's largest weight (1) it is nothing.
inline __m512 exp2_ps(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-126.0f));
  const __m512 k = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(x, k);
  __m512 p = _mm512_set1_ps(1.3333558e-3f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6181291e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504109e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.24022651f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.69314718f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, k);
}

// dst[0, n) = bf16(src[0, d)) with zeros from d to n (n a multiple of 16).
inline void row_to_bf16(uint16_t* dst, const float* src, int64_t d, int64_t n, float scale = 1.0f) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = i >= d ? 0 : d - i >= 16 ? 0xffff : tail_mask(d - i);
    const __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, src + i), _mm512_set1_ps(scale));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), bf16x16(x));
  }
}

// The 16 x 16 32-bit block at src (rows `stride` uint32 apart), transposed
// into dst (16 rows of 16).
inline void transpose16(const uint32_t* src, int64_t stride, uint32_t* dst) {
  __m512i r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_si512(src + i * stride);
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  // r[4 a + c]'s 128-bit lane L is column 4 L + c of rows 4 a .. 4 a + 3:
  // output row 4 L + c gathers lane L of r[c], r[4 + c], r[8 + c], r[12 + c].
  for (int i = 0; i < 4; ++i) {
    const __m512i a = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);  // lanes 0, 2 of each
    const __m512i b = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xdd);  // lanes 1, 3
    const __m512i c = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
    const __m512i e = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xdd);
    t[i] = _mm512_shuffle_i32x4(a, c, 0x88);       // lane 0
    t[i + 8] = _mm512_shuffle_i32x4(a, c, 0xdd);   // lane 2
    t[i + 4] = _mm512_shuffle_i32x4(b, e, 0x88);   // lane 1
    t[i + 12] = _mm512_shuffle_i32x4(b, e, 0xdd);  // lane 3
  }
  for (int i = 0; i < 16; ++i) _mm512_storeu_si512(dst + i * 16, t[i]);
}

// One item's buffers (about 300 KiB: off the stack, one set per thread).
struct Scratch {
  alignas(64) uint16_t q[kGroups][kRows][kMaxDq];   // scale q, bf16, by row group
  alignas(64) float o[kGroups][kRows][kMaxDq];      // O by row group
  alignas(64) uint16_t k[kKeys][kMaxDq];            // the block's keys, bf16
  alignas(64) uint16_t v[kKeys][kMaxDq];            // the block's values, bf16
  alignas(64) uint32_t kb[kMaxDq / 32][4][16][16];  // k^T: per 32 dims and 16 keys, rows of dimension pairs
  alignas(64) uint32_t vb[kMaxDq / 16][2][16][16];  // v: per 16 values and 32 keys, rows of key pairs
  alignas(64) float s[kRows][kKeys];
  alignas(64) uint16_t p[kRows][kKeys];
  alignas(64) float t[kRows][kMaxDq];  // P · v
  alignas(64) float row[kMaxDq];       // one cached row as f32
};

// T's values [16 n, 16 n + 16) through C tile `c` with B tiles `b0`, `b1`:
// P (tiles 4, 5) times v's two halves of 32 keys. GCC's tile intrinsics
// take literal tile numbers.
#define TROUPE_PV_TILE(c, b0, b1)                  \
  do {                                             \
    _tile_zero(c);                                 \
    _tile_loadd(b0, sc.vb[n][0], 64);              \
    _tile_dpbf16ps(c, 4, b0);                      \
    _tile_loadd(b1, sc.vb[n][1], 64);              \
    _tile_dpbf16ps(c, 5, b1);                      \
    _tile_stored(c, &sc.t[0][n * 16], kMaxDq * 4); \
  } while (0)

template <KvType T>
const float* cached_row(Scratch& sc, const unsigned char* row, int64_t d) {
  if constexpr (T == KvType::f32) {
    return reinterpret_cast<const float*>(row);
  } else {
    row_to_f32<T>(sc.row, row, d);
    return sc.row;
  }
}

template <KvType T>
void attend(const LaneItem& it, const PagedKvView& kv, const int32_t* table, int64_t kvh, float scale) {
  thread_local Scratch sc;
  const int64_t d = kv.head_dim;
  const int64_t dq = (d + 31) / 32 * 32;  // Q · K^T depth
  const int64_t dv = (d + 15) / 16 * 16;  // O's width
  const int n_groups = (it.n_rows + kRows - 1) / kRows;
  float m[kGroups][kRows], l[kGroups][kRows];
  for (int g = 0; g < n_groups; ++g) {
    for (int r = 0; r < kRows; ++r) {
      const int row = g * kRows + r;
      if (row < it.n_rows) {
        row_to_bf16(sc.q[g][r], it.q[row], d, dq, scale * kLog2e);
      } else {
        std::memset(sc.q[g][r], 0, static_cast<size_t>(dq) * 2);
      }
      std::memset(sc.o[g][r], 0, static_cast<size_t>(dv) * 4);
      m[g][r] = -INFINITY;
      l[g][r] = 0.0f;
    }
  }
  configure();
  const int64_t bs = kv.block_size;
  const int64_t u_lo = it.lo[0], u_hi = it.hi[it.n_rows - 1];
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  for (int64_t t = u_lo; t < u_hi; t += kKeys) {
    const int64_t nk = std::min<int64_t>(kKeys, u_hi - t);
    for (int64_t j = 0; j < kKeys; ++j) {
      if (j >= nk) {
        std::memset(sc.k[j], 0, static_cast<size_t>(dq) * 2);
        std::memset(sc.v[j], 0, static_cast<size_t>(dv) * 2);
        continue;
      }
      const int64_t pos = t + j;
      const int64_t off = kv.byte_offset(table[pos / bs], pos % bs, kvh);
      row_to_bf16(sc.k[j], cached_row<T>(sc, static_cast<const unsigned char*>(kv.k) + off, d), d, dq);
      row_to_bf16(sc.v[j], cached_row<T>(sc, static_cast<const unsigned char*>(kv.v) + off, d), d, dv);
    }
    // k^T: the pairs of 32 dims of 16 keys, as 32-bit words, transposed.
    const int n_key_tiles = static_cast<int>((nk + 15) / 16);  // S tiles with keys in them
    for (int64_t c = 0; c < dq / 32; ++c) {
      for (int h = 0; h < n_key_tiles; ++h) {
        transpose16(reinterpret_cast<const uint32_t*>(&sc.k[h * 16][c * 32]), kMaxDq / 2, &sc.kb[c][h][0][0]);
      }
    }
    // v: rows 2i and 2i + 1 of each half interleaved, value by value.
    for (int64_t n = 0; n < dv / 16; ++n) {
      for (int h = 0; h < 2; ++h) {
        for (int i = 0; i < 16; ++i) {
          const uint16_t* v0 = &sc.v[32 * h + 2 * i][n * 16];
          const __m512i a = _mm512_cvtepu16_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(v0)));
          const __m512i b = _mm512_cvtepu16_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(v0 + kMaxDq)));
          _mm512_store_si512(sc.vb[n][h][i], _mm512_or_si512(a, _mm512_slli_epi32(b, 16)));
        }
      }
    }
    for (int g = 0; g < n_groups; ++g) {
      // Key tiles past the block's keys hold zeros and are masked below;
      // their products are skipped.
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (int64_t c = 0; c < dq / 32; ++c) {
        _tile_loadd(4, &sc.q[g][0][c * 32], kMaxDq * 2);
        _tile_loadd(6, sc.kb[c][0], 64);
        _tile_dpbf16ps(0, 4, 6);
        if (n_key_tiles > 1) {
          _tile_loadd(7, sc.kb[c][1], 64);
          _tile_dpbf16ps(1, 4, 7);
        }
        if (n_key_tiles > 2) {
          _tile_loadd(6, sc.kb[c][2], 64);
          _tile_dpbf16ps(2, 4, 6);
        }
        if (n_key_tiles > 3) {
          _tile_loadd(7, sc.kb[c][3], 64);
          _tile_dpbf16ps(3, 4, 7);
        }
      }
      _tile_stored(0, &sc.s[0][0], kKeys * 4);
      _tile_stored(1, &sc.s[0][16], kKeys * 4);
      _tile_stored(2, &sc.s[0][32], kKeys * 4);
      _tile_stored(3, &sc.s[0][48], kKeys * 4);
      float corrs[kRows];
      for (int r = 0; r < kRows; ++r) {
        const int row = g * kRows + r;
        __m512 sv[4];
        __mmask16 vis[4] = {0, 0, 0, 0};
        if (row < it.n_rows) {
          // Keys t + j with lo <= t + j < hi, j < nk.
          const __m512i lo = _mm512_set1_epi32(static_cast<int32_t>(std::max<int64_t>(it.lo[row] - t, -1)));
          const __m512i hi = _mm512_set1_epi32(static_cast<int32_t>(std::min<int64_t>(it.hi[row] - t, nk)));
          for (int h = 0; h < 4; ++h) {
            const __m512i j = _mm512_add_epi32(lane, _mm512_set1_epi32(16 * h));
            vis[h] = _mm512_cmp_epi32_mask(lo, j, _MM_CMPINT_LE) & _mm512_cmp_epi32_mask(j, hi, _MM_CMPINT_LT);
          }
        }
        float& mr = m[g][r];
        float& lr = l[g][r];
        float corr = 1.0f;
        __m512 p[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
        if ((vis[0] | vis[1] | vis[2] | vis[3]) != 0) {
          const __m512 ninf = _mm512_set1_ps(-INFINITY);
          __m512 mx = ninf;
          for (int h = 0; h < 4; ++h) {
            sv[h] = _mm512_mask_mov_ps(ninf, vis[h], _mm512_load_ps(&sc.s[r][16 * h]));
            mx = _mm512_max_ps(mx, sv[h]);
          }
          const float m_new = std::max(mr, _mm512_reduce_max_ps(mx));
          corr = std::exp2(mr - m_new);  // 0 on the row's first visible block (mr = -inf)
          const __m512 mv = _mm512_set1_ps(m_new);
          __m512 sum = _mm512_setzero_ps();
          for (int h = 0; h < 4; ++h) {
            if (vis[h] == 0) continue;
            p[h] = _mm512_maskz_mov_ps(vis[h], exp2_ps(_mm512_sub_ps(sv[h], mv)));
            sum = _mm512_add_ps(sum, p[h]);
          }
          lr = lr * corr + _mm512_reduce_add_ps(sum);
          mr = m_new;
        }
        for (int h = 0; h < 4; ++h) _mm256_store_si256(reinterpret_cast<__m256i*>(&sc.p[r][16 * h]), bf16x16(p[h]));
        corrs[r] = corr;
      }
      _tile_loadd(4, &sc.p[0][0], kKeys * 2);
      _tile_loadd(5, &sc.p[0][32], kKeys * 2);
      for (int64_t n = 0; n < dv / 16; ++n) {
        switch (n % 4) {
          case 0:
            TROUPE_PV_TILE(0, 6, 7);
            break;
          case 1:
            TROUPE_PV_TILE(1, 6, 7);
            break;
          case 2:
            TROUPE_PV_TILE(2, 6, 7);
            break;
          default:
            TROUPE_PV_TILE(3, 6, 7);
            break;
        }
      }
      for (int r = 0; r < kRows; ++r) {
        const __m512 cv = _mm512_set1_ps(corrs[r]);
        for (int64_t i = 0; i < dv; i += 16) {
          const __m512 o = _mm512_load_ps(&sc.o[g][r][i]);
          _mm512_store_ps(&sc.o[g][r][i], _mm512_fmadd_ps(o, cv, _mm512_load_ps(&sc.t[r][i])));
        }
      }
    }
  }
  // Every row sees at least its own position, so l > 0. The sink joins the
  // denominator only.
  for (int row = 0; row < it.n_rows; ++row) {
    const int g = row / kRows, r = row % kRows;
    const float sink = it.has_sinks ? std::exp2(it.sink[row] * kLog2e - m[g][r]) : 0.0f;
    const __m512 inv = _mm512_set1_ps(1.0f / (l[g][r] + sink));
    for (int64_t i = 0; i < d; i += 16) {
      const __mmask16 mk = d - i >= 16 ? 0xffff : tail_mask(d - i);
      _mm512_mask_storeu_ps(it.out[row] + i, mk, _mm512_mul_ps(_mm512_load_ps(&sc.o[g][r][i]), inv));
    }
  }
}

}  // namespace

bool amx_attention_available() { return amx_enabled() && cpu_has_avx512_bf16() && isa_supported(Isa::avx512); }

void attend_amx_bf16(const LaneItem& it, const PagedKvView& kv, const int32_t* block_table, int64_t kv_head,
                     float scale) {
  if (it.n_rows < 1 || it.n_rows > kWideRows || kv.head_dim > kLaneMaxHeadDim) {
    throw Error(Errc::internal, "attend_amx_bf16: bad item");
  }
  switch (kv.type) {
    case KvType::f32:
      return attend<KvType::f32>(it, kv, block_table, kv_head, scale);
    case KvType::f16:
      return attend<KvType::f16>(it, kv, block_table, kv_head, scale);
    case KvType::bf16:
      return attend<KvType::bf16>(it, kv, block_table, kv_head, scale);
    case KvType::q8_0:
      return attend<KvType::q8_0>(it, kv, block_table, kv_head, scale);
  }
}

}  // namespace troupe::kernels::cpu

#else

namespace troupe::kernels::cpu {

bool amx_attention_available() { return false; }

void attend_amx_bf16(const LaneItem&, const PagedKvView&, const int32_t*, int64_t, float) {
  throw Error(Errc::internal, "attend_amx_bf16: this build has no AMX-BF16 path");
}

}  // namespace troupe::kernels::cpu

#endif

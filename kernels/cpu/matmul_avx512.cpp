// AVX-512 matmul (compiled with -mavx512f/bw/vl/dq -mfma -mf16c). Decode (few
// tokens) is a GEMV that streams each weight row once, dequantizing 32 weights
// at a time in registers; prefill dequantizes a panel of rows into an f32
// buffer once and runs a register-blocked tokens × rows micro-kernel over it.
#include "kernels/cpu/matmul_impl.hpp"

#if defined(__x86_64__) || defined(__i386__)

#include "kernels/cpu/simd_avx512.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

namespace troupe::kernels::detail {
namespace {

using cpu::prefetch_ahead;
using cpu::reduce8;

// Below this many tokens the in-register GEMV is faster (measured on Zen 5:
// it reads each weight once per 4 tokens with no panel to write and re-read).
constexpr int64_t kGemmMinTokens = 16;
// Prefill micro-tile: 6 tokens × 4 rows = 24 zmm accumulators, plus 6 x
// vectors and one weight vector; 10 loads per 24 FMAs. Few weight rows (they
// stream from L2) and many token rows (they stay in L1): measured ~8% faster
// than 4 tokens × 6 rows, and 3 × 8 was 25% slower.
constexpr int kTileTokens = 6;
constexpr int kTileRows = 4;
// Columns of W per panel: the panel (kMatmulRowUnit rows, ~200 KiB) stays in
// L2 while a tile's 6 rows of x (24 KiB) stay in L1.
constexpr int64_t kKBlock = 1024;

// ---- Loaders: one chunk (32 weights of a row) as two vectors of 16 f32 ----
// Each gives exactly the values dequantize_row gives.

__m512 half_broadcast(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(h)));
}

__m256i load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
__m128i load128(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }

struct LoadF32 {
  static constexpr bool kQuantized = false;
  static constexpr int64_t kChunkBytes = 32 * 4;
  static void load(const uint8_t* c, __m512& lo, __m512& hi) {
    lo = _mm512_loadu_ps(c);
    hi = _mm512_loadu_ps(c + 64);
  }
};

struct LoadF16 {
  static constexpr bool kQuantized = false;
  static constexpr int64_t kChunkBytes = 32 * 2;
  static void load(const uint8_t* c, __m512& lo, __m512& hi) {
    lo = _mm512_cvtph_ps(load256(c));
    hi = _mm512_cvtph_ps(load256(c + 32));
  }
};

struct LoadBF16 {
  static constexpr bool kQuantized = false;
  static constexpr int64_t kChunkBytes = 32 * 2;
  // bf16 is the high half of an f32: widen to 32 bits and shift up.
  static __m512 widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  static void load(const uint8_t* c, __m512& lo, __m512& hi) {
    lo = widen(load256(c));
    hi = widen(load256(c + 32));
  }
};

struct LoadQ8_0 {
  static constexpr bool kQuantized = true;
  static constexpr int64_t kChunkBytes = sizeof(BlockQ8_0);
  static void load(const uint8_t* c, __m512& lo, __m512& hi) {
    const __m512 d = half_broadcast(c + offsetof(BlockQ8_0, d));
    const uint8_t* qs = c + offsetof(BlockQ8_0, qs);
    lo = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(load128(qs))));
    hi = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(load128(qs + 16))));
  }
};

// q4: the 16 possible weights of a block form a table of 16 floats, so one
// vpermps per 16 nibbles dequantizes them (it reads only the low 4 index bits,
// so the high nibble needs a shift but no mask).
struct LoadQ4_0 {
  static constexpr bool kQuantized = true;
  static constexpr int64_t kChunkBytes = sizeof(BlockQ4_0);
  static void load(const uint8_t* c, __m512& lo, __m512& hi) {
    const __m512 levels = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
    const __m512 table = _mm512_mul_ps(half_broadcast(c + offsetof(BlockQ4_0, d)), levels);
    const __m512i q = _mm512_cvtepu8_epi32(load128(c + offsetof(BlockQ4_0, qs)));
    lo = _mm512_permutexvar_ps(q, table);
    hi = _mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), table);
  }
};

// The 16 iq4 levels (core/dtype.hpp) as floats.
inline __m512 iq4_levels() {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(load128(reinterpret_cast<const uint8_t*>(kIq4Levels))));
}

// iq4_nl: as q4_0 with the non-linear levels; d * level is exact.
struct LoadIQ4_NL {
  static constexpr bool kQuantized = true;
  static constexpr int64_t kChunkBytes = sizeof(BlockIQ4_NL);
  static void load(const uint8_t* c, __m512& lo, __m512& hi) {
    const __m512 table = _mm512_mul_ps(half_broadcast(c + offsetof(BlockIQ4_NL, d)), iq4_levels());
    const __m512i q = _mm512_cvtepu8_epi32(load128(c + offsetof(BlockIQ4_NL, qs)));
    lo = _mm512_permutexvar_ps(q, table);
    hi = _mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), table);
  }
};

struct LoadQ4_1 {
  static constexpr bool kQuantized = true;
  static constexpr int64_t kChunkBytes = sizeof(BlockQ4_1);
  static void load(const uint8_t* c, __m512& lo, __m512& hi) {
    const __m512 levels = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512 d = half_broadcast(c + offsetof(BlockQ4_1, d));
    const __m512 m = half_broadcast(c + offsetof(BlockQ4_1, m));
    // d * q is exact in f32 (11-bit d times a 4-bit q), so d * q + m rounds
    // once, as in dequantize_row, fused or not.
    const __m512 table = _mm512_add_ps(_mm512_mul_ps(d, levels), m);
    const __m512i q = _mm512_cvtepu8_epi32(load128(c + offsetof(BlockQ4_1, qs)));
    lo = _mm512_permutexvar_ps(q, table);
    hi = _mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), table);
  }
};

// q5: 32 levels, so vpermt2ps picks from two 16-entry tables with a 5-bit
// index: the nibble plus bit i of the block's qh (weights 0..15 use bits
// 0..15, weights 16..31 bits 16..31).
inline void q5_index(const uint8_t* qh_bytes, const uint8_t* qs, __m512i& lo, __m512i& hi) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, sizeof qh);
  const __m512i bits = _mm512_set1_epi32(static_cast<int>(qh));
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i shift_lo = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i shift_hi = _mm512_add_epi32(shift_lo, _mm512_set1_epi32(16));
  const __m512i h_lo = _mm512_slli_epi32(_mm512_and_si512(_mm512_srlv_epi32(bits, shift_lo), one), 4);
  const __m512i h_hi = _mm512_slli_epi32(_mm512_and_si512(_mm512_srlv_epi32(bits, shift_hi), one), 4);
  const __m512i q = _mm512_cvtepu8_epi32(load128(qs));
  lo = _mm512_or_si512(_mm512_and_si512(q, _mm512_set1_epi32(0x0f)), h_lo);
  hi = _mm512_or_si512(_mm512_srli_epi32(q, 4), h_hi);
}

struct LoadQ5_0 {
  static constexpr bool kQuantized = true;
  static constexpr int64_t kChunkBytes = sizeof(BlockQ5_0);
  static void load(const uint8_t* c, __m512& lo, __m512& hi) {
    const __m512 d = half_broadcast(c + offsetof(BlockQ5_0, d));
    // d * (q - 16): exact products, as in dequantize_row.
    const __m512 t0 = _mm512_mul_ps(d, _mm512_setr_ps(-16, -15, -14, -13, -12, -11, -10, -9, -8, -7, -6, -5, -4, -3, -2, -1));
    const __m512 t1 = _mm512_mul_ps(d, _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    __m512i ilo, ihi;
    q5_index(c + offsetof(BlockQ5_0, qh), c + offsetof(BlockQ5_0, qs), ilo, ihi);
    lo = _mm512_permutex2var_ps(t0, ilo, t1);
    hi = _mm512_permutex2var_ps(t0, ihi, t1);
  }
};

struct LoadQ5_1 {
  static constexpr bool kQuantized = true;
  static constexpr int64_t kChunkBytes = sizeof(BlockQ5_1);
  static void load(const uint8_t* c, __m512& lo, __m512& hi) {
    const __m512 d = half_broadcast(c + offsetof(BlockQ5_1, d));
    const __m512 m = half_broadcast(c + offsetof(BlockQ5_1, m));
    const __m512 levels = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    // d * q is exact: one rounding, as in dequantize_row.
    const __m512 t0 = _mm512_fmadd_ps(d, levels, m);
    const __m512 t1 = _mm512_fmadd_ps(d, _mm512_add_ps(levels, _mm512_set1_ps(16.0f)), m);
    __m512i ilo, ihi;
    q5_index(c + offsetof(BlockQ5_1, qh), c + offsetof(BlockQ5_1, qs), ilo, ihi);
    lo = _mm512_permutex2var_ps(t0, ilo, t1);
    hi = _mm512_permutex2var_ps(t0, ihi, t1);
  }
};

// k-quants: a 256-weight super-block holds 8 chunks. prepare(block, sc)
// decodes its sub-block scales once into up to kSuperScales floats (q4_K/q5_K:
// d * scale[j] then dmin * min[j]; q6_K: d * scale[i]); load(block, j, sc, ...) gives
// chunk j. Each weight d * sc * q - dmin * m (q4_K/q5_K) or d * sc * (q - 32)
// (q6_K) is formed exactly as dequantize_row forms it. Scales read from
// memory broadcast on a load port, not the shuffle port the decoding needs
// (measured: q4_K GEMV ~25% faster than decoding scales per chunk).
float half_scalar(uint16_t h) { return _cvtsh_ss(h); }
constexpr int kSuperScales = 32;  // q2_K: 16 scales, 16 minimums

void prepare_q45_K(uint16_t d16, uint16_t dmin16, const uint8_t* scales, float* sc) {
  const float d = half_scalar(d16), dmin = half_scalar(dmin16);
  for (int j = 0; j < 8; ++j) {
    uint8_t s, m;
    kquant_scale_min(scales, j, s, m);
    sc[j] = d * static_cast<float>(s);
    sc[8 + j] = dmin * static_cast<float>(m);
  }
}

struct LoadQ4_K {
  static constexpr bool kQuantized = true;
  static constexpr int64_t kBlockBytes = sizeof(BlockQ4_K);
  static void prepare(const uint8_t* blk, float* sc) {
    const auto* b = reinterpret_cast<const BlockQ4_K*>(blk);
    prepare_q45_K(b->d, b->dmin, b->scales, sc);
  }
  static void load(const uint8_t* blk, int j, const float* sc, __m512& lo, __m512& hi) {
    const auto* b = reinterpret_cast<const BlockQ4_K*>(blk);
    const __m512 levels = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512 table = _mm512_fmsub_ps(_mm512_set1_ps(sc[j]), levels, _mm512_set1_ps(sc[8 + j]));
    const uint8_t* q = b->qs + (j / 2) * 32;
    const int shift = (j & 1) * 4;  // vpermps reads only the low 4 index bits
    lo = _mm512_permutexvar_ps(_mm512_srli_epi32(_mm512_cvtepu8_epi32(load128(q)), shift), table);
    hi = _mm512_permutexvar_ps(_mm512_srli_epi32(_mm512_cvtepu8_epi32(load128(q + 16)), shift), table);
  }
};

struct LoadQ5_K {
  static constexpr bool kQuantized = true;
  static constexpr int64_t kBlockBytes = sizeof(BlockQ5_K);
  // 32 levels: vpermt2ps picks from two 16-entry tables with a 5-bit index.
  static __m512i index(const uint8_t* qs, const uint8_t* qh, int j) {
    const __m512i low = _mm512_and_si512(_mm512_srli_epi32(_mm512_cvtepu8_epi32(load128(qs)), (j & 1) * 4),
                                         _mm512_set1_epi32(0x0f));
    const __m512i high = _mm512_and_si512(_mm512_srli_epi32(_mm512_cvtepu8_epi32(load128(qh)), j), _mm512_set1_epi32(1));
    return _mm512_or_si512(low, _mm512_slli_epi32(high, 4));
  }
  static void prepare(const uint8_t* blk, float* sc) {
    const auto* b = reinterpret_cast<const BlockQ5_K*>(blk);
    prepare_q45_K(b->d, b->dmin, b->scales, sc);
  }
  static void load(const uint8_t* blk, int j, const float* sc, __m512& lo, __m512& hi) {
    const auto* b = reinterpret_cast<const BlockQ5_K*>(blk);
    const __m512 ds = _mm512_set1_ps(sc[j]);
    const __m512 dm = _mm512_set1_ps(sc[8 + j]);
    const __m512 levels = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512 t0 = _mm512_fmsub_ps(ds, levels, dm);
    const __m512 t1 = _mm512_fmsub_ps(ds, _mm512_add_ps(levels, _mm512_set1_ps(16.0f)), dm);
    const uint8_t* q = b->qs + (j / 2) * 32;
    lo = _mm512_permutex2var_ps(t0, index(q, b->qh, j), t1);
    hi = _mm512_permutex2var_ps(t0, index(q + 16, b->qh + 16, j), t1);
  }
};

struct LoadQ6_K {
  static constexpr bool kQuantized = true;
  static constexpr int64_t kBlockBytes = sizeof(BlockQ6_K);
  // q - 32 for 16 weights of chunk j (see BlockQ6_K for the bit layout).
  static __m512 centred(const uint8_t* ql, const uint8_t* qh, int k) {
    const __m512i low = _mm512_and_si512(_mm512_srli_epi32(_mm512_cvtepu8_epi32(load128(ql)), 4 * (k >> 1)),
                                         _mm512_set1_epi32(0x0f));
    const __m512i high = _mm512_and_si512(_mm512_srli_epi32(_mm512_cvtepu8_epi32(load128(qh)), 2 * k),
                                          _mm512_set1_epi32(3));
    const __m512i q = _mm512_or_si512(low, _mm512_slli_epi32(high, 4));
    return _mm512_cvtepi32_ps(_mm512_sub_epi32(q, _mm512_set1_epi32(32)));
  }
  static void prepare(const uint8_t* blk, float* sc) {
    const auto* b = reinterpret_cast<const BlockQ6_K*>(blk);
    const float d = half_scalar(b->d);
    for (int i = 0; i < 16; ++i) sc[i] = d * static_cast<float>(b->scales[i]);
  }
  static void load(const uint8_t* blk, int j, const float* sc, __m512& lo, __m512& hi) {
    const auto* b = reinterpret_cast<const BlockQ6_K*>(blk);
    const int h = j / 4, k = j % 4;
    const uint8_t* ql = b->ql + 64 * h + 32 * (k & 1);
    const uint8_t* qh = b->qh + 32 * h;
    // (d * sc) * (q - 32): both products exact, as in dequantize_row.
    lo = _mm512_mul_ps(_mm512_set1_ps(sc[2 * j]), centred(ql, qh, k));
    hi = _mm512_mul_ps(_mm512_set1_ps(sc[2 * j + 1]), centred(ql + 16, qh + 16, k));
  }
};

// q2_K: d * sc[s] then dmin * m[s] for the 16 sub-blocks; each weight
// d * sc * q - dmin * m, rounded once (in the fused subtraction), as
// dequantize_row rounds it.
struct LoadQ2_K {
  static constexpr bool kQuantized = true;
  static constexpr int64_t kBlockBytes = sizeof(BlockQ2_K);
  static void prepare(const uint8_t* blk, float* sc) {
    const auto* b = reinterpret_cast<const BlockQ2_K*>(blk);
    const float d = half_scalar(b->d), dmin = half_scalar(b->dmin);
    for (int s = 0; s < 16; ++s) {
      sc[s] = d * static_cast<float>(b->scales[s] & 0x0f);
      sc[16 + s] = dmin * static_cast<float>(b->scales[s] >> 4);
    }
  }
  // The 2-bit fields at `shift` of 16 bytes, as 16 int32.
  static __m512i crumbs(const uint8_t* q, int shift) {
    return _mm512_and_si512(_mm512_srli_epi32(_mm512_cvtepu8_epi32(load128(q)), shift), _mm512_set1_epi32(3));
  }
  static void load(const uint8_t* blk, int j, const float* sc, __m512& lo, __m512& hi) {
    const auto* b = reinterpret_cast<const BlockQ2_K*>(blk);
    const uint8_t* q = b->qs + 32 * (j / 4);
    const int shift = 2 * (j % 4);
    lo = _mm512_fmsub_ps(_mm512_set1_ps(sc[2 * j]), _mm512_cvtepi32_ps(crumbs(q, shift)),
                         _mm512_set1_ps(sc[16 + 2 * j]));
    hi = _mm512_fmsub_ps(_mm512_set1_ps(sc[2 * j + 1]), _mm512_cvtepi32_ps(crumbs(q + 16, shift)),
                         _mm512_set1_ps(sc[17 + 2 * j]));
  }
};

// q3_K: d * (sc[s] - 32) for the 16 sub-blocks; each weight that times
// q - 4, exact.
struct LoadQ3_K {
  static constexpr bool kQuantized = true;
  static constexpr int64_t kBlockBytes = sizeof(BlockQ3_K);
  static void prepare(const uint8_t* blk, float* sc) {
    const auto* b = reinterpret_cast<const BlockQ3_K*>(blk);
    const float d = half_scalar(b->d);
    for (int s = 0; s < 16; ++s) sc[s] = d * static_cast<float>(q3_K_scale(b->scales, s) - 32);
  }
  static __m512 centred(const uint8_t* q, const uint8_t* hmask, int j) {
    const __m512i low = LoadQ2_K::crumbs(q, 2 * (j % 4));
    const __m512i high = _mm512_and_si512(_mm512_srli_epi32(_mm512_cvtepu8_epi32(load128(hmask)), j),
                                          _mm512_set1_epi32(1));
    return _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_or_si512(low, _mm512_slli_epi32(high, 2)), _mm512_set1_epi32(4)));
  }
  static void load(const uint8_t* blk, int j, const float* sc, __m512& lo, __m512& hi) {
    const uint8_t* q = blk + offsetof(BlockQ3_K, qs) + 32 * (j / 4);
    const uint8_t* hmask = blk + offsetof(BlockQ3_K, hmask);
    lo = _mm512_mul_ps(_mm512_set1_ps(sc[2 * j]), centred(q, hmask, j));
    hi = _mm512_mul_ps(_mm512_set1_ps(sc[2 * j + 1]), centred(q + 16, hmask + 16, j));
  }
};

// iq4_xs: d * (sc[j] - 32) for its 8 sub-blocks; each weight that times a
// level, exact.
struct LoadIQ4_XS {
  static constexpr bool kQuantized = true;
  static constexpr int64_t kBlockBytes = sizeof(BlockIQ4_XS);
  static void prepare(const uint8_t* blk, float* sc) {
    const auto* b = reinterpret_cast<const BlockIQ4_XS*>(blk);
    const float d = half_scalar(b->d);
    for (int j = 0; j < 8; ++j) sc[j] = d * static_cast<float>(iq4_xs_scale(*b, j) - 32);
  }
  static void load(const uint8_t* blk, int j, const float* sc, __m512& lo, __m512& hi) {
    const auto* b = reinterpret_cast<const BlockIQ4_XS*>(blk);
    const __m512 table = _mm512_mul_ps(_mm512_set1_ps(sc[j]), iq4_levels());
    const __m512i q = _mm512_cvtepu8_epi32(load128(b->qs + 16 * j));
    lo = _mm512_permutexvar_ps(q, table);
    hi = _mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), table);
  }
};

// Chunk c (32 weights) of a row: one block of the 32-wide formats, or part
// of a k-quant super-block.
template <class L>
concept SuperBlocked = requires { L::kBlockBytes; };

template <class L>
const uint8_t* chunk_addr(const uint8_t* row, int64_t c) {
  if constexpr (SuperBlocked<L>) {
    return row + (c / 8) * L::kBlockBytes;
  } else {
    return row + c * L::kChunkBytes;
  }
}

// sc: the row's current super-block scales from prepare_chunk (k-quants only).
template <class L>
void load_chunk(const uint8_t* row, int64_t c, const float* sc, __m512& lo, __m512& hi) {
  if constexpr (SuperBlocked<L>) {
    L::load(chunk_addr<L>(row, c), static_cast<int>(c % 8), sc, lo, hi);
  } else {
    (void)sc;
    L::load(chunk_addr<L>(row, c), lo, hi);
  }
}

// Decodes the scales of the super-block that starts at chunk c (when one does).
template <class L>
void prepare_chunk(const uint8_t* row, int64_t c, float* sc) {
  if constexpr (SuperBlocked<L>) {
    if (c % 8 == 0) L::prepare(chunk_addr<L>(row, c), sc);
  } else {
    (void)row, (void)c, (void)sc;
  }
}

// ---- Decode: GEMV over T tokens × R rows, weights dequantized in registers ----

// y[t0 + t][r0 + r] for t < T, r < R. For T = 1, two accumulators per row
// (one per half chunk) keep enough independent FMA chains in flight.
template <class L, int T, int R>
void gemv_tile(const MatmulProblem& p, int64_t t0, int64_t r0) {
  const uint8_t* rows[R];
  const float* xs[T];
  for (int r = 0; r < R; ++r) rows[r] = p.w + (r0 + r) * p.w_row_bytes;
  for (int t = 0; t < T; ++t) xs[t] = p.x + (t0 + t) * p.n_in;
  constexpr int H = T == 1 ? 2 : 1;
  __m512 acc[T][R][H];
  for (int t = 0; t < T; ++t) {
    for (int r = 0; r < R; ++r) {
      for (int h = 0; h < H; ++h) acc[t][r][h] = _mm512_setzero_ps();
    }
  }
  alignas(64) float ksc[R][kSuperScales];  // k-quants: each row's super-block scales
  // Chunk c of each row wr[r]; xc[t] points at token t's 32 inputs.
  auto step = [&](const uint8_t* const (&wr)[R], int64_t c, const float* const (&xc)[T]) {
    __m512 xv[T][2];
    for (int t = 0; t < T; ++t) {
      xv[t][0] = _mm512_loadu_ps(xc[t]);
      xv[t][1] = _mm512_loadu_ps(xc[t] + 16);
    }
    for (int r = 0; r < R; ++r) {
      __m512 lo, hi;
      load_chunk<L>(wr[r], c, ksc[r], lo, hi);
      for (int t = 0; t < T; ++t) {
        acc[t][r][0] = _mm512_fmadd_ps(lo, xv[t][0], acc[t][r][0]);
        acc[t][r][H - 1] = _mm512_fmadd_ps(hi, xv[t][1], acc[t][r][H - 1]);
      }
    }
  };
  const int64_t n_chunks = p.n_in / kMatmulChunk;
  for (int64_t c = 0; c < n_chunks; ++c) {
    const float* xc[T];
    for (int t = 0; t < T; ++t) xc[t] = xs[t] + c * kMatmulChunk;
    for (int r = 0; r < R; ++r) {
      // One f32 row (one token's tile): the hardware prefetcher keeps up
      // with a single stream.
      if constexpr (!(std::is_same_v<L, LoadF32> && R == 1)) prefetch_ahead(chunk_addr<L>(rows[r], c));
      prepare_chunk<L>(rows[r], c, ksc[r]);
    }
    step(rows, c, xc);
  }
  if constexpr (!L::kQuantized) {
    // A row length that is not a multiple of 32 (plain float types only):
    // run the last chunk on zero-padded copies.
    const int64_t rem = p.n_in - n_chunks * kMatmulChunk;
    if (rem > 0) {
      constexpr int64_t elem = L::kChunkBytes / kMatmulChunk;
      alignas(64) uint8_t wpad[R][L::kChunkBytes] = {};
      alignas(64) float xpad[T][kMatmulChunk] = {};
      const uint8_t* wc[R];
      const float* xc[T];
      for (int r = 0; r < R; ++r) {
        std::memcpy(wpad[r], rows[r] + n_chunks * L::kChunkBytes, static_cast<size_t>(rem * elem));
        wc[r] = wpad[r];
      }
      for (int t = 0; t < T; ++t) {
        std::memcpy(xpad[t], xs[t] + n_chunks * kMatmulChunk, static_cast<size_t>(rem) * sizeof(float));
        xc[t] = xpad[t];
      }
      step(wc, 0, xc);
    }
  }
  for (int t = 0; t < T; ++t) {
    __m512 v[8];
    for (int r = 0; r < R; ++r) v[r] = H == 2 ? _mm512_add_ps(acc[t][r][0], acc[t][r][H - 1]) : acc[t][r][0];
    for (int r = R; r < 8; ++r) v[r] = _mm512_setzero_ps();
    _mm256_mask_storeu_ps(p.y + (t0 + t) * p.n_out + r0, static_cast<__mmask8>((1u << R) - 1), reduce8(v));
  }
}

// Rows [r0, r1) for tokens t0 .. t0 + T - 1: tiles of R rows, then single rows.
template <class L, int T, int R>
void gemv_span(const MatmulProblem& p, int64_t t0, int64_t r0, int64_t r1) {
  int64_t r = r0;
  for (; r + R <= r1; r += R) gemv_tile<L, T, R>(p, t0, r);
  for (; r < r1; ++r) gemv_tile<L, T, 1>(p, t0, r);
}

template <class L>
void gemv_rows(const MatmulProblem& p, int64_t row_begin, int64_t row_end) {
  // Per unit of rows, all token groups: a unit's weights (at most 48 rows)
  // stay in cache for the second and later groups of 4 tokens.
  for (int64_t u0 = row_begin; u0 < row_end; u0 += kMatmulRowUnit) {
    const int64_t u1 = std::min(u0 + kMatmulRowUnit, row_end);
    for (int64_t t0 = 0; t0 < p.n_tokens; t0 += 4) {
      switch (std::min<int64_t>(4, p.n_tokens - t0)) {
        case 1:
          // Float rows, one token: one row (one stream) at a time. Zen 5,
          // 110M decode: f16 +12-33%; f32 +12-25% with 1 thread once its
          // software prefetch is gone as well (either alone gave nothing).
          if constexpr (std::is_same_v<L, LoadF16> || std::is_same_v<L, LoadBF16> || std::is_same_v<L, LoadF32>) {
            gemv_span<L, 1, 1>(p, t0, u0, u1);
          } else {
            gemv_span<L, 1, 4>(p, t0, u0, u1);
          }
          break;
        case 2: gemv_span<L, 2, 4>(p, t0, u0, u1); break;
        case 3: gemv_span<L, 3, 4>(p, t0, u0, u1); break;
        default: gemv_span<L, 4, 4>(p, t0, u0, u1); break;
      }
    }
  }
}

// ---- Prefill: panel of f32 weights × tokens, register-blocked ----

// y[t][r] (+)= x[t, 0..kb) · w[r, 0..kb) for t < TM, r < RN. x rows are ldx
// apart, w rows ldw apart, y rows ldy apart.
template <int TM, int RN>
void gemm_tile(const float* x, int64_t ldx, const float* w, int64_t ldw, int64_t kb, float* y, int64_t ldy,
               bool accumulate) {
  __m512 acc[TM][RN];
  for (int t = 0; t < TM; ++t) {
    for (int r = 0; r < RN; ++r) acc[t][r] = _mm512_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 16 <= kb; k += 16) {
    __m512 xv[TM];
    for (int t = 0; t < TM; ++t) xv[t] = _mm512_loadu_ps(x + t * ldx + k);
    for (int r = 0; r < RN; ++r) {
      const __m512 wv = _mm512_loadu_ps(w + r * ldw + k);
      for (int t = 0; t < TM; ++t) acc[t][r] = _mm512_fmadd_ps(xv[t], wv, acc[t][r]);
    }
  }
  if (k < kb) {  // masked lanes are neither read nor faulted on
    const auto m = static_cast<__mmask16>((1u << (kb - k)) - 1);
    __m512 xv[TM];
    for (int t = 0; t < TM; ++t) xv[t] = _mm512_maskz_loadu_ps(m, x + t * ldx + k);
    for (int r = 0; r < RN; ++r) {
      const __m512 wv = _mm512_maskz_loadu_ps(m, w + r * ldw + k);
      for (int t = 0; t < TM; ++t) acc[t][r] = _mm512_fmadd_ps(xv[t], wv, acc[t][r]);
    }
  }
  const auto m = static_cast<__mmask8>((1u << RN) - 1);
  for (int t = 0; t < TM; ++t) {
    __m512 v[8];
    for (int r = 0; r < RN; ++r) v[r] = acc[t][r];
    for (int r = RN; r < 8; ++r) v[r] = _mm512_setzero_ps();
    __m256 s = reduce8(v);
    if (accumulate) s = _mm256_add_ps(s, _mm256_maskz_loadu_ps(m, y + t * ldy));
    _mm256_mask_storeu_ps(y + t * ldy, m, s);
  }
}

using TileFn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, float*, int64_t, bool);

template <int TM, int... RN>
constexpr std::array<TileFn, sizeof...(RN)> tile_row(std::integer_sequence<int, RN...>) {
  return {&gemm_tile<TM, RN + 1>...};
}
template <int... TM>
constexpr std::array<std::array<TileFn, kTileRows>, sizeof...(TM)> tile_table(std::integer_sequence<int, TM...>) {
  return {tile_row<TM + 1>(std::make_integer_sequence<int, kTileRows>{})...};
}
// kTiles[tm - 1][rn - 1] handles a tm × rn tile (edges use the smaller ones).
constexpr auto kTiles = tile_table(std::make_integer_sequence<int, kTileTokens>{});

// Dequantizes rows [r0, r0 + nr), columns [k0, k0 + kb) of W into dst (rows
// ld floats apart). k0 is a multiple of 32.
template <class L>
void dequant_panel(const MatmulProblem& p, int64_t r0, int64_t nr, int64_t k0, int64_t kb, float* dst, int64_t ld) {
  const int64_t c0 = k0 / kMatmulChunk;
  const int64_t n_chunks = kb / kMatmulChunk;
  for (int64_t i = 0; i < nr; ++i) {
    const uint8_t* row = p.w + (r0 + i) * p.w_row_bytes;
    float* out = dst + i * ld;
    alignas(64) float ksc[kSuperScales];
    for (int64_t c = 0; c < n_chunks; ++c) {
      __m512 lo, hi;
      prepare_chunk<L>(row, c0 + c, ksc);
      load_chunk<L>(row, c0 + c, ksc, lo, hi);
      _mm512_storeu_ps(out + c * kMatmulChunk, lo);
      _mm512_storeu_ps(out + c * kMatmulChunk + 16, hi);
    }
    if constexpr (!L::kQuantized) {
      const int64_t done = n_chunks * kMatmulChunk;
      if (done < kb) {
        constexpr int64_t elem = L::kChunkBytes / kMatmulChunk;
        dequantize_row(p.wtype, row + (k0 + done) * elem, out + done, kb - done);
      }
    }
  }
}

template <class L>
void gemm_rows(const MatmulProblem& p, int64_t row_begin, int64_t row_end) {
  // Rows of the panel are padded by a cache line so that they never sit a
  // multiple of 4 KiB apart (which would make them share L1 sets).
  const int64_t ld = (std::min(kKBlock, p.n_in) + 15) / 16 * 16 + 16;
  float* panel = matmul_scratch(kMatmulRowUnit * ld);
  for (int64_t k0 = 0; k0 < p.n_in; k0 += kKBlock) {
    const int64_t kb = std::min(kKBlock, p.n_in - k0);
    for (int64_t p0 = row_begin; p0 < row_end; p0 += kMatmulRowUnit) {
      const int64_t pr = std::min(kMatmulRowUnit, row_end - p0);
      dequant_panel<L>(p, p0, pr, k0, kb, panel, ld);
      // Token tiles as even as possible (7 tokens: 4 + 3, not 6 + 1).
      const int64_t n_tiles = (p.n_tokens + kTileTokens - 1) / kTileTokens;
      for (int64_t i = 0; i < n_tiles; ++i) {
        const int64_t t0 = i * p.n_tokens / n_tiles;
        const int64_t tm = (i + 1) * p.n_tokens / n_tiles - t0;
        for (int64_t r = 0; r < pr; r += kTileRows) {
          const int64_t rn = std::min<int64_t>(kTileRows, pr - r);
          kTiles[tm - 1][rn - 1](p.x + t0 * p.n_in + k0, p.n_in, panel + r * ld, ld, kb,
                                 p.y + t0 * p.n_out + p0 + r, p.n_out, k0 > 0);
        }
      }
    }
  }
}

template <class L>
void rows_for(const MatmulProblem& p, int64_t row_begin, int64_t row_end) {
  if (p.n_tokens < kGemmMinTokens) {
    gemv_rows<L>(p, row_begin, row_end);
  } else {
    gemm_rows<L>(p, row_begin, row_end);
  }
}

}  // namespace

void matmul_rows_avx512(const MatmulProblem& p, int64_t row_begin, int64_t row_end) {
  switch (p.wtype) {
    case DType::f32: return rows_for<LoadF32>(p, row_begin, row_end);
    case DType::f16: return rows_for<LoadF16>(p, row_begin, row_end);
    case DType::bf16: return rows_for<LoadBF16>(p, row_begin, row_end);
    case DType::q8_0: return rows_for<LoadQ8_0>(p, row_begin, row_end);
    case DType::q4_0: return rows_for<LoadQ4_0>(p, row_begin, row_end);
    case DType::q4_1: return rows_for<LoadQ4_1>(p, row_begin, row_end);
    case DType::q5_0: return rows_for<LoadQ5_0>(p, row_begin, row_end);
    case DType::q5_1: return rows_for<LoadQ5_1>(p, row_begin, row_end);
    case DType::q2_K: return rows_for<LoadQ2_K>(p, row_begin, row_end);
    case DType::q3_K: return rows_for<LoadQ3_K>(p, row_begin, row_end);
    case DType::q4_K: return rows_for<LoadQ4_K>(p, row_begin, row_end);
    case DType::q5_K: return rows_for<LoadQ5_K>(p, row_begin, row_end);
    case DType::q6_K: return rows_for<LoadQ6_K>(p, row_begin, row_end);
    case DType::iq4_nl: return rows_for<LoadIQ4_NL>(p, row_begin, row_end);
    case DType::iq4_xs: return rows_for<LoadIQ4_XS>(p, row_begin, row_end);
  }
}

}  // namespace troupe::kernels::detail

#endif  // x86

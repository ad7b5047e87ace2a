// Chunk loaders of the AVX-512 f32 matmul (matmul_avx512.cpp): chunk c (32
// weights of a row) of every weight type as two vectors of 16 f32, each the
// exact value dequantize_row gives, and the super-block scale decoding of the
// k-quants. Include only from files built with -mavx512* (internal linkage).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/dtype.hpp"
#include "kernels/cpu/simd_avx512.hpp"

namespace troupe::kernels::detail {
namespace {  // NOLINT: per-ISA translation units only

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

// 16 int8 levels (iq4's or mxfp4's, core/dtype.hpp) as floats.
inline __m512 table_levels(const int8_t (&levels)[16]) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(load128(reinterpret_cast<const uint8_t*>(levels))));
}
inline __m512 iq4_levels() { return table_levels(kIq4Levels); }

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

// mxfp4: as iq4_nl, the doubled FP4 levels times 2^(e - 128) (exact).
struct LoadMXFP4 {
  static constexpr bool kQuantized = true;
  static constexpr int64_t kChunkBytes = sizeof(BlockMXFP4);
  static void load(const uint8_t* c, __m512& lo, __m512& hi) {
    const __m512 table =
        _mm512_mul_ps(_mm512_set1_ps(mxfp4_scale(c[offsetof(BlockMXFP4, e)])), table_levels(kMxfp4Levels));
    const __m512i q = _mm512_cvtepu8_epi32(load128(c + offsetof(BlockMXFP4, qs)));
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

}  // namespace
}  // namespace troupe::kernels::detail

// Chunk loaders of the AVX2 f32 matmul (matmul_avx2.cpp): chunk c (32 weights
// of a row) of every weight type as four vectors of 8 f32, each the exact
// value dequantize_row gives. Include only from files built with -mavx2 -mfma
// -mf16c (internal linkage).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/dtype.hpp"

namespace troupe::kernels::detail {
namespace {  // NOLINT: per-ISA translation units only

__m256 half_broadcast(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(h)));
}

__m128i load128(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
__m128i load64(const uint8_t* p) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)); }

struct LoadF32 {
  static constexpr bool kQuantized = false;
  static constexpr int64_t kChunkBytes = 32 * 4;
  static void load(const uint8_t* c, __m256 (&v)[4]) {
    for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(reinterpret_cast<const float*>(c) + 8 * i);
  }
};

struct LoadF16 {
  static constexpr bool kQuantized = false;
  static constexpr int64_t kChunkBytes = 32 * 2;
  static void load(const uint8_t* c, __m256 (&v)[4]) {
    for (int i = 0; i < 4; ++i) v[i] = _mm256_cvtph_ps(load128(c + 16 * i));
  }
};

struct LoadBF16 {
  static constexpr bool kQuantized = false;
  static constexpr int64_t kChunkBytes = 32 * 2;
  static void load(const uint8_t* c, __m256 (&v)[4]) {
    for (int i = 0; i < 4; ++i) {  // bf16 is the high half of an f32
      v[i] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load128(c + 16 * i)), 16));
    }
  }
};

struct LoadQ8_0 {
  static constexpr bool kQuantized = true;
  static constexpr int64_t kChunkBytes = sizeof(BlockQ8_0);
  static void load(const uint8_t* c, __m256 (&v)[4]) {
    const __m256 d = half_broadcast(c + offsetof(BlockQ8_0, d));
    const uint8_t* qs = c + offsetof(BlockQ8_0, qs);
    for (int i = 0; i < 4; ++i) v[i] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(load64(qs + 8 * i))));
  }
};

// Nibbles of bytes 0..7 give weights 0..7 (low) and 16..23 (high); bytes
// 8..15 give 8..15 and 24..31.
inline void unpack_q4(const uint8_t* qs, __m256 (&q)[4]) {
  const __m256i a = _mm256_cvtepu8_epi32(load64(qs));
  const __m256i b = _mm256_cvtepu8_epi32(load64(qs + 8));
  const __m256i low = _mm256_set1_epi32(0x0f);
  q[0] = _mm256_cvtepi32_ps(_mm256_and_si256(a, low));
  q[1] = _mm256_cvtepi32_ps(_mm256_and_si256(b, low));
  q[2] = _mm256_cvtepi32_ps(_mm256_srli_epi32(a, 4));
  q[3] = _mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4));
}

struct LoadQ4_0 {
  static constexpr bool kQuantized = true;
  static constexpr int64_t kChunkBytes = sizeof(BlockQ4_0);
  static void load(const uint8_t* c, __m256 (&v)[4]) {
    const __m256 d = half_broadcast(c + offsetof(BlockQ4_0, d));
    // d * q - 8d in one rounding is exactly d * (q - 8) rounded (8d is exact).
    const __m256 bias = _mm256_mul_ps(d, _mm256_set1_ps(-8.0f));
    unpack_q4(c + offsetof(BlockQ4_0, qs), v);
    for (int i = 0; i < 4; ++i) v[i] = _mm256_fmadd_ps(v[i], d, bias);
  }
};

// 8 of 16 int8 levels (iq4's or mxfp4's, core/dtype.hpp) for the indices
// in idx (0..15), as floats times ds: two 8-entry permutes, bit 3 of the
// index picking between them. Exact: iq4's d (11 bits) x scale x level fit
// in 24, and mxfp4's scale is a power of two.
inline __m256 table_levels(const int8_t (&levels)[16], __m256i idx, __m256 ds) {
  const auto* l = reinterpret_cast<const uint8_t*>(levels);
  const __m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(load64(l)));
  const __m256 hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(load64(l + 8)));
  const __m256 v = _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, idx), _mm256_permutevar8x32_ps(hi, idx),
                                    _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
  return _mm256_mul_ps(v, ds);
}

// Weights 0..15 of 16 q4_0-style bytes (low nibbles) then 16..31 (high),
// each nibble an index into `levels`.
inline void table_chunk(const int8_t (&levels)[16], const uint8_t* qs, __m256 ds, __m256 (&v)[4]) {
  const __m256i a = _mm256_cvtepu8_epi32(load64(qs));
  const __m256i b = _mm256_cvtepu8_epi32(load64(qs + 8));
  const __m256i low = _mm256_set1_epi32(0x0f);
  v[0] = table_levels(levels, _mm256_and_si256(a, low), ds);
  v[1] = table_levels(levels, _mm256_and_si256(b, low), ds);
  v[2] = table_levels(levels, _mm256_srli_epi32(a, 4), ds);
  v[3] = table_levels(levels, _mm256_srli_epi32(b, 4), ds);
}

struct LoadIQ4_NL {
  static constexpr bool kQuantized = true;
  static constexpr int64_t kChunkBytes = sizeof(BlockIQ4_NL);
  static void load(const uint8_t* c, __m256 (&v)[4]) {
    table_chunk(kIq4Levels, c + offsetof(BlockIQ4_NL, qs), half_broadcast(c + offsetof(BlockIQ4_NL, d)), v);
  }
};

// mxfp4: the doubled FP4 levels times 2^(e - 128).
struct LoadMXFP4 {
  static constexpr bool kQuantized = true;
  static constexpr int64_t kChunkBytes = sizeof(BlockMXFP4);
  static void load(const uint8_t* c, __m256 (&v)[4]) {
    table_chunk(kMxfp4Levels, c + offsetof(BlockMXFP4, qs), _mm256_set1_ps(mxfp4_scale(c[offsetof(BlockMXFP4, e)])),
                v);
  }
};

struct LoadQ4_1 {
  static constexpr bool kQuantized = true;
  static constexpr int64_t kChunkBytes = sizeof(BlockQ4_1);
  static void load(const uint8_t* c, __m256 (&v)[4]) {
    const __m256 d = half_broadcast(c + offsetof(BlockQ4_1, d));
    const __m256 m = half_broadcast(c + offsetof(BlockQ4_1, m));
    unpack_q4(c + offsetof(BlockQ4_1, qs), v);
    // d * q is exact in f32 (11-bit d times a 4-bit q): one rounding, as in
    // dequantize_row.
    for (int i = 0; i < 4; ++i) v[i] = _mm256_fmadd_ps(v[i], d, m);
  }
};

// q5: the q4 nibbles (vector i holds weights 8i .. 8i + 7) plus bit w of the
// block's qh as the 5th bit of weight w.
inline void unpack_q5(const uint8_t* qh_bytes, const uint8_t* qs, __m256i (&q)[4]) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, sizeof qh);
  const __m256i bits = _mm256_set1_epi32(static_cast<int>(qh));
  const __m256i a = _mm256_cvtepu8_epi32(load64(qs));
  const __m256i b = _mm256_cvtepu8_epi32(load64(qs + 8));
  const __m256i low = _mm256_set1_epi32(0x0f);
  q[0] = _mm256_and_si256(a, low);
  q[1] = _mm256_and_si256(b, low);
  q[2] = _mm256_srli_epi32(a, 4);
  q[3] = _mm256_srli_epi32(b, 4);
  for (int i = 0; i < 4; ++i) {
    const __m256i shift = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(8 * i));
    const __m256i h = _mm256_and_si256(_mm256_srlv_epi32(bits, shift), _mm256_set1_epi32(1));
    q[i] = _mm256_or_si256(q[i], _mm256_slli_epi32(h, 4));
  }
}

struct LoadQ5_0 {
  static constexpr bool kQuantized = true;
  static constexpr int64_t kChunkBytes = sizeof(BlockQ5_0);
  static void load(const uint8_t* c, __m256 (&v)[4]) {
    const __m256 d = half_broadcast(c + offsetof(BlockQ5_0, d));
    // d * q - 16d in one rounding is exactly d * (q - 16) (16d is exact).
    const __m256 bias = _mm256_mul_ps(d, _mm256_set1_ps(-16.0f));
    __m256i q[4];
    unpack_q5(c + offsetof(BlockQ5_0, qh), c + offsetof(BlockQ5_0, qs), q);
    for (int i = 0; i < 4; ++i) v[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q[i]), d, bias);
  }
};

struct LoadQ5_1 {
  static constexpr bool kQuantized = true;
  static constexpr int64_t kChunkBytes = sizeof(BlockQ5_1);
  static void load(const uint8_t* c, __m256 (&v)[4]) {
    const __m256 d = half_broadcast(c + offsetof(BlockQ5_1, d));
    const __m256 m = half_broadcast(c + offsetof(BlockQ5_1, m));
    __m256i q[4];
    unpack_q5(c + offsetof(BlockQ5_1, qh), c + offsetof(BlockQ5_1, qs), q);
    for (int i = 0; i < 4; ++i) v[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q[i]), d, m);
  }
};

// k-quants: a 256-weight super-block holds 8 chunks; load(block, j, v)
// gives chunk j, each weight formed exactly as dequantize_row forms it.
float half_scalar(uint16_t h) { return _cvtsh_ss(h); }

// 8 bytes from p, shifted right by `shift` and masked to `mask`, as int32.
__m256i bits8(const uint8_t* p, int shift, int mask) {
  return _mm256_and_si256(_mm256_srli_epi32(_mm256_cvtepu8_epi32(load64(p)), shift), _mm256_set1_epi32(mask));
}

struct LoadQ4_K {
  static constexpr bool kQuantized = true;
  static constexpr int64_t kBlockBytes = sizeof(BlockQ4_K);
  static void load(const uint8_t* blk, int j, __m256 (&v)[4]) {
    const auto* b = reinterpret_cast<const BlockQ4_K*>(blk);
    uint8_t sc, m;
    kquant_scale_min(b->scales, j, sc, m);
    const __m256 ds = _mm256_set1_ps(half_scalar(b->d) * static_cast<float>(sc));
    const __m256 dm = _mm256_set1_ps(half_scalar(b->dmin) * static_cast<float>(m));
    const uint8_t* q = b->qs + (j / 2) * 32;
    // ds * q is exact: one rounding in the subtraction, as in dequantize_row.
    for (int i = 0; i < 4; ++i) v[i] = _mm256_fmsub_ps(_mm256_cvtepi32_ps(bits8(q + 8 * i, (j & 1) * 4, 0x0f)), ds, dm);
  }
};

struct LoadQ5_K {
  static constexpr bool kQuantized = true;
  static constexpr int64_t kBlockBytes = sizeof(BlockQ5_K);
  static void load(const uint8_t* blk, int j, __m256 (&v)[4]) {
    const auto* b = reinterpret_cast<const BlockQ5_K*>(blk);
    uint8_t sc, m;
    kquant_scale_min(b->scales, j, sc, m);
    const __m256 ds = _mm256_set1_ps(half_scalar(b->d) * static_cast<float>(sc));
    const __m256 dm = _mm256_set1_ps(half_scalar(b->dmin) * static_cast<float>(m));
    const uint8_t* q = b->qs + (j / 2) * 32;
    for (int i = 0; i < 4; ++i) {
      const __m256i qi = _mm256_or_si256(bits8(q + 8 * i, (j & 1) * 4, 0x0f),
                                         _mm256_slli_epi32(bits8(b->qh + 8 * i, j, 1), 4));
      v[i] = _mm256_fmsub_ps(_mm256_cvtepi32_ps(qi), ds, dm);
    }
  }
};

struct LoadQ6_K {
  static constexpr bool kQuantized = true;
  static constexpr int64_t kBlockBytes = sizeof(BlockQ6_K);
  static void load(const uint8_t* blk, int j, __m256 (&v)[4]) {
    const auto* b = reinterpret_cast<const BlockQ6_K*>(blk);
    const float d = half_scalar(b->d);
    const int h = j / 4, k = j % 4;
    const uint8_t* ql = b->ql + 64 * h + 32 * (k & 1);
    const uint8_t* qh = b->qh + 32 * h;
    for (int i = 0; i < 4; ++i) {
      const __m256i qi = _mm256_or_si256(bits8(ql + 8 * i, 4 * (k >> 1), 0x0f),
                                         _mm256_slli_epi32(bits8(qh + 8 * i, 2 * k, 3), 4));
      const __m256 centred = _mm256_cvtepi32_ps(_mm256_sub_epi32(qi, _mm256_set1_epi32(32)));
      // (d * sc) * (q - 32): both products exact. Vectors 0, 1 use scale 2j.
      v[i] = _mm256_mul_ps(_mm256_set1_ps(d * static_cast<float>(b->scales[2 * j + i / 2])), centred);
    }
  }
};

// q2_K: vectors 0, 1 of chunk j are sub-block 2j, 2 and 3 sub-block 2j + 1.
// d * sc * q is exact: one rounding in the subtraction, as in dequantize_row.
struct LoadQ2_K {
  static constexpr bool kQuantized = true;
  static constexpr int64_t kBlockBytes = sizeof(BlockQ2_K);
  static void load(const uint8_t* blk, int j, __m256 (&v)[4]) {
    const auto* b = reinterpret_cast<const BlockQ2_K*>(blk);
    const float d = half_scalar(b->d), dmin = half_scalar(b->dmin);
    const uint8_t* q = b->qs + 32 * (j / 4);
    for (int i = 0; i < 4; ++i) {
      const int s = b->scales[2 * j + i / 2];
      const __m256 ds = _mm256_set1_ps(d * static_cast<float>(s & 0x0f));
      const __m256 dm = _mm256_set1_ps(dmin * static_cast<float>(s >> 4));
      v[i] = _mm256_fmsub_ps(_mm256_cvtepi32_ps(bits8(q + 8 * i, 2 * (j % 4), 3)), ds, dm);
    }
  }
};

// q3_K: (d * (sc - 32)) * (q - 4), both products exact.
struct LoadQ3_K {
  static constexpr bool kQuantized = true;
  static constexpr int64_t kBlockBytes = sizeof(BlockQ3_K);
  static void load(const uint8_t* blk, int j, __m256 (&v)[4]) {
    const auto* b = reinterpret_cast<const BlockQ3_K*>(blk);
    const float d = half_scalar(b->d);
    const uint8_t* q = b->qs + 32 * (j / 4);
    for (int i = 0; i < 4; ++i) {
      const __m256i qi =
          _mm256_or_si256(bits8(q + 8 * i, 2 * (j % 4), 3), _mm256_slli_epi32(bits8(b->hmask + 8 * i, j, 1), 2));
      const __m256 centred = _mm256_cvtepi32_ps(_mm256_sub_epi32(qi, _mm256_set1_epi32(4)));
      v[i] = _mm256_mul_ps(_mm256_set1_ps(d * static_cast<float>(q3_K_scale(b->scales, 2 * j + i / 2) - 32)), centred);
    }
  }
};

// iq4_xs: (d * (sc - 32)) * level, both products exact.
struct LoadIQ4_XS {
  static constexpr bool kQuantized = true;
  static constexpr int64_t kBlockBytes = sizeof(BlockIQ4_XS);
  static void load(const uint8_t* blk, int j, __m256 (&v)[4]) {
    const auto* b = reinterpret_cast<const BlockIQ4_XS*>(blk);
    const float ds = half_scalar(b->d) * static_cast<float>(iq4_xs_scale(*b, j) - 32);
    table_chunk(kIq4Levels, b->qs + 16 * j, _mm256_set1_ps(ds), v);
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

template <class L>
void load_chunk(const uint8_t* row, int64_t c, __m256 (&v)[4]) {
  if constexpr (SuperBlocked<L>) {
    L::load(chunk_addr<L>(row, c), static_cast<int>(c % 8), v);
  } else {
    L::load(chunk_addr<L>(row, c), v);
  }
}

}  // namespace
}  // namespace troupe::kernels::detail

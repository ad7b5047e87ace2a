// Weight readers of the int8 path (matmul_int8.hpp), shared by the VNNI and
// AMX translation units: chunk c (32 weights) of a row as 32 unsigned bytes u
// in input order, with the per-lane scale and min, such that
//   w[i] = scale[lane(i)] * (u[i] - kOffset) + min[lane(i)],  lane(i) = i / 4.
// Include only from files built with -mavx512* (internal linkage).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/dtype.hpp"
#include "kernels/cpu/simd_avx512.hpp"

namespace troupe::kernels::cpu {
namespace {  // NOLINT: per-ISA translation units only

inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return _cvtsh_ss(h);
}

inline __m128i load16(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// 16 bytes of packed nibbles (q4_0 layout): low nibbles are weights 0..15,
// high nibbles 16..31.
inline __m256i split_nibbles(const uint8_t* qs) {
  const __m128i v = load16(qs);
  const __m128i m = _mm_set1_epi8(0x0f);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

// 0x10 where bit i of the 32-bit qh is set (the 5th bit of a q5 weight).
inline __m256i fifth_bits(uint32_t qh) { return _mm256_maskz_set1_epi8(qh, 0x10); }

// Each reader: kOffset, kMin (whether min is used), kSuper (k-quant: chunk c
// lies in super-block c / 8 of kBlockBytes, and prepare() decodes the block's
// scales into sc[kReaderScales] when c % 8 == 0; otherwise chunk c is a block of
// kChunkBytes), kSubK (inputs sharing one scale), and
// chunk(row, c, sc, u, scale, min).
struct RdQ8_0 {
  static constexpr int32_t kOffset = 128;
  static constexpr bool kMin = false, kSuper = false;
  static constexpr int kSubK = 32;
  static constexpr int64_t kChunkBytes = sizeof(BlockQ8_0);
  static void chunk(const uint8_t* row, int64_t c, const float*, __m256i& u, __m256& scale, __m256& min) {
    const uint8_t* b = row + c * kChunkBytes;
    u = _mm256_xor_si256(load32(b + offsetof(BlockQ8_0, qs)), _mm256_set1_epi8(static_cast<char>(0x80)));
    scale = _mm256_set1_ps(half_at(b));
    min = _mm256_setzero_ps();
  }
};

struct RdQ4_0 {
  static constexpr int32_t kOffset = 8;
  static constexpr bool kMin = false, kSuper = false;
  static constexpr int kSubK = 32;
  static constexpr int64_t kChunkBytes = sizeof(BlockQ4_0);
  static void chunk(const uint8_t* row, int64_t c, const float*, __m256i& u, __m256& scale, __m256& min) {
    const uint8_t* b = row + c * kChunkBytes;
    u = split_nibbles(b + offsetof(BlockQ4_0, qs));
    scale = _mm256_set1_ps(half_at(b));
    min = _mm256_setzero_ps();
  }
};

struct RdQ4_1 {
  static constexpr int32_t kOffset = 0;
  static constexpr bool kMin = true, kSuper = false;
  static constexpr int kSubK = 32;
  static constexpr int64_t kChunkBytes = sizeof(BlockQ4_1);
  static void chunk(const uint8_t* row, int64_t c, const float*, __m256i& u, __m256& scale, __m256& min) {
    const uint8_t* b = row + c * kChunkBytes;
    u = split_nibbles(b + offsetof(BlockQ4_1, qs));
    scale = _mm256_set1_ps(half_at(b + offsetof(BlockQ4_1, d)));
    min = _mm256_set1_ps(half_at(b + offsetof(BlockQ4_1, m)));
  }
};

struct RdQ5_0 {
  static constexpr int32_t kOffset = 16;
  static constexpr bool kMin = false, kSuper = false;
  static constexpr int kSubK = 32;
  static constexpr int64_t kChunkBytes = sizeof(BlockQ5_0);
  static void chunk(const uint8_t* row, int64_t c, const float*, __m256i& u, __m256& scale, __m256& min) {
    const uint8_t* b = row + c * kChunkBytes;
    uint32_t qh;
    std::memcpy(&qh, b + offsetof(BlockQ5_0, qh), sizeof qh);
    u = _mm256_or_si256(split_nibbles(b + offsetof(BlockQ5_0, qs)), fifth_bits(qh));
    scale = _mm256_set1_ps(half_at(b));
    min = _mm256_setzero_ps();
  }
};

struct RdQ5_1 {
  static constexpr int32_t kOffset = 0;
  static constexpr bool kMin = true, kSuper = false;
  static constexpr int kSubK = 32;
  static constexpr int64_t kChunkBytes = sizeof(BlockQ5_1);
  static void chunk(const uint8_t* row, int64_t c, const float*, __m256i& u, __m256& scale, __m256& min) {
    const uint8_t* b = row + c * kChunkBytes;
    uint32_t qh;
    std::memcpy(&qh, b + offsetof(BlockQ5_1, qh), sizeof qh);
    u = _mm256_or_si256(split_nibbles(b + offsetof(BlockQ5_1, qs)), fifth_bits(qh));
    scale = _mm256_set1_ps(half_at(b + offsetof(BlockQ5_1, d)));
    min = _mm256_set1_ps(half_at(b + offsetof(BlockQ5_1, m)));
  }
};

// q4_K/q5_K: sc[j] = d * scale_j, sc[8 + j] = -dmin * min_j.
inline void prepare_q45k(const uint8_t* blk, float* sc) {
  const auto* b = reinterpret_cast<const BlockQ4_K*>(blk);  // q5_K starts alike
  static_assert(offsetof(BlockQ4_K, scales) == offsetof(BlockQ5_K, scales));
  const float d = _cvtsh_ss(b->d), dmin = _cvtsh_ss(b->dmin);
  for (int j = 0; j < 8; ++j) {
    uint8_t s, m;
    kquant_scale_min(b->scales, j, s, m);
    sc[j] = d * static_cast<float>(s);
    sc[8 + j] = -dmin * static_cast<float>(m);
  }
}

// Low (j even) or high (j odd) nibbles of the 32 bytes at q.
inline __m256i nibbles_of(const uint8_t* q, int j) {
  const __m256i v = load32(q);
  return _mm256_and_si256(j & 1 ? _mm256_srli_epi16(v, 4) : v, _mm256_set1_epi8(0x0f));
}

struct RdQ4_K {
  static constexpr int32_t kOffset = 0;
  static constexpr bool kMin = true, kSuper = true;
  static constexpr int kSubK = 32;
  static constexpr int64_t kBlockBytes = sizeof(BlockQ4_K);
  static void prepare(const uint8_t* blk, float* sc) { prepare_q45k(blk, sc); }
  static void chunk(const uint8_t* row, int64_t c, const float* sc, __m256i& u, __m256& scale, __m256& min) {
    const auto* b = reinterpret_cast<const BlockQ4_K*>(row + (c / 8) * kBlockBytes);
    const int j = static_cast<int>(c % 8);
    u = nibbles_of(b->qs + (j / 2) * 32, j);
    scale = _mm256_set1_ps(sc[j]);
    min = _mm256_set1_ps(sc[8 + j]);
  }
};

struct RdQ5_K {
  static constexpr int32_t kOffset = 0;
  static constexpr bool kMin = true, kSuper = true;
  static constexpr int kSubK = 32;
  static constexpr int64_t kBlockBytes = sizeof(BlockQ5_K);
  static void prepare(const uint8_t* blk, float* sc) { prepare_q45k(blk, sc); }
  static void chunk(const uint8_t* row, int64_t c, const float* sc, __m256i& u, __m256& scale, __m256& min) {
    const auto* b = reinterpret_cast<const BlockQ5_K*>(row + (c / 8) * kBlockBytes);
    const int j = static_cast<int>(c % 8);
    const __mmask32 high = _mm256_test_epi8_mask(load32(b->qh), _mm256_set1_epi8(static_cast<char>(1 << j)));
    u = _mm256_or_si256(nibbles_of(b->qs + (j / 2) * 32, j), _mm256_maskz_set1_epi8(high, 0x10));
    scale = _mm256_set1_ps(sc[j]);
    min = _mm256_set1_ps(sc[8 + j]);
  }
};

// q6_K: sc[i] = d * scale_i for its 16 sub-blocks of 16.
struct RdQ6_K {
  static constexpr int32_t kOffset = 32;
  static constexpr bool kMin = false, kSuper = true;
  static constexpr int kSubK = 16;
  static constexpr int64_t kBlockBytes = sizeof(BlockQ6_K);
  static void prepare(const uint8_t* blk, float* sc) {
    const auto* b = reinterpret_cast<const BlockQ6_K*>(blk);
    const float d = _cvtsh_ss(b->d);
    for (int i = 0; i < 16; ++i) sc[i] = d * static_cast<float>(b->scales[i]);
  }
  static void chunk(const uint8_t* row, int64_t c, const float* sc, __m256i& u, __m256& scale, __m256& min) {
    const auto* b = reinterpret_cast<const BlockQ6_K*>(row + (c / 8) * kBlockBytes);
    const int j = static_cast<int>(c % 8);
    const int h = j / 4, k = j % 4;
    const __m256i low = nibbles_of(b->ql + 64 * h + 32 * (k & 1), k >> 1);
    // Bits 2k, 2k + 1 of each qh byte, moved to bits 4, 5.
    const __m256i qh = load32(b->qh + 32 * h);
    const __m256i two = 2 * k >= 4 ? _mm256_srli_epi16(qh, 2 * k - 4) : _mm256_slli_epi16(qh, 4 - 2 * k);
    u = _mm256_or_si256(low, _mm256_and_si256(two, _mm256_set1_epi8(0x30)));
    // Weights 0..15 (lanes 0..3) use sub-block 2j, 16..31 use 2j + 1.
    scale = _mm256_set_m128(_mm_set1_ps(sc[2 * j + 1]), _mm_set1_ps(sc[2 * j]));
    min = _mm256_setzero_ps();
  }
};

// The 2-bit fields of chunk j of a q2_K/q3_K block (core/dtype.hpp), as bytes.
inline __m256i crumbs_of(const uint8_t* qs, int j) {
  const __m256i v = _mm256_srli_epi16(load32(qs + 32 * (j / 4)), 2 * (j % 4));
  return _mm256_and_si256(v, _mm256_set1_epi8(3));
}

// Lanes 0..3 (weights 0..15) take sub-block 2j's value, 4..7 2j + 1's.
inline __m256 sub_pair(const float* v, int j) {
  return _mm256_set_m128(_mm_set1_ps(v[2 * j + 1]), _mm_set1_ps(v[2 * j]));
}

// q2_K: sc[s] = d * scale_s, sc[16 + s] = -dmin * min_s for its 16 sub-blocks.
struct RdQ2_K {
  static constexpr int32_t kOffset = 0;
  static constexpr bool kMin = true, kSuper = true;
  static constexpr int kSubK = 16;
  static constexpr int64_t kBlockBytes = sizeof(BlockQ2_K);
  static void prepare(const uint8_t* blk, float* sc) {
    const auto* b = reinterpret_cast<const BlockQ2_K*>(blk);
    const float d = _cvtsh_ss(b->d), dmin = _cvtsh_ss(b->dmin);
    for (int i = 0; i < 16; ++i) {
      sc[i] = d * static_cast<float>(b->scales[i] & 0x0f);
      sc[16 + i] = -dmin * static_cast<float>(b->scales[i] >> 4);
    }
  }
  static void chunk(const uint8_t* row, int64_t c, const float* sc, __m256i& u, __m256& scale, __m256& min) {
    const auto* b = reinterpret_cast<const BlockQ2_K*>(row + (c / 8) * kBlockBytes);
    const int j = static_cast<int>(c % 8);
    u = crumbs_of(b->qs, j);
    scale = sub_pair(sc, j);
    min = sub_pair(sc + 16, j);
  }
};

// q3_K: sc[s] = d * (scale_s - 32); u = q (0..7), offset 4.
struct RdQ3_K {
  static constexpr int32_t kOffset = 4;
  static constexpr bool kMin = false, kSuper = true;
  static constexpr int kSubK = 16;
  static constexpr int64_t kBlockBytes = sizeof(BlockQ3_K);
  static void prepare(const uint8_t* blk, float* sc) {
    const auto* b = reinterpret_cast<const BlockQ3_K*>(blk);
    const float d = _cvtsh_ss(b->d);
    for (int i = 0; i < 16; ++i) sc[i] = d * static_cast<float>(q3_K_scale(b->scales, i) - 32);
  }
  static void chunk(const uint8_t* row, int64_t c, const float* sc, __m256i& u, __m256& scale, __m256& min) {
    const auto* b = reinterpret_cast<const BlockQ3_K*>(row + (c / 8) * kBlockBytes);
    const int j = static_cast<int>(c % 8);
    const __mmask32 high = _mm256_test_epi8_mask(load32(b->hmask), _mm256_set1_epi8(static_cast<char>(1 << j)));
    u = _mm256_or_si256(crumbs_of(b->qs, j), _mm256_maskz_set1_epi8(high, 4));
    scale = sub_pair(sc, j);
    min = _mm256_setzero_ps();
  }
};

// The iq4 levels + 128 (1..241) in each 128-bit lane: vpshufb maps a nibble
// index to its u, with offset 128 (as q8_0).
inline __m256i iq4_u_table() {
  const __m128i levels = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Levels));
  return _mm256_broadcastsi128_si256(_mm_xor_si128(levels, _mm_set1_epi8(static_cast<char>(0x80))));
}

struct RdIQ4_NL {
  static constexpr int32_t kOffset = 128;
  static constexpr bool kMin = false, kSuper = false;
  static constexpr int kSubK = 32;
  static constexpr int64_t kChunkBytes = sizeof(BlockIQ4_NL);
  static void chunk(const uint8_t* row, int64_t c, const float*, __m256i& u, __m256& scale, __m256& min) {
    const uint8_t* b = row + c * kChunkBytes;
    u = _mm256_shuffle_epi8(iq4_u_table(), split_nibbles(b + offsetof(BlockIQ4_NL, qs)));
    scale = _mm256_set1_ps(half_at(b));
    min = _mm256_setzero_ps();
  }
};

// iq4_xs: sc[j] = d * (scale_j - 32) for its 8 sub-blocks of 32.
struct RdIQ4_XS {
  static constexpr int32_t kOffset = 128;
  static constexpr bool kMin = false, kSuper = true;
  static constexpr int kSubK = 32;
  static constexpr int64_t kBlockBytes = sizeof(BlockIQ4_XS);
  static void prepare(const uint8_t* blk, float* sc) {
    const auto* b = reinterpret_cast<const BlockIQ4_XS*>(blk);
    const float d = _cvtsh_ss(b->d);
    for (int j = 0; j < 8; ++j) sc[j] = d * static_cast<float>(iq4_xs_scale(*b, j) - 32);
  }
  static void chunk(const uint8_t* row, int64_t c, const float* sc, __m256i& u, __m256& scale, __m256& min) {
    const auto* b = reinterpret_cast<const BlockIQ4_XS*>(row + (c / 8) * kBlockBytes);
    const int j = static_cast<int>(c % 8);
    u = _mm256_shuffle_epi8(iq4_u_table(), split_nibbles(b->qs + 16 * j));
    scale = _mm256_set1_ps(sc[j]);
    min = _mm256_setzero_ps();
  }
};

// Floats a reader's prepare() may write (q2_K: 16 scales, 16 minimums).
constexpr int kReaderScales = 32;

template <class Rd>
const uint8_t* chunk_addr(const uint8_t* row, int64_t c) {
  if constexpr (Rd::kSuper) {
    return row + (c / 8) * Rd::kBlockBytes;
  } else {
    return row + c * Rd::kChunkBytes;
  }
}

// Decodes the scales of the super-block that starts at chunk c (if one does).
template <class Rd>
void prepare_at(const uint8_t* row, int64_t c, float* sc) {
  if constexpr (Rd::kSuper) {
    if (c % 8 == 0) Rd::prepare(chunk_addr<Rd>(row, c), sc);
  } else {
    (void)row, (void)c, (void)sc;
  }
}

}  // namespace
}  // namespace troupe::kernels::cpu

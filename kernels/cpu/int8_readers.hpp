// Weight readers of the int8 path (matmul_int8.hpp), shared by the VNNI, AMX
// and AVX2 translation units: chunk c (32 weights) of a row as 32 unsigned
// bytes u in input order, with the per-lane scale and min, such that
//   w[i] = scale[lane(i)] * (u[i] - kOffset) + min[lane(i)],  lane(i) = i / 4.
// 256-bit AVX2 throughout; where the file is built with AVX-512BW/VL, two
// bit expansions take its mask instructions instead. Include only from files
// built with at least -mavx2 -mf16c (internal linkage).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/dtype.hpp"
#include "kernels/cpu/x86_intrinsics.hpp"

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

// `value` in byte i where bit i of `bits` is set, else 0.
inline __m256i bytes_where(uint32_t bits, char value) {
#if defined(__AVX512BW__) && defined(__AVX512VL__)
  return _mm256_maskz_set1_epi8(bits, value);
#else
  // Byte i takes byte i / 8 of bits, then keeps bit i % 8 of it.
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                                             _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202,
                                                                0x0303030303030303));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(value));
#endif
}

// `value` in each byte of the 32 at p that has bit `mask` set, else 0.
inline __m256i bytes_with(const uint8_t* p, uint8_t mask, char value) {
  const __m256i m = _mm256_set1_epi8(static_cast<char>(mask));
#if defined(__AVX512BW__) && defined(__AVX512VL__)
  return _mm256_maskz_set1_epi8(_mm256_test_epi8_mask(load32(p), m), value);
#else
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(load32(p), m), m), _mm256_set1_epi8(value));
#endif
}

// 0x10 where bit i of the 32-bit qh is set (the 5th bit of a q5 weight).
inline __m256i fifth_bits(uint32_t qh) { return bytes_where(qh, 0x10); }

// Each reader: kMaxU (the largest u), kOffset, kMin (whether min is used),
// kSuper (k-quant: chunk c lies in super-block c / 8 of kBlockBytes, and
// prepare() decodes the block's scales into sc[kReaderScales] when c % 8 ==
// 0; otherwise chunk c is a block of kChunkBytes), kSubK (inputs sharing one
// scale), and chunk(row, c, sc, u, scale, min).
struct RdQ8_0 {
  static constexpr int32_t kMaxU = 255;
  static constexpr int32_t kOffset = 128;
  static constexpr bool kMin = false, kSuper = false;
  static constexpr int kSubK = 32;
  static constexpr int64_t kChunkBytes = sizeof(BlockQ8_0);
  [[gnu::always_inline]] static void chunk(const uint8_t* row, int64_t c, const float*, __m256i& u, __m256& scale,
                                           __m256& min) {
    const uint8_t* b = row + c * kChunkBytes;
    u = _mm256_xor_si256(load32(b + offsetof(BlockQ8_0, qs)), _mm256_set1_epi8(static_cast<char>(0x80)));
    scale = _mm256_set1_ps(half_at(b));
    min = _mm256_setzero_ps();
  }
};

struct RdQ4_0 {
  static constexpr int32_t kMaxU = 15;
  static constexpr int32_t kOffset = 8;
  static constexpr bool kMin = false, kSuper = false;
  static constexpr int kSubK = 32;
  static constexpr int64_t kChunkBytes = sizeof(BlockQ4_0);
  [[gnu::always_inline]] static void chunk(const uint8_t* row, int64_t c, const float*, __m256i& u, __m256& scale,
                                           __m256& min) {
    const uint8_t* b = row + c * kChunkBytes;
    u = split_nibbles(b + offsetof(BlockQ4_0, qs));
    scale = _mm256_set1_ps(half_at(b));
    min = _mm256_setzero_ps();
  }
};

struct RdQ4_1 {
  static constexpr int32_t kMaxU = 15;
  static constexpr int32_t kOffset = 0;
  static constexpr bool kMin = true, kSuper = false;
  static constexpr int kSubK = 32;
  static constexpr int64_t kChunkBytes = sizeof(BlockQ4_1);
  [[gnu::always_inline]] static void chunk(const uint8_t* row, int64_t c, const float*, __m256i& u, __m256& scale,
                                           __m256& min) {
    const uint8_t* b = row + c * kChunkBytes;
    u = split_nibbles(b + offsetof(BlockQ4_1, qs));
    scale = _mm256_set1_ps(half_at(b + offsetof(BlockQ4_1, d)));
    min = _mm256_set1_ps(half_at(b + offsetof(BlockQ4_1, m)));
  }
};

struct RdQ5_0 {
  static constexpr int32_t kMaxU = 31;
  static constexpr int32_t kOffset = 16;
  static constexpr bool kMin = false, kSuper = false;
  static constexpr int kSubK = 32;
  static constexpr int64_t kChunkBytes = sizeof(BlockQ5_0);
  [[gnu::always_inline]] static void chunk(const uint8_t* row, int64_t c, const float*, __m256i& u, __m256& scale,
                                           __m256& min) {
    const uint8_t* b = row + c * kChunkBytes;
    uint32_t qh;
    std::memcpy(&qh, b + offsetof(BlockQ5_0, qh), sizeof qh);
    u = _mm256_or_si256(split_nibbles(b + offsetof(BlockQ5_0, qs)), fifth_bits(qh));
    scale = _mm256_set1_ps(half_at(b));
    min = _mm256_setzero_ps();
  }
};

struct RdQ5_1 {
  static constexpr int32_t kMaxU = 31;
  static constexpr int32_t kOffset = 0;
  static constexpr bool kMin = true, kSuper = false;
  static constexpr int kSubK = 32;
  static constexpr int64_t kChunkBytes = sizeof(BlockQ5_1);
  [[gnu::always_inline]] static void chunk(const uint8_t* row, int64_t c, const float*, __m256i& u, __m256& scale,
                                           __m256& min) {
    const uint8_t* b = row + c * kChunkBytes;
    uint32_t qh;
    std::memcpy(&qh, b + offsetof(BlockQ5_1, qh), sizeof qh);
    u = _mm256_or_si256(split_nibbles(b + offsetof(BlockQ5_1, qs)), fifth_bits(qh));
    scale = _mm256_set1_ps(half_at(b + offsetof(BlockQ5_1, d)));
    min = _mm256_set1_ps(half_at(b + offsetof(BlockQ5_1, m)));
  }
};

// out[i] = mul * (byte i of bytes - sub), i < 8: the decoded scales of a
// super-block as floats, with the scalar product's single rounding. Every
// GEMV row decodes each of its super-blocks once, so a scalar loop here cost
// as much as the q4_K block's dot products.
inline void store_scaled(uint64_t bytes, float mul, float* out, int sub = 0) {
  const __m256i v = _mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(bytes))),
                                     _mm256_set1_epi32(sub));
  _mm256_storeu_ps(out, _mm256_mul_ps(_mm256_cvtepi32_ps(v), _mm256_set1_ps(mul)));
}

inline uint64_t load_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline uint64_t join32(uint32_t low, uint32_t high) { return low | (static_cast<uint64_t>(high) << 32); }

// q4_K/q5_K: sc[j] = d * scale_j, sc[8 + j] = -dmin * min_j. The 12 scale
// bytes as words a, b, c: scales 0-3 are a's low 6 bits a byte, minimums
// 0-3 b's; scale 4 + i is c's low nibble i with a's top 2 bits above it,
// minimum 4 + i c's high nibble with b's (kquant_scale_min, bytewise).
inline void prepare_q45k(const uint8_t* blk, float* sc) {
  const auto* b = reinterpret_cast<const BlockQ4_K*>(blk);  // q5_K starts alike
  static_assert(offsetof(BlockQ4_K, scales) == offsetof(BlockQ5_K, scales));
  uint32_t w[3];
  std::memcpy(w, b->scales, sizeof w);
  constexpr uint32_t k6 = 0x3f3f3f3f, k4 = 0x0f0f0f0f, k2 = 0x03030303;
  const uint32_t s_high = (w[2] & k4) | (((w[0] >> 6) & k2) << 4);
  const uint32_t m_high = ((w[2] >> 4) & k4) | (((w[1] >> 6) & k2) << 4);
  store_scaled(join32(w[0] & k6, s_high), _cvtsh_ss(b->d), sc);
  store_scaled(join32(w[1] & k6, m_high), -_cvtsh_ss(b->dmin), sc + 8);
}

// Low (j even) or high (j odd) nibbles of the 32 bytes at q.
inline __m256i nibbles_of(const uint8_t* q, int j) {
  const __m256i v = load32(q);
  return _mm256_and_si256(j & 1 ? _mm256_srli_epi16(v, 4) : v, _mm256_set1_epi8(0x0f));
}

struct RdQ4_K {
  static constexpr int32_t kMaxU = 15;
  static constexpr int32_t kOffset = 0;
  static constexpr bool kMin = true, kSuper = true;
  static constexpr int kSubK = 32;
  static constexpr int64_t kBlockBytes = sizeof(BlockQ4_K);
  static void prepare(const uint8_t* blk, float* sc) { prepare_q45k(blk, sc); }
  [[gnu::always_inline]] static void chunk(const uint8_t* row, int64_t c, const float* sc, __m256i& u, __m256& scale,
                                           __m256& min) {
    const auto* b = reinterpret_cast<const BlockQ4_K*>(row + (c / 8) * kBlockBytes);
    const int j = static_cast<int>(c % 8);
    u = nibbles_of(b->qs + (j / 2) * 32, j);
    scale = _mm256_set1_ps(sc[j]);
    min = _mm256_set1_ps(sc[8 + j]);
  }
};

struct RdQ5_K {
  static constexpr int32_t kMaxU = 31;
  static constexpr int32_t kOffset = 0;
  static constexpr bool kMin = true, kSuper = true;
  static constexpr int kSubK = 32;
  static constexpr int64_t kBlockBytes = sizeof(BlockQ5_K);
  static void prepare(const uint8_t* blk, float* sc) { prepare_q45k(blk, sc); }
  [[gnu::always_inline]] static void chunk(const uint8_t* row, int64_t c, const float* sc, __m256i& u, __m256& scale,
                                           __m256& min) {
    const auto* b = reinterpret_cast<const BlockQ5_K*>(row + (c / 8) * kBlockBytes);
    const int j = static_cast<int>(c % 8);
    u = _mm256_or_si256(nibbles_of(b->qs + (j / 2) * 32, j), bytes_with(b->qh, static_cast<uint8_t>(1 << j), 0x10));
    scale = _mm256_set1_ps(sc[j]);
    min = _mm256_set1_ps(sc[8 + j]);
  }
};

// q6_K: sc[i] = d * scale_i for its 16 sub-blocks of 16.
struct RdQ6_K {
  static constexpr int32_t kMaxU = 63;
  static constexpr int32_t kOffset = 32;
  static constexpr bool kMin = false, kSuper = true;
  static constexpr int kSubK = 16;
  static constexpr int64_t kBlockBytes = sizeof(BlockQ6_K);
  static void prepare(const uint8_t* blk, float* sc) {
    const auto* b = reinterpret_cast<const BlockQ6_K*>(blk);
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(b->d));
    for (int i = 0; i < 16; i += 8) {  // the scales are signed bytes
      const __m128i s = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b->scales + i));
      _mm256_storeu_ps(sc + i, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(s)), d));
    }
  }
  [[gnu::always_inline]] static void chunk(const uint8_t* row, int64_t c, const float* sc, __m256i& u, __m256& scale,
                                           __m256& min) {
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
  static constexpr int32_t kMaxU = 3;
  static constexpr int32_t kOffset = 0;
  static constexpr bool kMin = true, kSuper = true;
  static constexpr int kSubK = 16;
  static constexpr int64_t kBlockBytes = sizeof(BlockQ2_K);
  static void prepare(const uint8_t* blk, float* sc) {
    const auto* b = reinterpret_cast<const BlockQ2_K*>(blk);
    const float d = _cvtsh_ss(b->d), dmin = _cvtsh_ss(b->dmin);
    constexpr uint64_t k4 = 0x0f0f0f0f0f0f0f0f;
    for (int i = 0; i < 16; i += 8) {  // a scale in each low nibble, a minimum in each high one
      const uint64_t v = load_u64(b->scales + i);
      store_scaled(v & k4, d, sc + i);
      store_scaled((v >> 4) & k4, -dmin, sc + 16 + i);
    }
  }
  [[gnu::always_inline]] static void chunk(const uint8_t* row, int64_t c, const float* sc, __m256i& u, __m256& scale,
                                           __m256& min) {
    const auto* b = reinterpret_cast<const BlockQ2_K*>(row + (c / 8) * kBlockBytes);
    const int j = static_cast<int>(c % 8);
    u = crumbs_of(b->qs, j);
    scale = sub_pair(sc, j);
    min = sub_pair(sc + 16, j);
  }
};

// q3_K: sc[s] = d * (scale_s - 32); u = q (0..7), offset 4.
struct RdQ3_K {
  static constexpr int32_t kMaxU = 7;
  static constexpr int32_t kOffset = 4;
  static constexpr bool kMin = false, kSuper = true;
  static constexpr int kSubK = 16;
  static constexpr int64_t kBlockBytes = sizeof(BlockQ3_K);
  static void prepare(const uint8_t* blk, float* sc) {
    const auto* b = reinterpret_cast<const BlockQ3_K*>(blk);
    // q3_K_scale bytewise: scales 0-7 are the low nibbles of bytes 0-7,
    // 8-15 their high nibbles; above them, the 2-bit fields of bytes 8-11
    // (bits 0-1 for scales 0-3, 2-3 for 4-7, and so on).
    const float d = _cvtsh_ss(b->d);
    const uint64_t low = load_u64(b->scales);
    uint32_t h;
    std::memcpy(&h, b->scales + 8, sizeof h);
    constexpr uint64_t k4 = 0x0f0f0f0f0f0f0f0f;
    constexpr uint32_t k2 = 0x03030303;
    const uint64_t high0 = join32(h & k2, (h >> 2) & k2), high1 = join32((h >> 4) & k2, (h >> 6) & k2);
    store_scaled((low & k4) | (high0 << 4), d, sc, 32);
    store_scaled(((low >> 4) & k4) | (high1 << 4), d, sc + 8, 32);
  }
  [[gnu::always_inline]] static void chunk(const uint8_t* row, int64_t c, const float* sc, __m256i& u, __m256& scale,
                                           __m256& min) {
    const auto* b = reinterpret_cast<const BlockQ3_K*>(row + (c / 8) * kBlockBytes);
    const int j = static_cast<int>(c % 8);
    u = _mm256_or_si256(crumbs_of(b->qs, j), bytes_with(b->hmask, static_cast<uint8_t>(1 << j), 4));
    scale = sub_pair(sc, j);
    min = _mm256_setzero_ps();
  }
};

// 16 int8 levels + offset in each 128-bit lane: vpshufb maps a nibble index
// to its u. iq4: offset 128 (as q8_0), u in 1..241; mxfp4: offset 12, u in
// 0..24, so its pairs need no sign trick and 5 lines sum in int16.
inline __m256i level_u_table(const int8_t (&levels)[16], int offset) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(levels));
  return _mm256_broadcastsi128_si256(_mm_add_epi8(v, _mm_set1_epi8(static_cast<char>(offset))));
}
inline __m256i iq4_u_table() { return level_u_table(kIq4Levels, 128); }
inline __m256i mxfp4_u_table() { return level_u_table(kMxfp4Levels, 12); }

struct RdIQ4_NL {
  static constexpr int32_t kMaxU = 241;
  static constexpr int32_t kOffset = 128;
  static constexpr bool kMin = false, kSuper = false;
  static constexpr int kSubK = 32;
  static constexpr int64_t kChunkBytes = sizeof(BlockIQ4_NL);
  [[gnu::always_inline]] static __m256i u_table() { return iq4_u_table(); }
  [[gnu::always_inline]] static void chunk(const uint8_t* row, int64_t c, const float*, __m256i& u, __m256& scale,
                                           __m256& min) {
    const uint8_t* b = row + c * kChunkBytes;
    u = _mm256_shuffle_epi8(iq4_u_table(), split_nibbles(b + offsetof(BlockIQ4_NL, qs)));
    scale = _mm256_set1_ps(half_at(b));
    min = _mm256_setzero_ps();
  }
};

// mxfp4: as iq4_nl, the doubled FP4 levels (-12..12) as the table and
// 2^(e - 128) as the scale.
struct RdMXFP4 {
  static constexpr int32_t kMaxU = 24;
  static constexpr int32_t kOffset = 12;
  static constexpr bool kMin = false, kSuper = false;
  static constexpr int kSubK = 32;
  static constexpr int64_t kChunkBytes = sizeof(BlockMXFP4);
  [[gnu::always_inline]] static __m256i u_table() { return mxfp4_u_table(); }
  [[gnu::always_inline]] static void chunk(const uint8_t* row, int64_t c, const float*, __m256i& u, __m256& scale,
                                           __m256& min) {
    const uint8_t* b = row + c * kChunkBytes;
    u = _mm256_shuffle_epi8(mxfp4_u_table(), split_nibbles(b + offsetof(BlockMXFP4, qs)));
    scale = _mm256_set1_ps(mxfp4_scale(b[offsetof(BlockMXFP4, e)]));
    min = _mm256_setzero_ps();
  }
};

// iq4_xs: sc[j] = d * (scale_j - 32) for its 8 sub-blocks of 32.
struct RdIQ4_XS {
  static constexpr int32_t kMaxU = 241;
  static constexpr int32_t kOffset = 128;
  static constexpr bool kMin = false, kSuper = true;
  static constexpr int kSubK = 32;
  static constexpr int64_t kBlockBytes = sizeof(BlockIQ4_XS);
  [[gnu::always_inline]] static __m256i u_table() { return iq4_u_table(); }
  static void prepare(const uint8_t* blk, float* sc) {
    const auto* b = reinterpret_cast<const BlockIQ4_XS*>(blk);
    const float d = _cvtsh_ss(b->d);
    for (int j = 0; j < 8; ++j) sc[j] = d * static_cast<float>(iq4_xs_scale(*b, j) - 32);
  }
  [[gnu::always_inline]] static void chunk(const uint8_t* row, int64_t c, const float* sc, __m256i& u, __m256& scale,
                                           __m256& min) {
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

// f.template operator()<Rd>() with the reader of weight type t; f32, f16 and
// bf16 have none (int8_supports) and call nothing.
template <class F>
void with_reader(DType t, F&& f) {
  switch (t) {
    case DType::q8_0: return f.template operator()<RdQ8_0>();
    case DType::q4_0: return f.template operator()<RdQ4_0>();
    case DType::q4_1: return f.template operator()<RdQ4_1>();
    case DType::q5_0: return f.template operator()<RdQ5_0>();
    case DType::q5_1: return f.template operator()<RdQ5_1>();
    case DType::q2_K: return f.template operator()<RdQ2_K>();
    case DType::q3_K: return f.template operator()<RdQ3_K>();
    case DType::q4_K: return f.template operator()<RdQ4_K>();
    case DType::q5_K: return f.template operator()<RdQ5_K>();
    case DType::q6_K: return f.template operator()<RdQ6_K>();
    case DType::iq4_nl: return f.template operator()<RdIQ4_NL>();
    case DType::iq4_xs: return f.template operator()<RdIQ4_XS>();
    case DType::mxfp4: return f.template operator()<RdMXFP4>();
    case DType::f32:
    case DType::f16:
    case DType::bf16: break;
  }
}

}  // namespace
}  // namespace troupe::kernels::cpu

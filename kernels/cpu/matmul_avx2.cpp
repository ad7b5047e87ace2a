// AVX2 + FMA + F16C matmul, for machines without AVX-512. Same structure as
// matmul_avx512.cpp (in-register GEMV for decode, dequantized panel and a
// register-blocked micro-kernel for prefill), sized for 16 ymm registers.
#include "kernels/cpu/matmul_impl.hpp"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

namespace troupe::kernels::detail {
namespace {

// Below this many tokens the in-register GEMV is used (see matmul_avx512.cpp).
constexpr int64_t kGemmMinTokens = 8;
// Prefill micro-tile: 3 tokens × 4 rows = 12 ymm accumulators + 3 x vectors
// + 1 weight vector = all 16 registers; 7 loads per 12 FMAs.
constexpr int kTileTokens = 3;
constexpr int kTileRows = 4;
constexpr int64_t kKBlock = 1024;

// Lane masks for partial loads/stores: kLaneMask + 8 - n enables n lanes.
alignas(64) constexpr int32_t kLaneMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
__m256i lane_mask8(int64_t n) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLaneMask + 8 - n)); }
__m128i lane_mask4(int64_t n) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(kLaneMask + 8 - n)); }

// ---- Loaders: one chunk (32 weights of a row) as four vectors of 8 f32 ----

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

// 8 iq4 levels (core/dtype.hpp) for the indices in idx (0..15), as floats
// times ds: two 8-entry permutes, bit 3 of the index picking between them.
inline __m256 iq4_levels(__m256i idx, __m256 ds) {
  const __m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(load64(reinterpret_cast<const uint8_t*>(kIq4Levels))));
  const __m256 hi =
      _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(load64(reinterpret_cast<const uint8_t*>(kIq4Levels) + 8)));
  const __m256 v = _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, idx), _mm256_permutevar8x32_ps(hi, idx),
                                    _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
  return _mm256_mul_ps(v, ds);  // exact: d (11 bits) x scale x level fit in 24
}

// Weights 0..15 of 16 q4_0-style bytes (low nibbles) then 16..31 (high).
inline void iq4_chunk(const uint8_t* qs, __m256 ds, __m256 (&v)[4]) {
  const __m256i a = _mm256_cvtepu8_epi32(load64(qs));
  const __m256i b = _mm256_cvtepu8_epi32(load64(qs + 8));
  const __m256i low = _mm256_set1_epi32(0x0f);
  v[0] = iq4_levels(_mm256_and_si256(a, low), ds);
  v[1] = iq4_levels(_mm256_and_si256(b, low), ds);
  v[2] = iq4_levels(_mm256_srli_epi32(a, 4), ds);
  v[3] = iq4_levels(_mm256_srli_epi32(b, 4), ds);
}

struct LoadIQ4_NL {
  static constexpr bool kQuantized = true;
  static constexpr int64_t kChunkBytes = sizeof(BlockIQ4_NL);
  static void load(const uint8_t* c, __m256 (&v)[4]) {
    iq4_chunk(c + offsetof(BlockIQ4_NL, qs), half_broadcast(c + offsetof(BlockIQ4_NL, d)), v);
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
    iq4_chunk(b->qs + 16 * j, _mm256_set1_ps(ds), v);
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

// Sums each of v[0..3] across its 8 lanes; lane i of the result is v[i]'s
// sum, reduced in the same order whatever its slot.
__m128 reduce4(const __m256 (&v)[4]) {
  const __m256 ab = _mm256_hadd_ps(v[0], v[1]);
  const __m256 cd = _mm256_hadd_ps(v[2], v[3]);
  const __m256 abcd = _mm256_hadd_ps(ab, cd);
  return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

// ---- Decode: GEMV over T tokens × R rows, weights dequantized in registers ----

// Software prefetch far ahead in the weight stream. Measured on Zen 5 with
// weights in DRAM: without it a one-token GEMV reads only 8-15 GB/s for q8_0
// and q4 (the hardware prefetchers do not run far enough ahead), with 12 KiB
// 22-35 GB/s. The address is formed as an integer: it may lie past the end of
// the weights, which a prefetch tolerates.
constexpr uintptr_t kPrefetchBytes = 12288;
inline void prefetch_ahead(const uint8_t* p) {
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(p) + kPrefetchBytes), _MM_HINT_T0);
}

template <class L, int T, int R>
void gemv_tile(const MatmulProblem& p, int64_t t0, int64_t r0) {
  const uint8_t* rows[R];
  const float* xs[T];
  for (int r = 0; r < R; ++r) rows[r] = p.w + (r0 + r) * p.w_row_bytes;
  for (int t = 0; t < T; ++t) xs[t] = p.x + (t0 + t) * p.n_in;
  // For T = 1, two accumulators per row (even and odd vectors of a chunk)
  // keep enough independent FMA chains in flight.
  constexpr int H = T == 1 ? 2 : 1;
  __m256 acc[T][R][H];
  for (int t = 0; t < T; ++t) {
    for (int r = 0; r < R; ++r) {
      for (int h = 0; h < H; ++h) acc[t][r][h] = _mm256_setzero_ps();
    }
  }
  // Chunk c of each row wr[r]; xc[t] points at token t's 32 inputs.
  auto step = [&](const uint8_t* const (&wr)[R], int64_t c, const float* const (&xc)[T]) {
    for (int r = 0; r < R; ++r) {
      __m256 wv[4];
      load_chunk<L>(wr[r], c, wv);
      for (int t = 0; t < T; ++t) {
        for (int i = 0; i < 4; ++i) {
          acc[t][r][i % H] = _mm256_fmadd_ps(wv[i], _mm256_loadu_ps(xc[t] + 8 * i), acc[t][r][i % H]);
        }
      }
    }
  };
  const int64_t n_chunks = p.n_in / kMatmulChunk;
  for (int64_t c = 0; c < n_chunks; ++c) {
    const float* xc[T];
    for (int t = 0; t < T; ++t) xc[t] = xs[t] + c * kMatmulChunk;
    for (int r = 0; r < R; ++r) prefetch_ahead(chunk_addr<L>(rows[r], c));
    step(rows, c, xc);
  }
  if constexpr (!L::kQuantized) {
    // A row length that is not a multiple of 32 (plain float types only):
    // run the last chunk on zero-padded copies.
    const int64_t rem = p.n_in - n_chunks * kMatmulChunk;
    if (rem > 0) {
      constexpr int64_t elem = L::kChunkBytes / kMatmulChunk;
      alignas(32) uint8_t wpad[R][L::kChunkBytes] = {};
      alignas(32) float xpad[T][kMatmulChunk] = {};
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
    __m256 v[4];
    for (int r = 0; r < R; ++r) v[r] = H == 2 ? _mm256_add_ps(acc[t][r][0], acc[t][r][H - 1]) : acc[t][r][0];
    for (int r = R; r < 4; ++r) v[r] = _mm256_setzero_ps();
    _mm_maskstore_ps(p.y + (t0 + t) * p.n_out + r0, lane_mask4(R), reduce4(v));
  }
}

template <class L, int T, int R>
void gemv_span(const MatmulProblem& p, int64_t t0, int64_t r0, int64_t r1) {
  int64_t r = r0;
  for (; r + R <= r1; r += R) gemv_tile<L, T, R>(p, t0, r);
  for (; r < r1; ++r) gemv_tile<L, T, 1>(p, t0, r);
}

template <class L>
void gemv_rows(const MatmulProblem& p, int64_t row_begin, int64_t row_end) {
  for (int64_t u0 = row_begin; u0 < row_end; u0 += kMatmulRowUnit) {
    const int64_t u1 = std::min(u0 + kMatmulRowUnit, row_end);
    for (int64_t t0 = 0; t0 < p.n_tokens; t0 += 4) {
      switch (std::min<int64_t>(4, p.n_tokens - t0)) {
        case 1: gemv_span<L, 1, 4>(p, t0, u0, u1); break;
        case 2: gemv_span<L, 2, 4>(p, t0, u0, u1); break;
        case 3: gemv_span<L, 3, 2>(p, t0, u0, u1); break;
        default: gemv_span<L, 4, 2>(p, t0, u0, u1); break;
      }
    }
  }
}

// ---- Prefill: panel of f32 weights × tokens, register-blocked ----

template <int TM, int RN>
void gemm_tile(const float* x, int64_t ldx, const float* w, int64_t ldw, int64_t kb, float* y, int64_t ldy,
               bool accumulate) {
  __m256 acc[TM][RN];
  for (int t = 0; t < TM; ++t) {
    for (int r = 0; r < RN; ++r) acc[t][r] = _mm256_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 8 <= kb; k += 8) {
    __m256 xv[TM];
    for (int t = 0; t < TM; ++t) xv[t] = _mm256_loadu_ps(x + t * ldx + k);
    for (int r = 0; r < RN; ++r) {
      const __m256 wv = _mm256_loadu_ps(w + r * ldw + k);
      for (int t = 0; t < TM; ++t) acc[t][r] = _mm256_fmadd_ps(xv[t], wv, acc[t][r]);
    }
  }
  if (k < kb) {  // masked lanes are neither read nor faulted on
    const __m256i m = lane_mask8(kb - k);
    __m256 xv[TM];
    for (int t = 0; t < TM; ++t) xv[t] = _mm256_maskload_ps(x + t * ldx + k, m);
    for (int r = 0; r < RN; ++r) {
      const __m256 wv = _mm256_maskload_ps(w + r * ldw + k, m);
      for (int t = 0; t < TM; ++t) acc[t][r] = _mm256_fmadd_ps(xv[t], wv, acc[t][r]);
    }
  }
  const __m128i m = lane_mask4(RN);
  for (int t = 0; t < TM; ++t) {
    __m256 v[4];
    for (int r = 0; r < RN; ++r) v[r] = acc[t][r];
    for (int r = RN; r < 4; ++r) v[r] = _mm256_setzero_ps();
    __m128 s = reduce4(v);
    if (accumulate) s = _mm_add_ps(s, _mm_maskload_ps(y + t * ldy, m));
    _mm_maskstore_ps(y + t * ldy, m, s);
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
constexpr auto kTiles = tile_table(std::make_integer_sequence<int, kTileTokens>{});

template <class L>
void dequant_panel(const MatmulProblem& p, int64_t r0, int64_t nr, int64_t k0, int64_t kb, float* dst, int64_t ld) {
  const int64_t c0 = k0 / kMatmulChunk;
  const int64_t n_chunks = kb / kMatmulChunk;
  for (int64_t i = 0; i < nr; ++i) {
    const uint8_t* row = p.w + (r0 + i) * p.w_row_bytes;
    float* out = dst + i * ld;
    for (int64_t c = 0; c < n_chunks; ++c) {
      __m256 v[4];
      load_chunk<L>(row, c0 + c, v);
      for (int j = 0; j < 4; ++j) _mm256_storeu_ps(out + c * kMatmulChunk + 8 * j, v[j]);
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
  const int64_t ld = (std::min(kKBlock, p.n_in) + 7) / 8 * 8 + 16;
  float* panel = matmul_scratch(kMatmulRowUnit * ld);
  for (int64_t k0 = 0; k0 < p.n_in; k0 += kKBlock) {
    const int64_t kb = std::min(kKBlock, p.n_in - k0);
    for (int64_t p0 = row_begin; p0 < row_end; p0 += kMatmulRowUnit) {
      const int64_t pr = std::min(kMatmulRowUnit, row_end - p0);
      dequant_panel<L>(p, p0, pr, k0, kb, panel, ld);
      // Token tiles as even as possible (4 tokens: 2 + 2, not 3 + 1).
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

void matmul_rows_avx2(const MatmulProblem& p, int64_t row_begin, int64_t row_end) {
  switch (p.wtype) {
    case DType::f32: return rows_for<LoadF32>(p, row_begin, row_end);
    case DType::f16: return rows_for<LoadF16>(p, row_begin, row_end);
    case DType::bf16: return rows_for<LoadBF16>(p, row_begin, row_end);
    case DType::q8_0: return rows_for<LoadQ8_0>(p, row_begin, row_end);
    case DType::q4_0: return rows_for<LoadQ4_0>(p, row_begin, row_end);
    case DType::q4_1: return rows_for<LoadQ4_1>(p, row_begin, row_end);
    case DType::q5_0: return rows_for<LoadQ5_0>(p, row_begin, row_end);
    case DType::q5_1: return rows_for<LoadQ5_1>(p, row_begin, row_end);
    case DType::q4_K: return rows_for<LoadQ4_K>(p, row_begin, row_end);
    case DType::q5_K: return rows_for<LoadQ5_K>(p, row_begin, row_end);
    case DType::q2_K: return rows_for<LoadQ2_K>(p, row_begin, row_end);
    case DType::q3_K: return rows_for<LoadQ3_K>(p, row_begin, row_end);
    case DType::q6_K: return rows_for<LoadQ6_K>(p, row_begin, row_end);
    case DType::iq4_nl: return rows_for<LoadIQ4_NL>(p, row_begin, row_end);
    case DType::iq4_xs: return rows_for<LoadIQ4_XS>(p, row_begin, row_end);
  }
}

}  // namespace troupe::kernels::detail

#endif  // x86

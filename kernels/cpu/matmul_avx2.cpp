// AVX2 + FMA + F16C matmul, for machines without AVX-512. Same structure as
// matmul_avx512.cpp (in-register GEMV for decode, dequantized panel and a
// register-blocked micro-kernel for prefill), sized for 16 ymm registers.
#include "kernels/cpu/matmul_impl.hpp"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include "kernels/cpu/chunk_loaders_avx2.hpp"
#include "kernels/cpu/weight_prefetch.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

namespace troupe::kernels::detail {
namespace {

// Prefill micro-tile: 3 tokens × 4 rows = 12 ymm accumulators + 3 x vectors
// + 1 weight vector = all 16 registers; 7 loads per 12 FMAs.
constexpr int kTileTokens = 3;
constexpr int kTileRows = 4;
constexpr int64_t kKBlock = 1024;

// Lane masks for partial loads/stores: kLaneMask + 8 - n enables n lanes.
alignas(64) constexpr int32_t kLaneMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
__m256i lane_mask8(int64_t n) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLaneMask + 8 - n)); }
__m128i lane_mask4(int64_t n) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(kLaneMask + 8 - n)); }

// Sums each of v[0..3] across its 8 lanes; lane i of the result is v[i]'s
// sum, reduced in the same order whatever its slot.
__m128 reduce4(const __m256 (&v)[4]) {
  const __m256 ab = _mm256_hadd_ps(v[0], v[1]);
  const __m256 cd = _mm256_hadd_ps(v[2], v[3]);
  const __m256 abcd = _mm256_hadd_ps(ab, cd);
  return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

// ---- Decode: GEMV over T tokens × R rows, weights dequantized in registers ----

using cpu::prefetch_ahead;

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
  if (p.n_tokens < kAvx2GemmMinTokens) {
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
    case DType::mxfp4: return rows_for<LoadMXFP4>(p, row_begin, row_end);
  }
}

}  // namespace troupe::kernels::detail

#endif  // x86

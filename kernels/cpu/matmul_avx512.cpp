// AVX-512 matmul (compiled with -mavx512f/bw/vl/dq -mfma -mf16c). Decode (few
// tokens) is a GEMV that streams each weight row once, dequantizing 32 weights
// at a time in registers; prefill dequantizes a panel of rows into an f32
// buffer once and runs a register-blocked tokens × rows micro-kernel over it.
#include "kernels/cpu/matmul_impl.hpp"

#if defined(__x86_64__) || defined(__i386__)

#include "kernels/cpu/chunk_loaders_avx512.hpp"
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
    case DType::mxfp4: return rows_for<LoadMXFP4>(p, row_begin, row_end);
  }
}

}  // namespace troupe::kernels::detail

#endif  // x86

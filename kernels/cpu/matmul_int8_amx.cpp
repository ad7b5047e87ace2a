// The AMX micro-kernel of the int8 path (matmul_int8.hpp): per sub-block of
// a panel, one tile product C[tokens, 16 rows] = A[tokens, K] · B[K, 16 rows]
// with int8 activations and the panel's unsigned weights (tdpbsud), then the
// f32 scaling in AVX-512 registers, as in the VNNI kernel. The per-sub-block
// scales are why K stays at one sub-block (32, or 16 for q6_K) per product.
#include "kernels/cpu/matmul_int8.hpp"

#if defined(__x86_64__) || defined(__i386__)

#include <cstdint>
#include <cstring>

#include "core/cpu_features.hpp"
#include "kernels/cpu/amx_tile_config.hpp"
#include "kernels/cpu/simd_avx512.hpp"

namespace troupe::kernels::detail {
namespace {

constexpr int kTileTokens = 16;

// Two sets of tiles, so that the tile unit computes sub-block s + 1 while
// the vector units scale sub-block s: tiles 0 and 1 are C (16 tokens × 16
// int32), 2 and 3 are A (16 tokens × sub_k int8), 4 and 5 are B (sub_k / 4 ×
// 64 bytes: 16 rows × 4 inputs).
void configure(int64_t sub_k) {
  TileConfig cfg;
  for (int i = 0; i < 2; ++i) {
    cfg.rows[i] = kTileTokens;
    cfg.colsb[i] = 64;
    cfg.rows[2 + i] = kTileTokens;
    cfg.colsb[2 + i] = static_cast<uint16_t>(sub_k);
    cfg.rows[4 + i] = static_cast<uint8_t>(sub_k / 4);
    cfg.colsb[4 + i] = 64;
  }
  _tile_loadconfig(&cfg);
}

// Starts C = A · B for sub-block s of tokens [t0, t0 + 16) on tile set 0
// (tiles 0, 2, 4) or 1 (tiles 1, 3, 5). GCC's tile intrinsics take the tile
// number as a literal, hence two functions.
[[gnu::always_inline]] inline void issue0(const Int8Panel& pn, const QuantizedActs& qa, int64_t t0, int64_t s) {
  _tile_zero(0);
  _tile_loadd(2, qa.q + t0 * qa.ldq + s * pn.sub_k, qa.ldq);
  _tile_loadd(4, pn.u + s * pn.sub_k * kPanelRows, 64);
  _tile_dpbsud(0, 2, 4);
}
[[gnu::always_inline]] inline void issue1(const Int8Panel& pn, const QuantizedActs& qa, int64_t t0, int64_t s) {
  _tile_zero(1);
  _tile_loadd(3, qa.q + t0 * qa.ldq + s * pn.sub_k, qa.ldq);
  _tile_loadd(5, pn.u + s * pn.sub_k * kPanelRows, 64);
  _tile_dpbsud(1, 3, 5);
}

// acc[t] += (C[t] + bias) * scale * d (+ min * d * sum) for sub-block s.
template <bool kMin>
[[gnu::always_inline]] inline void scale_into(const Int8Panel& pn, const QuantizedActs& qa, int64_t t0, int64_t s,
                                              const int32_t (&c)[kTileTokens][16], __m512 (&acc)[kTileTokens]) {
  const __m512 scale = _mm512_load_ps(pn.scale + s * kPanelRows);
  const int64_t b = s * pn.sub_k / 32;
#pragma GCC unroll 16  // keeps acc[] in registers
  for (int t = 0; t < kTileTokens; ++t) {
    const int64_t ts = (t0 + t) * qa.n_sub + s;
    const __m512i dot = _mm512_add_epi32(_mm512_load_si512(c[t]), _mm512_set1_epi32(qa.sub_bias[ts]));
    const __m512 sd = _mm512_mul_ps(scale, _mm512_set1_ps(qa.d[(t0 + t) * qa.nb + b]));
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), sd, acc[t]);
    if constexpr (kMin) {
      acc[t] = _mm512_fmadd_ps(_mm512_load_ps(pn.min + s * kPanelRows), _mm512_set1_ps(qa.sub_dsum[ts]), acc[t]);
    }
  }
}

// Tokens [t0, t0 + 16) (rows past qa.n_tokens are the zero padding and are
// not stored).
template <bool kMin>
void tile_tokens(const Int8Panel& pn, const QuantizedActs& qa, int64_t t0, float* y, int64_t ldy, int64_t n_rows) {
  alignas(64) int32_t c[kTileTokens][16];
  __m512 acc[kTileTokens];
#pragma GCC unroll 16
  for (int t = 0; t < kTileTokens; ++t) acc[t] = _mm512_setzero_ps();
  issue0(pn, qa, t0, 0);
  for (int64_t s = 0; s < pn.n_sub; s += 2) {
    const bool next = s + 1 < pn.n_sub;
    if (next) issue1(pn, qa, t0, s + 1);
    _tile_stored(0, c, 64);
    scale_into<kMin>(pn, qa, t0, s, c, acc);
    if (next) {
      if (s + 2 < pn.n_sub) issue0(pn, qa, t0, s + 2);
      _tile_stored(1, c, 64);
      scale_into<kMin>(pn, qa, t0, s + 1, c, acc);
    }
  }
  const __mmask16 m = cpu::tail_mask(n_rows);
#pragma GCC unroll 16
  for (int t = 0; t < kTileTokens; ++t) {
    if (t0 + t < qa.n_tokens) _mm512_mask_storeu_ps(y + (t0 + t) * ldy, m, acc[t]);
  }
}

}  // namespace

bool amx_panel(const Int8Panel& pn, const QuantizedActs& qa, float* y, int64_t ldy, int64_t n_rows) {
  if (!cpu_has_amx()) return false;
  configure(pn.sub_k);
  for (int64_t t0 = 0; t0 < qa.n_tokens; t0 += kTileTokens) {
    if (pn.min != nullptr) {
      tile_tokens<true>(pn, qa, t0, y, ldy, n_rows);
    } else {
      tile_tokens<false>(pn, qa, t0, y, ldy, n_rows);
    }
  }
  _tile_release();
  return true;
}

}  // namespace troupe::kernels::detail

#endif  // x86

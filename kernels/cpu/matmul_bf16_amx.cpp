// The AMX-BF16 kernel of the bf16 path (bf16_packed.hpp): for a chunk of
// groups of 16 rows and all tokens, C[16 tokens, 16 rows] += A · B over the
// inputs 32 at a time (tdpbf16ps), with up to 2 × 2 C tiles so each A and B
// tile loaded serves two products. C stays in its tile across all of K: no
// per-block scaling, unlike the int8 path. Blocks of 32 tokens run outside
// the groups: the block's activations are read from L2 for every group pair
// of the chunk, and the chunk (about 1 MiB) from L2 for every block, instead
// of all activations from L3 for every group pair.
#include "kernels/cpu/bf16_packed.hpp"

#if defined(__x86_64__) || defined(__i386__)

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/amx_tile_config.hpp"
#include "kernels/cpu/simd_avx512.hpp"

namespace troupe::kernels::detail {
namespace {

constexpr int kTile = 16;  // tokens (A and C rows), pairs (B rows), rows of W (C columns)

// Tiles 0-3 are C (token tile i, group j at 2 i + j), 4-5 A (16 tokens × 32
// inputs), 6-7 B (16 pairs × 16 rows); all 16 rows of 64 bytes.
void configure() {
  TileConfig cfg;
  for (int i = 0; i < 8; ++i) {
    cfg.rows[i] = kTile;
    cfg.colsb[i] = 64;
  }
  _tile_loadconfig(&cfg);
}

// C tile → y rows [t0, t0 + 16) ∩ [0, n_tokens), columns [0, n_rows).
void store_c(const float (&c)[kTile][kTile], float* y, int64_t ldy, int64_t t0, int64_t n_tokens, int64_t n_rows) {
  const __mmask16 m = cpu::tail_mask(n_rows);
  const int64_t n = std::min<int64_t>(kTile, n_tokens - t0);
  for (int64_t t = 0; t < n; ++t) _mm512_mask_storeu_ps(y + (t0 + t) * ldy, m, _mm512_load_ps(c[t]));
}

// Tokens [t0, t0 + 16 · kTok) against kGrp groups. GCC's tile intrinsics take
// tile numbers as literals, hence the constexpr branches.
template <int kTok, int kGrp>
void tile_block(const Bf16Acts& a, const uint8_t* g0, const uint8_t* g1, float* y0, float* y1, int64_t ldy,
                int64_t n_rows0, int64_t n_rows1, int64_t t0) {
  const int64_t lda = a.k_pad * 2;  // bytes
  const uint16_t* x0 = a.x + t0 * a.k_pad;
  const uint16_t* x1 = x0 + kTile * a.k_pad;
  _tile_zero(0);
  if constexpr (kGrp == 2) _tile_zero(1);
  if constexpr (kTok == 2) _tile_zero(2);
  if constexpr (kTok == 2 && kGrp == 2) _tile_zero(3);
  for (int64_t k = 0; k < a.k_pad; k += 32) {
    const int64_t b_off = k / 2 * 64;  // 16 lines of pairs
    _tile_loadd(4, x0 + k, lda);
    _tile_loadd(6, g0 + b_off, 64);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (kGrp == 2) {
      _tile_loadd(7, g1 + b_off, 64);
      _tile_dpbf16ps(1, 4, 7);
    }
    if constexpr (kTok == 2) {
      _tile_loadd(5, x1 + k, lda);
      _tile_dpbf16ps(2, 5, 6);
      if constexpr (kGrp == 2) _tile_dpbf16ps(3, 5, 7);
    }
  }
  alignas(64) float c[kTile][kTile];
  _tile_stored(0, c, 64);
  store_c(c, y0, ldy, t0, a.n_tokens, n_rows0);
  if constexpr (kGrp == 2) {
    _tile_stored(1, c, 64);
    store_c(c, y1, ldy, t0, a.n_tokens, n_rows1);
  }
  if constexpr (kTok == 2) {
    _tile_stored(2, c, 64);
    store_c(c, y0, ldy, t0 + kTile, a.n_tokens, n_rows0);
    if constexpr (kGrp == 2) {
      _tile_stored(3, c, 64);
      store_c(c, y1, ldy, t0 + kTile, a.n_tokens, n_rows1);
    }
  }
}

}  // namespace

void amx_bf16_groups(const Bf16Acts& a, const uint8_t* groups, int64_t stride, int64_t n_groups, float* y,
                     int64_t ldy, int64_t n_rows) {
  configure();
  auto rows = [&](int64_t g) { return std::clamp<int64_t>(n_rows - g * kTile, 0, kTile); };
  for (int64_t t0 = 0; t0 < a.n_tokens; t0 += 2 * kTile) {
    const bool two_tok = t0 + kTile < a.n_tokens;
    for (int64_t g = 0; g < n_groups; g += 2) {
      const uint8_t* g0 = groups + g * stride;
      float* y0 = y + g * kTile;
      if (g + 1 < n_groups) {
        const uint8_t* g1 = g0 + stride;
        float* y1 = y0 + kTile;
        if (two_tok) {
          tile_block<2, 2>(a, g0, g1, y0, y1, ldy, rows(g), rows(g + 1), t0);
        } else {
          tile_block<1, 2>(a, g0, g1, y0, y1, ldy, rows(g), rows(g + 1), t0);
        }
      } else if (two_tok) {
        tile_block<2, 1>(a, g0, nullptr, y0, nullptr, ldy, rows(g), 0, t0);
      } else {
        tile_block<1, 1>(a, g0, nullptr, y0, nullptr, ldy, rows(g), 0, t0);
      }
    }
  }
  _tile_release();
}

int64_t amx_chunk_groups(int64_t n_in) {
  const int64_t group = bf16_group_bytes(n_in);
  return std::clamp<int64_t>((int64_t{1} << 20) / group / 2 * 2, 2, 16);
}

int64_t amx_thread_grain(int64_t n_groups, int64_t n_in, int n_threads) {
  const int64_t per_thread = (n_groups + 4 * n_threads - 1) / (4 * static_cast<int64_t>(n_threads));
  return std::clamp<int64_t>((per_thread + 1) / 2 * 2, 2, amx_chunk_groups(n_in));
}

}  // namespace troupe::kernels::detail

#endif  // x86

// The int8 path over repacked weights (int8_packed.hpp) on 256-bit
// registers, over the 16-row groups, each 64-byte line read as two 32-byte
// halves of 8 whole rows: decode as a GEMV over the packed lines, prefill as
// each group expanded once into an int8 panel, then tiles of tokens over it.
// The integer dot of a half-line and a token's 4 inputs per lane comes from
// a Dot policy: vpmaddubsw pairs summed in int16 (PairDots, any AVX2 CPU) or
// vpdpbusd on ymm (Vpdpbusd256: AVX-VNNI, or AVX-512 VNNI's EVEX form). Both
// give the integer vpdpbusd gives on zmm, and the f32 scaling is the VNNI
// kernels', lane for lane, so a row's result has matmul_packed_vnni.cpp's
// bits whichever policy runs, in decode and prefill alike.
//
// Include only from the per-ISA files that instantiate it
// (matmul_packed_avx2.cpp, matmul_packed_avxvnni.cpp,
// matmul_packed_vnni256.cpp), built with at least -mavx2 -mfma -mf16c
// (internal linkage).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>

#include "core/thread_pool.hpp"
#include "kernels/cpu/int8_packed.hpp"
#include "kernels/cpu/int8_packed_layout.hpp"
#include "kernels/cpu/matmul_impl.hpp"
#include "kernels/cpu/matmul_int8.hpp"
#include "kernels/cpu/packed_groups.hpp"
#include "kernels/cpu/packed_lines_avx2.hpp"
#include "kernels/cpu/scratch.hpp"
#include "kernels/cpu/simd_avx2.hpp"

namespace troupe::kernels::detail {
namespace {  // NOLINT: per-ISA translation units only

using namespace cpu;  // NOLINT: the layouts and line policies of this path

// ---- The dot policies: the integer dots of one sub-block ----
// sub_block<Rd, T, NH>(line, x4, bias, dot) sets dot[h][t], for NH halves
// (8 rows each) and T tokens, to the integer vpdpbusd gives: the bias plus
// the dot per row of the sub-block's Rd::kSubK inputs. line(h, g): line g of
// the sub-block in half h (8 rows x 4 inputs); x4(t, g): token t's inputs
// 4 g .. 4 g + 3 in every lane; bias(t): -offset x the sum of its inputs
// (qa.sub_bias). kTileHalves and kTileTokens<Rd>: the prefill tile that
// holds its dots and accumulators in 16 ymm registers.

// vpmaddubsw pairs summed in int16 while they fit, widened by vpmaddwd. A
// pair is at most 2 · kMaxU · 128 in magnitude (activations are int8), and
// the sum must stay within int16: 4-bit u 8 lines, 5-bit 4, 6-bit 2, q2_K
// and q3_K all of a sub-block. The offset-128 types go through the sign
// trick (|u - 128| <= 128): 1 line, and their bias is already in.
struct PairDots {
  template <class Rd>
  static constexpr int kInt16Lines = Rd::kOffset == 128 ? 1 : std::min<int>(8, 32767 / (2 * Rd::kMaxU * 128));

  // One half, and tokens by how the lines sum: 6 where a 32-input
  // sub-block's lines all sum in int16 (4-bit types), 4 for the 16-input
  // ones (q2_K, q3_K), 5 for the sign trick's types (one line a sum), else
  // 3 (a dot per token stays live across the lines). On one Zen 3 core, 512
  // tokens over 2048x768: q4_0 4 -> 6 tokens 1.19x, q8_0 and iq4_xs 3 -> 5
  // 1.11-1.14x; more tokens slowed q2_K, q3_K and the 5-bit types. Both
  // halves against one broadcast (2 tokens) measured no faster
  // (docs/performance.md, "A Zen 3 core").
  static constexpr int kTileHalves = 1;
  template <class Rd>
  static constexpr int kTileTokens = Rd::kOffset == 128                ? 5
                                     : kInt16Lines<Rd> * 4 < Rd::kSubK ? 3
                                     : Rd::kSubK == 32                 ? 6
                                                                       : 4;

  template <class Rd>
  [[gnu::always_inline]] static __m256i pairs(__m256i u, __m256i x4) {
    if constexpr (Rd::kOffset == 128) {
      const __m256i w = _mm256_xor_si256(u, _mm256_set1_epi8(static_cast<char>(0x80)));
      return _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x4, w));
    } else {
      return _mm256_maddubs_epi16(u, x4);
    }
  }

  // The bias joins after the products (integer sums: the same value), so
  // that a type whose lines all sum in int16 keeps no dot live across them.
  // Types without an offset have a bias of 0 and skip it: a broadcast and
  // an add per token and sub-block (q4_K's tile, with 6 tokens: 1.28x).
  template <class Rd, int T, int NH, class Line, class X4, class Bias>
  [[gnu::always_inline]] static void sub_block(Line line, X4 x4, Bias bias, __m256i (&dot)[NH][T]) {
    constexpr int kLines = Rd::kSubK / 4;
    constexpr int kSum = kInt16Lines<Rd>;
    const __m256i ones = _mm256_set1_epi16(1);
    for (int h = 0; h < NH; ++h) {
      for (int g0 = 0; g0 < kLines; g0 += kSum) {
        __m256i sum[T];
        for (int g = g0; g < std::min(g0 + kSum, kLines); ++g) {
          const __m256i u = line(h, g);
          for (int t = 0; t < T; ++t) {
            const __m256i p = pairs<Rd>(u, x4(t, g));
            sum[t] = g == g0 ? p : _mm256_add_epi16(sum[t], p);
          }
        }
        for (int t = 0; t < T; ++t) {
          const __m256i m = _mm256_madd_epi16(sum[t], ones);
          dot[h][t] = g0 == 0 ? m : _mm256_add_epi32(dot[h][t], m);
        }
      }
      if constexpr (Rd::kOffset != 128 && Rd::kOffset != 0) {
        for (int t = 0; t < T; ++t) dot[h][t] = _mm256_add_epi32(dot[h][t], _mm256_set1_epi32(bias(t)));
      }
    }
  }
};

// vpdpbusd on ymm, seeded with the bias, as the zmm VNNI kernels do. Its
// encoding is the translation unit's: VEX with -mavxvnni, else EVEX
// (-mavx512vnni -mavx512vl).
struct Vpdpbusd256 {
  // Both halves against each broadcast input, 3 tokens: 6 dots, 6
  // accumulators, 2 lines and the input in 16 registers (AVX-VNNI has no
  // more). On one Zen 4 core (the EVEX form), 512 tokens over 2048x768 and
  // 768x2048: one half and 4 tokens 161-216 GFLOP/s, 6 tokens 170-241, both
  // halves and 3 tokens 203-287 (docs/performance.md).
  static constexpr int kTileHalves = 2;
  template <class Rd>
  static constexpr int kTileTokens = 3;

  [[gnu::always_inline]] static __m256i dpbusd(__m256i acc, __m256i u, __m256i x4) {
#if defined(__AVXVNNI__)
    return _mm256_dpbusd_avx_epi32(acc, u, x4);
#else
    return _mm256_dpbusd_epi32(acc, u, x4);
#endif
  }

  // Fewer than 4 dots (a decode step's GEMV) over sub-blocks of 32 inputs
  // run odd lines in a second chain, added at the end (integers: the same
  // sum), so that vpdpbusd's latency is not paid 8 lines in a row: 768x768
  // to 2048x768 in L2, 1 token, q4_0 8.6-9.3 -> 7.6-7.6 us / 23.0-23.6 ->
  // 20.2-21.0, q4_K 3% faster, q8_0 even; q6_K (4 lines) 3% slower, so kept
  // at one chain.
  template <class Rd, int T, int NH, class Line, class X4, class Bias>
  [[gnu::always_inline]] static void sub_block(Line line, X4 x4, Bias bias, __m256i (&dot)[NH][T]) {
    constexpr int kLines = Rd::kSubK / 4;
    constexpr int kChains = T * NH < 4 && kLines >= 8 ? 2 : 1;
    __m256i odd[NH][T];
    for (int t = 0; t < T; ++t) {
      const __m256i b = _mm256_set1_epi32(bias(t));
      for (int h = 0; h < NH; ++h) {
        dot[h][t] = b;
        odd[h][t] = _mm256_setzero_si256();
      }
    }
    for (int g = 0; g < kLines; g += kChains) {
      for (int c = 0; c < kChains; ++c) {
        __m256i u[NH];
        for (int h = 0; h < NH; ++h) u[h] = line(h, g + c);
        for (int t = 0; t < T; ++t) {
          const __m256i x = x4(t, g + c);
          for (int h = 0; h < NH; ++h) {
            __m256i& acc = c == 0 ? dot[h][t] : odd[h][t];
            acc = dpbusd(acc, u[h], x);
          }
        }
      }
    }
    if constexpr (kChains == 2) {
      for (int h = 0; h < NH; ++h) {
        for (int t = 0; t < T; ++t) dot[h][t] = _mm256_add_epi32(dot[h][t], odd[h][t]);
      }
    }
  }
};

// ---- Decode: the GEMV over the packed lines ----

// y for tokens [t0, t0 + T) over one group: per sub-block and half-line,
// the integer dot, then one scaling.
template <class Dot, class P, int T>
void gemv_group(const GroupSet<1>& set, const QuantizedActs& qa, int64_t n_in, int64_t t0, int64_t ldy) {
  using Rd = typename P::Reader;
  const uint8_t* group = set.lines[0];
  __m256 acc[2][T];
  for (auto& half : acc) {
    for (auto& a : half) a = _mm256_setzero_ps();
  }
  const int64_t n_units = n_in / P::kUnitK;
  const uintptr_t ahead = packed_gemv_prefetch_ahead();  // as the VNNI GEMV's
  const auto next = ahead != 0 ? ahead : static_cast<uintptr_t>(group_bytes<P>(n_in));
  for (int64_t un = 0; un < n_units; ++un) {
    if constexpr (!P::kPrefetchBySub) P::prefetch_at(group, n_units, un, next);
    for (int j = 0; j < P::kSubs; ++j) {
      if constexpr (P::kPrefetchBySub) P::prefetch_sub(group, un, j, next);
      const int64_t s = un * P::kSubs + j;  // sub-block of the row
      const int64_t k0 = s * Rd::kSubK;
      const int64_t b = k0 / 32;
      auto x4 = [&](int t, int g) {
        int32_t v;
        std::memcpy(&v, qa.q + (t0 + t) * qa.ldq + k0 + 4 * g, sizeof v);
        return _mm256_set1_epi32(v);
      };
      auto bias = [&](int t) { return qa.sub_bias[(t0 + t) * qa.n_sub + s]; };
      auto half = [&]<int H>() {
        using V = Lines256<H>;
        __m256i lines[8];
        P::template lines<V>(group, n_units, un, j, lines);
        __m256i dot[1][T];
        Dot::template sub_block<Rd, T, 1>([&](int, int g) { return lines[g]; }, x4, bias, dot);
        __m256 scale, min;
        P::template scales<V>(group, n_units, un, j, scale, min);
        for (int t = 0; t < T; ++t) {
          const float d = qa.d[(t0 + t) * qa.nb + b];
          acc[H][t] =
              _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[0][t]), _mm256_mul_ps(scale, _mm256_set1_ps(d)), acc[H][t]);
          if constexpr (Rd::kMin) {
            acc[H][t] = _mm256_fmadd_ps(min, _mm256_set1_ps(qa.sub_dsum[(t0 + t) * qa.n_sub + s]), acc[H][t]);
          }
        }
      };
      half.template operator()<0>();
      half.template operator()<1>();
    }
  }
  for (int h = 0; h < 2; ++h) {
    const int64_t rows = std::clamp<int64_t>(set.n_rows[0] - 8 * h, 0, 8);
    for (int t = 0; t < T; ++t) store_first(set.ys[0] + (t0 + t) * ldy + 8 * h, acc[h][t], rows);
  }
}

// Groups [g0, g1), one at a time (one weight stream), every token over each
// in fours while its lines are in L1.
template <class Dot, class P>
void gemv_groups(const uint8_t* packed, const QuantizedActs& qa, float* y, int64_t n_in, int64_t n_out, int64_t g0,
                 int64_t g1) {
  const int64_t stride = group_bytes<P>(n_in);
  for (int64_t g = g0; g < g1; ++g) {
    const GroupSet<1> set(packed, stride, y, n_out, g);
    for (int64_t t0 = 0; t0 < qa.n_tokens; t0 += 4) {
      switch (std::min<int64_t>(4, qa.n_tokens - t0)) {
        case 1: gemv_group<Dot, P, 1>(set, qa, n_in, t0, n_out); break;
        case 2: gemv_group<Dot, P, 2>(set, qa, n_in, t0, n_out); break;
        case 3: gemv_group<Dot, P, 3>(set, qa, n_in, t0, n_out); break;
        default: gemv_group<Dot, P, 4>(set, qa, n_in, t0, n_out); break;
      }
    }
  }
}

// ---- Prefill: each group expanded once into an int8 panel ----

// Group `group` into pn (Int8Panel: its lines as bytes, per-row f32 scale
// and min per sub-block), both halves of each line.
template <class P>
void expand_group(const uint8_t* group, int64_t n_in, Int8Panel& pn) {
  using Rd = typename P::Reader;
  constexpr int kLines = Rd::kSubK / 4;
  const int64_t n_units = n_in / P::kUnitK;
  auto half = [&]<int H>(int64_t un, int j) {
    using V = Lines256<H>;
    const int64_t s = un * P::kSubs + j;
    __m256i lines[8];
    P::template lines<V>(group, n_units, un, j, lines);
    for (int g = 0; g < kLines; ++g) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(pn.u + (s * kLines + g) * 64 + 32 * H), lines[g]);
    }
    __m256 scale, min;
    P::template scales<V>(group, n_units, un, j, scale, min);
    _mm256_store_ps(pn.scale + s * kPanelRows + 8 * H, scale);
    if (pn.min != nullptr) _mm256_store_ps(pn.min + s * kPanelRows + 8 * H, min);
  };
  for (int64_t un = 0; un < n_units; ++un) {
    P::prefetch(group, n_units, un);
    for (int j = 0; j < P::kSubs; ++j) {
      half.template operator()<0>(un, j);
      half.template operator()<1>(un, j);
    }
  }
}

// Tokens [t0, t0 + T) over halves [H0, H0 + NH) of an expanded group:
// gemv_group's arithmetic per token, row and sub-block, with the lines read
// once for the T tokens (line-major), and the accumulators in registers.
template <class Dot, class Rd, int T, int H0, int NH>
void panel_tile(const Int8Panel& pn, const QuantizedActs& qa, int64_t t0, float* y, int64_t ldy, int64_t n_rows) {
  constexpr int kLines = Rd::kSubK / 4;
  __m256 acc[NH][T];
  for (auto& half : acc) {
    for (auto& a : half) a = _mm256_setzero_ps();
  }
  for (int64_t s = 0; s < pn.n_sub; ++s) {
    const uint8_t* lines = pn.u + s * kLines * 64 + 32 * H0;
    const int64_t k0 = s * Rd::kSubK;
    auto line = [&](int h, int g) {
      return _mm256_load_si256(reinterpret_cast<const __m256i*>(lines + 64 * g + 32 * h));
    };
    auto x4 = [&](int t, int g) {
      int32_t v;
      std::memcpy(&v, qa.q + (t0 + t) * qa.ldq + k0 + 4 * g, sizeof v);
      return _mm256_set1_epi32(v);
    };
    auto bias = [&](int t) { return qa.sub_bias[(t0 + t) * qa.n_sub + s]; };
    __m256i dot[NH][T];
    Dot::template sub_block<Rd, T, NH>(line, x4, bias, dot);
    const int64_t b = k0 / 32;
    for (int h = 0; h < NH; ++h) {
      const int64_t r = s * kPanelRows + 8 * (H0 + h);
      const __m256 scale = _mm256_load_ps(pn.scale + r);
      for (int t = 0; t < T; ++t) {
        const __m256 d = _mm256_set1_ps(qa.d[(t0 + t) * qa.nb + b]);
        acc[h][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[h][t]), _mm256_mul_ps(scale, d), acc[h][t]);
        if constexpr (Rd::kMin) {
          const __m256 min = _mm256_load_ps(pn.min + r);
          acc[h][t] = _mm256_fmadd_ps(min, _mm256_set1_ps(qa.sub_dsum[(t0 + t) * qa.n_sub + s]), acc[h][t]);
        }
      }
    }
  }
  for (int h = 0; h < NH; ++h) {
    const int64_t rows = std::clamp<int64_t>(n_rows - 8 * (H0 + h), 0, 8);
    for (int t = 0; t < T; ++t) store_first(y + (t0 + t) * ldy + 8 * (H0 + h), acc[h][t], rows);
  }
}

// The last n < T tokens from t0, as one tile of n.
template <class Dot, class Rd, int T, int H0, int NH>
void panel_tail(const Int8Panel& pn, const QuantizedActs& qa, int64_t t0, int64_t n, float* y, int64_t ldy,
                int64_t n_rows) {
  if constexpr (T > 1) {
    if (n == T - 1) {
      panel_tile<Dot, Rd, T - 1, H0, NH>(pn, qa, t0, y, ldy, n_rows);
    } else {
      panel_tail<Dot, Rd, T - 1, H0, NH>(pn, qa, t0, n, y, ldy, n_rows);
    }
  }
}

// Every token over halves [H0, H0 + NH) of an expanded group, in the
// policy's tiles.
template <class Dot, class Rd, int H0, int NH>
void panel_halves(const Int8Panel& pn, const QuantizedActs& qa, float* y, int64_t ldy, int64_t n_rows) {
  if (n_rows <= 8 * H0) return;
  constexpr int kTile = Dot::template kTileTokens<Rd>;
  int64_t t0 = 0;
  for (; t0 + kTile <= qa.n_tokens; t0 += kTile) panel_tile<Dot, Rd, kTile, H0, NH>(pn, qa, t0, y, ldy, n_rows);
  panel_tail<Dot, Rd, kTile, H0, NH>(pn, qa, t0, qa.n_tokens - t0, y, ldy, n_rows);
}

template <class Dot, class P>
void gemm_groups(const uint8_t* packed, const QuantizedActs& qa, float* y, int64_t n_in, int64_t n_out, int64_t g0,
                 int64_t g1) {
  using Rd = typename P::Reader;
  Int8Panel pn = int8_panel_scratch(n_in, Rd::kSubK, Rd::kOffset, Rd::kMin);
  const int64_t stride = group_bytes<P>(n_in);
  for (int64_t g = g0; g < g1; ++g) {
    expand_group<P>(packed + g * stride, n_in, pn);
    const int64_t n_rows = std::min<int64_t>(kGroupRows, n_out - g * kGroupRows);
    float* yg = y + g * kGroupRows;
    if constexpr (Dot::kTileHalves == 2) {
      panel_halves<Dot, Rd, 0, 2>(pn, qa, yg, n_out, n_rows);
    } else {
      panel_halves<Dot, Rd, 0, 1>(pn, qa, yg, n_out, n_rows);
      panel_halves<Dot, Rd, 1, 1>(pn, qa, yg, n_out, n_rows);
    }
  }
}

// The whole call (int8_packed.hpp's matmul_int8_packed_n for at most
// kMaxPackedOutputs matrices): activations quantized once, the groups of all
// matrices split over the pool.
template <class Dot>
void matmul_packed_256(std::span<const PackedOutput> outs, const float* x, DType t, int64_t n_tokens, int64_t n_in,
                       ThreadPool& pool) {
  const GroupNumbering<kMaxPackedOutputs> groups(outs);
  with_layout(t, [&]<class P>() {
    using Rd = typename P::Reader;
    const QuantizedActs qa = quantize_acts_avx2(x, n_tokens, n_in, Rd::kOffset, Rd::kSubK);
    const bool gemv = n_tokens < kAvx2GemmMinTokens;
    pool.parallel_guided(groups.total(), 2, [&](int64_t j0, int64_t j1) {
      groups.each_part(j0, j1, [&](size_t i, int64_t g0, int64_t g1) {
        const PackedOutput& o = outs[i];
        const auto* bytes = static_cast<const uint8_t*>(o.packed);
        if (gemv) {
          gemv_groups<Dot, P>(bytes, qa, o.y, n_in, o.n_out, g0, g1);
        } else {
          gemm_groups<Dot, P>(bytes, qa, o.y, n_in, o.n_out, g0, g1);
        }
      });
    });
  });
}

}  // namespace
}  // namespace troupe::kernels::detail

// The int8 path over repacked weights (int8_packed.hpp) on CPUs with AVX2
// and no AVX-512 VNNI, over the 16-row groups, each 64-byte line read as two
// 32-byte halves of 8 whole rows. A half-line's products are vpmaddubsw
// pairs summed in int16 as far as int16 holds them, then widened by
// vpmaddwd; the sum per row and sub-block is the integer vpdpbusd gives, and
// its f32 scaling the VNNI GEMV's, lane for lane, so a row's result has
// matmul_packed_vnni.cpp's bits, in decode (the GEMV over the packed lines)
// and prefill (each group expanded once into an int8 panel, then tiles of
// tokens over it) alike.
//
// The GEMV over the weights as stored (matmul_int8_avx2.cpp) streamed DRAM
// at half the packed VNNI GEMV's rate and decoded k-quant scales row by row
// (docs/performance.md, "CPUs without AVX-512").
#include "kernels/cpu/int8_packed.hpp"

#if defined(__x86_64__) || defined(__i386__)

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>

#include "kernels/cpu/matmul_impl.hpp"
#include "kernels/cpu/matmul_int8.hpp"
#include "kernels/cpu/packed_lines_avx2.hpp"
#include "kernels/cpu/int8_packed_layout.hpp"
#include "kernels/cpu/packed_groups.hpp"
#include "kernels/cpu/simd_avx2.hpp"
#include "kernels/cpu/scratch.hpp"

namespace troupe::kernels::detail {
namespace {

using namespace cpu;  // NOLINT: the layouts and line policies of this path

// Lines whose vpmaddubsw pairs are summed in int16 before one vpmaddwd: a
// pair is at most 2 · kMaxU · 128 in magnitude (activations are int8), and the
// sum must stay within int16: 4-bit u 8 lines, 5-bit 4, 6-bit 2, q2_K and q3_K
// all of a sub-block. The offset-128 types go through the sign trick
// (|u - 128| <= 128): 1.
template <class Rd>
constexpr int kInt16Lines = Rd::kOffset == 128 ? 1 : std::min<int>(8, 32767 / (2 * Rd::kMaxU * 128));

// The int16 pairs of one line's u · x (each lane: 2 pairs of its 4 inputs);
// for the offset-128 types (u - 128) · x: the signed weight's magnitude
// against x with the weight's sign, which is their bias already in.
template <class Rd>
[[gnu::always_inline]] inline __m256i pair_dots(__m256i u, __m256i x4) {
  if constexpr (Rd::kOffset == 128) {
    const __m256i w = _mm256_xor_si256(u, _mm256_set1_epi8(static_cast<char>(0x80)));
    return _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x4, w));
  } else {
    return _mm256_maddubs_epi16(u, x4);
  }
}

// y for tokens [t0, t0 + T) over one group: per sub-block and half-line,
// the integer dot seeded with the bias (as vpdpbusd's), then one scaling.
template <class P, int T>
void gemv_group(const GroupSet<1>& set, const QuantizedActs& qa, int64_t n_in, int64_t t0, int64_t ldy) {
  using Rd = typename P::Reader;
  constexpr int kLines = Rd::kSubK / 4;
  constexpr int kSum = kInt16Lines<Rd>;
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
      auto x4 = [&](int t, int g) {  // inputs k0 + 4 g .. k0 + 4 g + 3 of token t0 + t, in every lane
        int32_t v;
        std::memcpy(&v, qa.q + (t0 + t) * qa.ldq + k0 + 4 * g, sizeof v);
        return _mm256_set1_epi32(v);
      };
      auto half = [&]<int H>() {
        using V = Lines256<H>;
        __m256i lines[8];
        P::template lines<V>(group, n_units, un, j, lines);
        __m256i dot[T];
        for (int t = 0; t < T; ++t) {
          dot[t] = Rd::kOffset == 128 ? _mm256_setzero_si256()
                                      : _mm256_set1_epi32(qa.sub_bias[(t0 + t) * qa.n_sub + s]);
        }
        for (int g0 = 0; g0 < kLines; g0 += kSum) {
          for (int t = 0; t < T; ++t) {
            __m256i pairs = pair_dots<Rd>(lines[g0], x4(t, g0));
            for (int g = g0 + 1; g < std::min(g0 + kSum, kLines); ++g) {
              pairs = _mm256_add_epi16(pairs, pair_dots<Rd>(lines[g], x4(t, g)));
            }
            dot[t] = _mm256_add_epi32(dot[t], _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
          }
        }
        __m256 scale, min;
        P::template scales<V>(group, n_units, un, j, scale, min);
        for (int t = 0; t < T; ++t) {
          const float d = qa.d[(t0 + t) * qa.nb + b];
          acc[H][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[t]), _mm256_mul_ps(scale, _mm256_set1_ps(d)), acc[H][t]);
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
template <class P>
void gemv_groups(const uint8_t* packed, const QuantizedActs& qa, float* y, int64_t n_in, int64_t n_out, int64_t g0,
                 int64_t g1) {
  const int64_t stride = group_bytes<P>(n_in);
  for (int64_t g = g0; g < g1; ++g) {
    const GroupSet<1> set(packed, stride, y, n_out, g);
    for (int64_t t0 = 0; t0 < qa.n_tokens; t0 += 4) {
      switch (std::min<int64_t>(4, qa.n_tokens - t0)) {
        case 1: gemv_group<P, 1>(set, qa, n_in, t0, n_out); break;
        case 2: gemv_group<P, 2>(set, qa, n_in, t0, n_out); break;
        case 3: gemv_group<P, 3>(set, qa, n_in, t0, n_out); break;
        default: gemv_group<P, 4>(set, qa, n_in, t0, n_out); break;
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

// Tokens [t0, t0 + T) over half H of an expanded group: gemv_group's
// arithmetic per token, row and sub-block, with the lines read once for the
// T tokens (line-major), and the accumulators of one half in registers.
template <class Rd, int T, int H>
void panel_tile(const Int8Panel& pn, const QuantizedActs& qa, int64_t t0, float* y, int64_t ldy, int64_t rows) {
  constexpr int kLines = Rd::kSubK / 4;
  constexpr int kSum = kInt16Lines<Rd>;
  __m256 acc[T];
  for (auto& a : acc) a = _mm256_setzero_ps();
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t s = 0; s < pn.n_sub; ++s) {
    const uint8_t* lines = pn.u + s * kLines * 64 + 32 * H;
    const int64_t k0 = s * Rd::kSubK;
    // The bias joins after the products (integer sums: the same value), so
    // that a type whose lines all sum in int16 keeps no dot live across them.
    __m256i dot[T];
    for (int g0 = 0; g0 < kLines; g0 += kSum) {
      __m256i pairs[T];
      for (int g = g0; g < std::min(g0 + kSum, kLines); ++g) {
        const __m256i u = _mm256_load_si256(reinterpret_cast<const __m256i*>(lines + 64 * g));
        for (int t = 0; t < T; ++t) {
          int32_t v;
          std::memcpy(&v, qa.q + (t0 + t) * qa.ldq + k0 + 4 * g, sizeof v);
          const __m256i p = pair_dots<Rd>(u, _mm256_set1_epi32(v));
          pairs[t] = g == g0 ? p : _mm256_add_epi16(pairs[t], p);
        }
      }
      for (int t = 0; t < T; ++t) {
        const __m256i m = _mm256_madd_epi16(pairs[t], ones);
        dot[t] = g0 == 0 ? m : _mm256_add_epi32(dot[t], m);
      }
    }
    if constexpr (Rd::kOffset != 128) {
      for (int t = 0; t < T; ++t) {
        dot[t] = _mm256_add_epi32(dot[t], _mm256_set1_epi32(qa.sub_bias[(t0 + t) * qa.n_sub + s]));
      }
    }
    const __m256 scale = _mm256_load_ps(pn.scale + s * kPanelRows + 8 * H);
    const int64_t b = k0 / 32;
    for (int t = 0; t < T; ++t) {
      const __m256 d = _mm256_set1_ps(qa.d[(t0 + t) * qa.nb + b]);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[t]), _mm256_mul_ps(scale, d), acc[t]);
      if constexpr (Rd::kMin) {
        const __m256 min = _mm256_load_ps(pn.min + s * kPanelRows + 8 * H);
        acc[t] = _mm256_fmadd_ps(min, _mm256_set1_ps(qa.sub_dsum[(t0 + t) * qa.n_sub + s]), acc[t]);
      }
    }
  }
  for (int t = 0; t < T; ++t) store_first(y + (t0 + t) * ldy + 8 * H, acc[t], rows);
}

template <class Rd, int H>
void panel_half(const Int8Panel& pn, const QuantizedActs& qa, float* y, int64_t ldy, int64_t n_rows) {
  const int64_t rows = std::clamp<int64_t>(n_rows - 8 * H, 0, 8);
  if (rows == 0) return;
  // Tiles of 4 tokens where a sub-block's lines all sum in int16, else of 3
  // (a dot per token stays live across the lines): registers, not spills.
  constexpr int kTile = kInt16Lines<Rd> * 4 >= Rd::kSubK ? 4 : 3;
  int64_t t0 = 0;
  for (; t0 + kTile <= qa.n_tokens; t0 += kTile) panel_tile<Rd, kTile, H>(pn, qa, t0, y, ldy, rows);
  switch (qa.n_tokens - t0) {
    case 3: panel_tile<Rd, 3, H>(pn, qa, t0, y, ldy, rows); break;
    case 2: panel_tile<Rd, 2, H>(pn, qa, t0, y, ldy, rows); break;
    case 1: panel_tile<Rd, 1, H>(pn, qa, t0, y, ldy, rows); break;
    default: break;
  }
}

template <class P>
void gemm_groups(const uint8_t* packed, const QuantizedActs& qa, float* y, int64_t n_in, int64_t n_out, int64_t g0,
                 int64_t g1) {
  using Rd = typename P::Reader;
  Int8Panel pn = int8_panel_scratch(n_in, Rd::kSubK, Rd::kOffset, Rd::kMin);
  const int64_t stride = group_bytes<P>(n_in);
  for (int64_t g = g0; g < g1; ++g) {
    expand_group<P>(packed + g * stride, n_in, pn);
    const int64_t n_rows = std::min<int64_t>(kGroupRows, n_out - g * kGroupRows);
    panel_half<Rd, 0>(pn, qa, y + g * kGroupRows, n_out, n_rows);
    panel_half<Rd, 1>(pn, qa, y + g * kGroupRows, n_out, n_rows);
  }
}

}  // namespace

void matmul_int8_packed_avx2(std::span<const PackedOutput> outs, const float* x, DType t, int64_t n_tokens,
                             int64_t n_in, ThreadPool& pool) {
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
          gemv_groups<P>(bytes, qa, o.y, n_in, o.n_out, g0, g1);
        } else {
          gemm_groups<P>(bytes, qa, o.y, n_in, o.n_out, g0, g1);
        }
      });
    });
  });
}

}  // namespace troupe::kernels::detail

#endif  // x86

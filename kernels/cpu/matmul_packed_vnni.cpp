// The int8 path over repacked weights (kernels/cpu/int8_packed.hpp) on
// AVX-512 VNNI: decode reads the packed lines directly; prefill on VNNI
// expands a group into an int8 panel and runs the VNNI panel kernel, which
// does the same arithmetic per token; prefill on AMX runs the bf16 expansion
// of int8_packed_prefill_bf16.cpp.
#include "kernels/cpu/int8_packed.hpp"

#if defined(__x86_64__) || defined(__i386__)

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>

#include "core/cpu_features.hpp"
#include "kernels/cpu/bf16_packed.hpp"
#include "kernels/cpu/matmul_int8.hpp"
#include "kernels/cpu/packed_lines_avx512.hpp"
#include "kernels/cpu/simd_avx512.hpp"
#include "kernels/cpu/int8_packed_layout.hpp"
#include "kernels/cpu/packed_groups.hpp"
#include "kernels/cpu/scratch.hpp"

namespace troupe::kernels::detail {
namespace {

using namespace cpu;  // NOLINT: the layouts and SIMD helpers of this path

// ---- Decode: T tokens (1..4) × one group, from the packed lines ----

// The arithmetic per token and sub-block is vnni_panel_tile's (and the int8
// AMX kernel's): an integer dot seeded with the bias, then one scaling.
// G groups side by side (weight streams in flight), T tokens each.
template <class P, int G, int T>
void gemv_group(const uint8_t* const (&groups)[G], const QuantizedActs& qa, int64_t n_in, int64_t t0,
                float* const (&ys)[G], int64_t ldy, const int64_t (&n_rows)[G]) {
  using Rd = typename P::Reader;
  constexpr int kLines = Rd::kSubK / 4;
  static_assert(kLines % 2 == 0 && (!P::kNibbles || kLines == 8));
  __m512 acc[G][T];
  for (int i = 0; i < G; ++i) {
    for (int t = 0; t < T; ++t) acc[i][t] = _mm512_setzero_ps();
  }
  const int64_t n_units = n_in / P::kUnitK;
  // Each of the G streams prefetches the same unit of the group it reads
  // next, G groups on: a fixed distance ahead would mostly name lines the
  // neighbouring stream is reading now. 1B q4_0 and q8_0 GEMV over DRAM,
  // against 24 KiB ahead: +12-16%. A k-quant unit is 37 (q4_K) to 53 (q6_K)
  // lines: its prefetch is spread over its sub-blocks, a few lines each
  // (q4_K GEMV over DRAM: 0.60 of a plain read with every line of a unit
  // prefetched 12 KiB ahead at once, 0.78 spread and a group on).
  // A Zen 4 core wants the opposite: a group on (27-107 KiB for the 1B
  // shapes) the GEMV reads at 0.71-0.85 of a plain read, 4 KiB ahead in its
  // own stream 0.94-1.03 (q4_0, q8_0, q4_K, q6_K; 8, 12 and 32 KiB: between
  // the two, and worse as they grow).
  const uintptr_t ahead = packed_gemv_prefetch_ahead();
  const auto next = ahead != 0 ? ahead : static_cast<uintptr_t>(G * group_bytes<P>(n_in));
  for (int64_t un = 0; un < n_units; ++un) {
    if constexpr (!P::kPrefetchBySub) {
      for (int i = 0; i < G; ++i) P::prefetch_at(groups[i], n_units, un, next);
    }
    for (int j = 0; j < P::kSubs; ++j) {
      if constexpr (P::kPrefetchBySub) {
        for (int i = 0; i < G; ++i) P::prefetch_sub(groups[i], un, j, next);
      }
      const int64_t s = un * P::kSubs + j;  // sub-block of the row
      const int64_t k0 = s * Rd::kSubK;
      const int64_t b = k0 / 32;
      for (int i = 0; i < G; ++i) {
        __m512i dot[T];
        for (int t = 0; t < T; ++t) dot[t] = _mm512_set1_epi32(qa.sub_bias[(t0 + t) * qa.n_sub + s]);
        auto x4 = [&](int t, int g) {  // inputs k0 + 4 g .. k0 + 4 g + 3 of token t0 + t, in every lane
          int32_t v;
          std::memcpy(&v, qa.q + (t0 + t) * qa.ldq + k0 + 4 * g, sizeof v);
          return _mm512_set1_epi32(v);
        };
        if constexpr (P::kNibbles) {
          // The high nibbles stay in place, as 16 × their value (v & 0xf0),
          // in a chain of their own shifted back at the end (exact: each of
          // its products is a multiple of 16). One AND a line instead of a
          // shift and an AND, and two chains of four vpdpbusd, not one of
          // eight: the in-cache 4-bit GEMV was bound by both.
          __m512i raw[4];
          P::template nibble_lines<Lines512>(groups[i], n_units, un, j, raw);
          __m512i high[T];
          for (int t = 0; t < T; ++t) high[t] = _mm512_setzero_si512();
          for (int g = 0; g < 4; ++g) {
            const __m512i low_u = _mm512_and_si512(raw[g], _mm512_set1_epi8(0x0f));
            const __m512i high_u = _mm512_and_si512(raw[g], _mm512_set1_epi8(static_cast<char>(0xf0)));
            for (int t = 0; t < T; ++t) {
              dot[t] = _mm512_dpbusd_epi32(dot[t], low_u, x4(t, g));
              high[t] = _mm512_dpbusd_epi32(high[t], high_u, x4(t, g + 4));
            }
          }
          for (int t = 0; t < T; ++t) dot[t] = _mm512_add_epi32(dot[t], _mm512_srai_epi32(high[t], 4));
        } else {
          __m512i lines[8];
          P::template lines<Lines512>(groups[i], n_units, un, j, lines);
          // Even and odd lines in two chains (half the latency of one).
          __m512i odd[T];
          for (int t = 0; t < T; ++t) odd[t] = _mm512_setzero_si512();
          for (int g = 0; g + 1 < kLines; g += 2) {
            for (int t = 0; t < T; ++t) {
              dot[t] = _mm512_dpbusd_epi32(dot[t], lines[g], x4(t, g));
              odd[t] = _mm512_dpbusd_epi32(odd[t], lines[g + 1], x4(t, g + 1));
            }
          }
          for (int t = 0; t < T; ++t) dot[t] = _mm512_add_epi32(dot[t], odd[t]);
        }
        __m512 scale, min;
        P::template scales<Lines512>(groups[i], n_units, un, j, scale, min);
        for (int t = 0; t < T; ++t) {
          const float d = qa.d[(t0 + t) * qa.nb + b];
          acc[i][t] =
              _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[t]), _mm512_mul_ps(scale, _mm512_set1_ps(d)), acc[i][t]);
          if constexpr (Rd::kMin) {
            acc[i][t] = _mm512_fmadd_ps(min, _mm512_set1_ps(qa.sub_dsum[(t0 + t) * qa.n_sub + s]), acc[i][t]);
          }
        }
      }
    }
  }
  for (int i = 0; i < G; ++i) {
    const __mmask16 m = tail_mask(n_rows[i]);
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(ys[i] + (t0 + t) * ldy, m, acc[i][t]);
  }
}

// G groups from g on, for tokens [t0, t0 + T).
template <class P, int G, int T>
void gemv_at(const uint8_t* packed, int64_t stride, const QuantizedActs& qa, float* y, int64_t n_in, int64_t n_out,
             int64_t g, int64_t t0) {
  const uint8_t* groups[G];
  float* ys[G];
  int64_t n_rows[G];
  for (int i = 0; i < G; ++i) {
    groups[i] = packed + (g + i) * stride;
    ys[i] = y + (g + i) * kGroupRows;
    n_rows[i] = std::min<int64_t>(kGroupRows, n_out - (g + i) * kGroupRows);
  }
  gemv_group<P, G, T>(groups, qa, n_in, t0, ys, n_out, n_rows);
}

// Decode of one token reads one group at a time, each its own stream with
// the next group's prefetch running beside it: 1B GEMV over DRAM on a Zen 5
// core, one token, against four groups side by side (four streams): q4_0
// 26 -> 32 GB/s, q8_0 25 -> 32, q4_K 25 -> 33 (a plain read: 34). Four
// groups stored interleaved as one stream got 27-31. Two tokens read two
// groups side by side (the weights' reads count half as much); a token's
// arithmetic is the same either way.
template <class P, int T>
int64_t gemv_tokens(const uint8_t* packed, int64_t stride, const QuantizedActs& qa, float* y, int64_t n_in,
                    int64_t n_out, int64_t g, int64_t left, int64_t t0) {
  if constexpr (T == 2) {
    if (left >= 2 && qa.n_tokens == 2) {
      gemv_at<P, 2, T>(packed, stride, qa, y, n_in, n_out, g, t0);
      return 2;
    }
  }
  gemv_at<P, 1, T>(packed, stride, qa, y, n_in, n_out, g, t0);
  return 1;
}

template <class P>
void gemv_groups(const uint8_t* packed, const QuantizedActs& qa, float* y, int64_t n_in, int64_t n_out, int64_t g0,
                 int64_t g1) {
  const int64_t stride = group_bytes<P>(n_in);
  for (int64_t g = g0; g < g1;) {
    int64_t step = 1;
    for (int64_t t0 = 0; t0 < qa.n_tokens; t0 += 4) {
      switch (std::min<int64_t>(4, qa.n_tokens - t0)) {
        case 1: step = gemv_tokens<P, 1>(packed, stride, qa, y, n_in, n_out, g, g1 - g, t0); break;
        case 2: step = gemv_tokens<P, 2>(packed, stride, qa, y, n_in, n_out, g, g1 - g, t0); break;
        case 3: step = gemv_tokens<P, 3>(packed, stride, qa, y, n_in, n_out, g, g1 - g, t0); break;
        default: step = gemv_tokens<P, 4>(packed, stride, qa, y, n_in, n_out, g, g1 - g, t0); break;
      }
    }
    g += step;
  }
}

// ---- Prefill: each group expanded into an int8 panel ----

template <class P>
void expand_group(const uint8_t* group, int64_t n_in, Int8Panel& pn) {
  using Rd = typename P::Reader;
  constexpr int kLines = Rd::kSubK / 4;
  const int64_t n_units = n_in / P::kUnitK;
  for (int64_t un = 0; un < n_units; ++un) {
    P::prefetch(group, n_units, un);  // as int8_packed_prefill_bf16.cpp's expansion
    for (int j = 0; j < P::kSubs; ++j) {
      const int64_t s = un * P::kSubs + j;
      __m512i lines[8];
      P::template lines<Lines512>(group, n_units, un, j, lines);
      for (int g = 0; g < kLines; ++g) _mm512_store_si512(pn.u + (s * kLines + g) * 64, lines[g]);
      __m512 scale, min;
      P::template scales<Lines512>(group, n_units, un, j, scale, min);
      _mm512_store_ps(pn.scale + s * kPanelRows, scale);
      if (pn.min != nullptr) _mm512_store_ps(pn.min + s * kPanelRows, min);
    }
  }
}

template <class P>
void gemm_groups(const uint8_t* packed, const QuantizedActs& qa, float* y, int64_t n_in, int64_t n_out, int64_t g0,
                 int64_t g1) {
  using Rd = typename P::Reader;
  Int8Panel pn = int8_panel_scratch(n_in, Rd::kSubK, Rd::kOffset, Rd::kMin);
  const bool amx = amx_enabled();
  const int64_t stride = group_bytes<P>(n_in);
  for (int64_t g = g0; g < g1; ++g) {
    expand_group<P>(packed + g * stride, n_in, pn);
    const int64_t n_rows = std::min<int64_t>(kGroupRows, n_out - g * kGroupRows);
    float* yg = y + g * kGroupRows;
    if (amx && amx_panel(pn, qa, yg, n_out, n_rows)) continue;
    vnni_panel(pn, qa, yg, n_out, n_rows);
  }
}

// Decode's threads take guided chunks of groups (ThreadPool::parallel_guided)
// in multiples of the GEMV's longest step.
constexpr int64_t kDecodeGrain = 2;

}  // namespace

void matmul_int8_packed_vnni(std::span<const PackedOutput> outs, const float* x, DType t, int64_t n_tokens,
                             int64_t n_in, ThreadPool& pool) {
  const bool gemv = n_tokens < kInt8GemmMinTokens;
  const GroupNumbering<kMaxPackedOutputs> groups(outs);
  if (amx_bf16_prefill(n_tokens)) {
    // Prefill on AMX: bf16 activations and weights expanded to bf16
    // (int8_packed_prefill_bf16.cpp). Threads take chunks of up to 1 MiB of
    // expanded groups in turn.
    const Bf16Acts a = round_acts_bf16(x, n_tokens, n_in, pool);
    auto expand = [&](int64_t j0, int64_t j1) {
      groups.each_part(j0, j1, [&](size_t i, int64_t g0, int64_t g1) {
        const PackedOutput& o = outs[i];
        int8_packed_gemm_bf16(static_cast<const uint8_t*>(o.packed), t, a, o.y, n_in, o.n_out, g0, g1);
      });
    };
    pool.parallel_dynamic(groups.total(), amx_thread_grain(groups.total(), n_in, pool.size()), expand);
    return;
  }
  with_layout(t, [&]<class P>() {
    using Rd = typename P::Reader;
    const QuantizedActs qa = quantize_acts(x, n_tokens, n_in, false, Rd::kOffset, Rd::kSubK, &pool);
    pool.parallel_guided(groups.total(), kDecodeGrain, [&](int64_t j0, int64_t j1) {
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

// The int8 path of matmul (matmul_int8.hpp) with AVX-512 VNNI: the decode
// GEMV over weights as stored, and the prefill GEMM over int8 panels
// (vpdpbusd here, AMX tiles in matmul_int8_amx.cpp); the activations are
// quantized in quantize_acts_vnni.cpp.
#include "kernels/cpu/matmul_int8.hpp"

#if defined(__x86_64__) || defined(__i386__)

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "kernels/cpu/int8_readers.hpp"
#include "kernels/cpu/scratch.hpp"
#include "kernels/cpu/simd_avx512.hpp"

namespace troupe::kernels::detail {
namespace {

using namespace cpu;  // NOLINT: the readers and SIMD helpers of this path

size_t round64(size_t n) { return (n + 63) / 64 * 64; }

// ---- Decode: GEMV over T tokens × R rows, weights read as stored ----

// Chunks c and c + 1 of a row (c even) as one 512-bit vector of u and the
// per-lane scale and min; with `two` false only chunk c exists (the upper
// half is zero, and so is the padded activation block it meets).
template <class Rd>
[[gnu::always_inline]] inline void read_pair(const uint8_t* row, int64_t c, bool two, const float* sc, __m512i& u,
                                             __m512& scale, __m512& min) {
  __m256i ua, ub = _mm256_setzero_si256();
  __m256 sa, sb = _mm256_setzero_ps(), ma, mb = _mm256_setzero_ps();
  Rd::chunk(row, c, sc, ua, sa, ma);
  if (two) Rd::chunk(row, c + 1, sc, ub, sb, mb);
  u = _mm512_inserti64x4(_mm512_castsi256_si512(ua), ub, 1);
  scale = _mm512_insertf32x8(_mm512_castps256_ps512(sa), sb, 1);
  min = _mm512_insertf32x8(_mm512_castps256_ps512(ma), mb, 1);
}

// y[t0 + t][r0 + r] for t < T, r < R. The bias lanes fold the offset into
// the integer sum; the min meets d * (the lane's sum of q).
template <class Rd, int T, int R>
void gemv_tile(const MatmulProblem& p, const QuantizedActs& qa, int64_t t0, int64_t r0) {
  const uint8_t* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = p.w + (r0 + r) * p.w_row_bytes;
  __m512 acc[T][R];
  for (int t = 0; t < T; ++t) {
    for (int r = 0; r < R; ++r) acc[t][r] = _mm512_setzero_ps();
  }
  alignas(64) float sc[R][kReaderScales];
  const int64_t n_chunks = p.n_in / 32;
  const int64_t ldl = qa.ldq / kLaneInputs;  // lanes per token
  for (int64_t c = 0; c < n_chunks; c += 2) {
    const bool two = c + 1 < n_chunks;
    __m512i u[R];
    __m512 scale[R], min[R];
    for (int r = 0; r < R; ++r) {
      prefetch_ahead(chunk_addr<Rd>(rows[r], c));
      prepare_at<Rd>(rows[r], c, sc[r]);
      read_pair<Rd>(rows[r], c, two, sc[r], u[r], scale[r], min[r]);
    }
    for (int t = 0; t < T; ++t) {
      const __m512i xq = _mm512_load_si512(qa.q + (t0 + t) * qa.ldq + 32 * c);
      const int64_t l = (t0 + t) * ldl + 8 * c;
      const __m512 xd = _mm512_load_ps(qa.lane_d + l);
      const __m512i bias = Rd::kOffset != 0 ? _mm512_load_si512(qa.lane_bias + l) : _mm512_setzero_si512();
      for (int r = 0; r < R; ++r) {
        const __m512i dot = _mm512_dpbusd_epi32(bias, u[r], xq);
        acc[t][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(scale[r], xd), acc[t][r]);
        if constexpr (Rd::kMin) acc[t][r] = _mm512_fmadd_ps(min[r], _mm512_load_ps(qa.lane_dsum + l), acc[t][r]);
      }
    }
  }
  for (int t = 0; t < T; ++t) {
    __m512 v[8];
    for (int r = 0; r < R; ++r) v[r] = acc[t][r];
    for (int r = R; r < 8; ++r) v[r] = _mm512_setzero_ps();
    _mm256_mask_storeu_ps(p.y + (t0 + t) * p.n_out + r0, static_cast<__mmask8>((1u << R) - 1), reduce8(v));
  }
}

template <class Rd, int T>
void gemv_span(const MatmulProblem& p, const QuantizedActs& qa, int64_t t0, int64_t r0, int64_t r1) {
  constexpr int R = 4;
  int64_t r = r0;
  for (; r + R <= r1; r += R) gemv_tile<Rd, T, R>(p, qa, t0, r);
  for (; r < r1; ++r) gemv_tile<Rd, T, 1>(p, qa, t0, r);
}

template <class Rd>
void gemv_rows(const MatmulProblem& p, const QuantizedActs& qa, int64_t row_begin, int64_t row_end) {
  // Per unit of rows, all token groups: the unit's weights stay in cache for
  // the second and later groups of 4 tokens.
  for (int64_t u0 = row_begin; u0 < row_end; u0 += kMatmulRowUnit) {
    const int64_t u1 = std::min(u0 + kMatmulRowUnit, row_end);
    for (int64_t t0 = 0; t0 < p.n_tokens; t0 += 4) {
      switch (std::min<int64_t>(4, p.n_tokens - t0)) {
        case 1: gemv_span<Rd, 1>(p, qa, t0, u0, u1); break;
        case 2: gemv_span<Rd, 2>(p, qa, t0, u0, u1); break;
        case 3: gemv_span<Rd, 3>(p, qa, t0, u0, u1); break;
        default: gemv_span<Rd, 4>(p, qa, t0, u0, u1); break;
      }
    }
  }
}

// ---- Prefill: panels of 16 rows unpacked to int8, then tokens × 16 rows ----

// Rows [r0, r0 + nr) of W into the panel (rows past nr are zero weights).
template <class Rd>
void build_panel(const MatmulProblem& p, int64_t r0, int64_t nr, Int8Panel& pn) {
  const int64_t n_chunks = p.n_in / 32;
  constexpr int kSubsPerChunk = 32 / Rd::kSubK;
  alignas(64) int32_t lines[kPanelRows][8];  // one chunk of each row: 8 groups of 4 inputs
  alignas(64) float sc[kPanelRows][kReaderScales];
  alignas(32) float scale[8], min[8];
  const __m512i across = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32(8));
  for (int64_t c = 0; c < n_chunks; ++c) {
    for (int64_t i = 0; i < kPanelRows; ++i) {
      float* ps = pn.scale + (c * kSubsPerChunk) * kPanelRows + i;
      float* pm = pn.min != nullptr ? pn.min + (c * kSubsPerChunk) * kPanelRows + i : nullptr;
      if (i >= nr) {
        std::memset(lines[i], 0, sizeof lines[i]);
        for (int k = 0; k < kSubsPerChunk; ++k) {
          ps[k * kPanelRows] = 0.0f;
          if (pm != nullptr) pm[k * kPanelRows] = 0.0f;
        }
        continue;
      }
      const uint8_t* row = p.w + (r0 + i) * p.w_row_bytes;
      prepare_at<Rd>(row, c, sc[i]);
      __m256i u;
      __m256 s, m;
      Rd::chunk(row, c, sc[i], u, s, m);
      _mm256_store_si256(reinterpret_cast<__m256i*>(lines[i]), u);
      _mm256_store_ps(scale, s);
      _mm256_store_ps(min, m);
      for (int k = 0; k < kSubsPerChunk; ++k) {  // lane 4 k starts sub-block k
        ps[k * kPanelRows] = scale[4 * k];
        if (pm != nullptr) pm[k * kPanelRows] = min[4 * k];
      }
    }
    // Transpose: group g of the chunk, across the 16 rows, is one line.
    for (int g = 0; g < 8; ++g) {
      const __m512i line = _mm512_i32gather_epi32(_mm512_add_epi32(across, _mm512_set1_epi32(g)), &lines[0][0], 4);
      _mm512_store_si512(pn.u + (c * 8 + g) * 64, line);
    }
  }
}

// y[t0 + t][0 .. n_rows) for t < TT from one panel, with vpdpbusd: 8 integer
// dot products of 4 inputs per sub-block of 32, then one f32 scaling.
// kGroups = sub_k / 4 is a constant so that its loop unrolls whole: with a
// run-time count GCC moved all TT chains between registers every group, 16
// moves beside 8 vpdpbusd.
template <bool kMin, int TT, int kGroups>
void vnni_panel_tile(const Int8Panel& pn, const QuantizedActs& qa, int64_t t0, float* y, int64_t ldy,
                     int64_t n_rows) {
  __m512 acc[TT];
  for (int t = 0; t < TT; ++t) acc[t] = _mm512_setzero_ps();
  constexpr int64_t groups = kGroups;
  for (int64_t s = 0; s < pn.n_sub; ++s) {
    const int64_t k0 = s * pn.sub_k;
    __m512i dot[TT];
    for (int t = 0; t < TT; ++t) {
      dot[t] = _mm512_set1_epi32(qa.sub_bias[(t0 + t) * qa.n_sub + s]);
    }
    for (int64_t g = 0; g < groups; ++g) {
      const __m512i w = _mm512_load_si512(pn.u + (s * groups + g) * 64);
      for (int t = 0; t < TT; ++t) {
        int32_t x4;
        std::memcpy(&x4, qa.q + (t0 + t) * qa.ldq + k0 + 4 * g, sizeof x4);
        dot[t] = _mm512_dpbusd_epi32(dot[t], w, _mm512_set1_epi32(x4));
      }
    }
    const __m512 scale = _mm512_load_ps(pn.scale + s * kPanelRows);
    const int64_t b = k0 / 32;
    for (int t = 0; t < TT; ++t) {
      const float d = qa.d[(t0 + t) * qa.nb + b];
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[t]), _mm512_mul_ps(scale, _mm512_set1_ps(d)), acc[t]);
      if constexpr (kMin) {
        acc[t] = _mm512_fmadd_ps(_mm512_load_ps(pn.min + s * kPanelRows),
                                 _mm512_set1_ps(qa.sub_dsum[(t0 + t) * qa.n_sub + s]), acc[t]);
      }
    }
  }
  const __mmask16 m = tail_mask(n_rows);
  for (int t = 0; t < TT; ++t) _mm512_mask_storeu_ps(y + (t0 + t) * ldy, m, acc[t]);
}

// acc + u · (the 4 int8 at p, in every lane), with the broadcast in the
// instruction's memory operand. p: 4-byte aligned.
[[gnu::always_inline]] inline __m512i dpbusd_broadcast(__m512i acc, __m512i u, const int8_t* p) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*reinterpret_cast<const int32_t*>(p)));
  return acc;
}

// vnni_panel_tile for a whole tile of kActTile tokens, from qa's tiled copy:
// the same integers and the same order of operations, so the same bits. Each
// input's broadcast is folded into its vpdpbusd ({1to16}), which GCC does not
// do for the intrinsics: a separate vpbroadcastd for every product, 64 more
// instructions a sub-block of 32. kBias: the type has an offset (its bias is
// not 0). Over the 110M shapes on a Zen 4 core, against vnni_panel_tile:
// q8_0 +5-10%, q4_0 +5-15%, q4_K +10-25% (bench_matmul --packed).
template <bool kMin, bool kBias, int kGroups>
void vnni_panel_full_tile(const Int8Panel& pn, const QuantizedActs& qa, int64_t t0, float* y, int64_t ldy,
                          int64_t n_rows) {
  constexpr int TT = kActTile;
  __m512 acc[TT];
  for (int t = 0; t < TT; ++t) acc[t] = _mm512_setzero_ps();
  const int8_t* xq = qa.tile_q + (t0 / TT) * (qa.ldq / kLaneInputs) * TT * kLaneInputs;
  const TileSub* ts = qa.tile_sub + (t0 / TT) * qa.n_sub;
  const uint8_t* wu = pn.u;
  for (int64_t s = 0; s < pn.n_sub; ++s, ++ts) {
    __m512i dot[TT];
    for (int t = 0; t < TT; ++t) dot[t] = kBias ? _mm512_set1_epi32(ts->bias[t]) : _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int g = 0; g < kGroups; ++g) {
      const __m512i w = _mm512_load_si512(wu + g * 64);
      for (int t = 0; t < TT; ++t) {
        dot[t] = dpbusd_broadcast(dot[t], w, xq + (g * TT + t) * kLaneInputs);
      }
    }
    wu += kGroups * 64;
    xq += kGroups * TT * kLaneInputs;
    const __m512 scale = _mm512_load_ps(pn.scale + s * kPanelRows);
    for (int t = 0; t < TT; ++t) {
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[t]), _mm512_mul_ps(scale, _mm512_set1_ps(ts->d[t])), acc[t]);
      if constexpr (kMin) {
        acc[t] = _mm512_fmadd_ps(_mm512_load_ps(pn.min + s * kPanelRows), _mm512_set1_ps(ts->dsum[t]), acc[t]);
      }
    }
  }
  const __mmask16 m = tail_mask(n_rows);
  for (int t = 0; t < TT; ++t) _mm512_mask_storeu_ps(y + (t0 + t) * ldy, m, acc[t]);
}

template <bool kMin, int kGroups>
void vnni_panel_tiles(const Int8Panel& pn, const QuantizedActs& qa, float* y, int64_t ldy, int64_t n_rows) {
  int64_t t0 = 0;
  for (; t0 + kActTile <= qa.n_tokens; t0 += kActTile) {
    if (pn.offset == 0) {
      vnni_panel_full_tile<kMin, false, kGroups>(pn, qa, t0, y, ldy, n_rows);
    } else {
      vnni_panel_full_tile<kMin, true, kGroups>(pn, qa, t0, y, ldy, n_rows);
    }
  }
  for (; t0 + 2 <= qa.n_tokens; t0 += 2) vnni_panel_tile<kMin, 2, kGroups>(pn, qa, t0, y, ldy, n_rows);
  if (t0 < qa.n_tokens) vnni_panel_tile<kMin, 1, kGroups>(pn, qa, t0, y, ldy, n_rows);
}

// Sub-blocks of 32 inputs (the 32-blocks, q4_K, q5_K) or 16 (q2_K, q3_K, q6_K).
template <bool kMin>
void vnni_panel_subs(const Int8Panel& pn, const QuantizedActs& qa, float* y, int64_t ldy, int64_t n_rows) {
  switch (pn.sub_k) {
    case 32: return vnni_panel_tiles<kMin, 8>(pn, qa, y, ldy, n_rows);
    case 16: return vnni_panel_tiles<kMin, 4>(pn, qa, y, ldy, n_rows);
    default: break;
  }
  throw Error(Errc::internal, "vnni_panel: sub-blocks of " + std::to_string(pn.sub_k) + " inputs");
}

template <class Rd>
void gemm_rows(const MatmulProblem& p, const QuantizedActs& qa, int64_t row_begin, int64_t row_end) {
  Int8Panel pn;
  pn.sub_k = Rd::kSubK;
  pn.n_sub = p.n_in / Rd::kSubK;
  pn.offset = Rd::kOffset;
  const size_t u_bytes = round64(static_cast<size_t>(p.n_in) * kPanelRows);
  const size_t f_bytes = round64(static_cast<size_t>(pn.n_sub) * kPanelRows * sizeof(float));
  uint8_t* mem = scratch(Scratch::int8_panel, u_bytes + 2 * f_bytes);
  pn.u = mem;
  pn.scale = reinterpret_cast<float*>(mem + u_bytes);
  pn.min = Rd::kMin ? reinterpret_cast<float*>(mem + u_bytes + f_bytes) : nullptr;
  const bool amx = amx_enabled();
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kPanelRows) {
    const int64_t nr = std::min(kPanelRows, row_end - r0);
    build_panel<Rd>(p, r0, nr, pn);
    if (amx && amx_panel(pn, qa, p.y + r0, p.n_out, nr)) continue;
    vnni_panel(pn, qa, p.y + r0, p.n_out, nr);
  }
}

// Quantizes x once (rows split over the pool) with Rd's offset and
// sub-block, then runs whole row units on every thread.
template <class Rd>
void run_int8(const MatmulProblem& p, ThreadPool& pool) {
  const bool gemv = p.n_tokens < kInt8GemmMinTokens;
  const QuantizedActs qa = quantize_acts(p.x, p.n_tokens, p.n_in, gemv, Rd::kOffset, Rd::kSubK, &pool);
  const int64_t unit = kMatmulRowUnit;
  pool.parallel_for((p.n_out + unit - 1) / unit, [&](int64_t u0, int64_t u1) {
    const int64_t r0 = u0 * unit, r1 = std::min(u1 * unit, p.n_out);
    if (gemv) {
      gemv_rows<Rd>(p, qa, r0, r1);
    } else {
      gemm_rows<Rd>(p, qa, r0, r1);
    }
  });
}

}  // namespace

void vnni_panel(const Int8Panel& pn, const QuantizedActs& qa, float* y, int64_t ldy, int64_t n_rows) {
  if (qa.n_tokens >= kActTile && qa.tile_q == nullptr) {
    throw Error(Errc::internal, "vnni_panel: activations without their tiled copy (a GEMV's)");
  }
  if (pn.min != nullptr) {
    vnni_panel_subs<true>(pn, qa, y, ldy, n_rows);
  } else {
    vnni_panel_subs<false>(pn, qa, y, ldy, n_rows);
  }
}

void matmul_int8(const MatmulProblem& p, ThreadPool& pool) {
  with_reader(p.wtype, [&]<class Rd>() { run_int8<Rd>(p, pool); });
}

}  // namespace troupe::kernels::detail

#endif  // x86

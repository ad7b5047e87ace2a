// The int8 path's decode GEMV for CPUs with AVX2 but no AVX-512 VNNI
// (matmul_int8.hpp): a step's activations quantized to int8 blocks of 32 as
// the VNNI path quantizes them, each lane's dot product of 4 inputs formed
// by vpmaddubsw and vpmaddwd (the sum vpdpbusd gives in one instruction),
// then the VNNI GEMV's f32 scaling, lane for lane and in the same order. So
// a row's result has the same bits as matmul_int8_vnni.cpp's GEMV over the
// weights as stored, on a CPU that runs both.
//
// The f32 GEMV it replaces dequantized every weight to f32: on a Zen 4 core
// forced to AVX2 it decoded 110M q4_K_M at 9% of the read roofline, q4_0 at
// 23%, and llama.cpp's AVX2 build ran 2-5x faster (docs/performance.md).
#include "kernels/cpu/matmul_int8.hpp"

#if defined(__x86_64__) || defined(__i386__)

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/int8_readers.hpp"
#include "kernels/cpu/scratch.hpp"
#include "kernels/cpu/weight_prefetch.hpp"

namespace troupe::kernels::detail {
namespace {

using namespace cpu;  // NOLINT: the readers of this path

size_t round64(size_t n) { return (n + 63) / 64 * 64; }

// A step's activations: q [n_tokens, n_in], d per block of 32 (a chunk, all
// 8 lanes of it) and, per lane of 4 inputs, the sums the VNNI GEMV keeps per
// lane (QuantizedActs::lane_bias, lane_dsum).
struct LaneActs {
  int64_t n_in = 0;
  const int8_t* q = nullptr;
  const float* d = nullptr;            // [n_tokens, n_in / 32]
  const int32_t* lane_bias = nullptr;  // [n_tokens, n_in / 4]: -offset * (sum of the lane's 4 q)
  const float* lane_dsum = nullptr;    // d * (sum of the lane's 4 q)
};

// Block x [32] as quantize_row (matmul_int8_vnni.cpp) quantizes it: q =
// x * (127 / absmax) rounded to nearest even and saturated; returns d =
// absmax / 127.
float quantize_block(const float* x, int8_t* q) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  // vpackssdw / vpacksswb interleave the 128-bit halves: 4-byte groups
  // 0, 4, 1, 5, ... put the 32 bytes back in input order.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  __m256 v[4];
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_loadu_ps(x + 8 * i);
    m = _mm256_max_ps(m, _mm256_and_ps(v[i], abs_mask));
  }
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  const float amax = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
  const __m256 id = _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
  __m256i qi[4];
  for (int i = 0; i < 4; ++i) qi[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], id));
  const __m256i bytes = _mm256_permutevar8x32_epi32(
      _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3])), order);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), bytes);
  return amax / 127.0f;
}

// Each lane's sum of the 4 q of 32 at q: pairs (1s as vpmaddubsw's unsigned
// side), then pairs of pairs.
__m256i lane_sums(const int8_t* q) {
  const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), bytes), _mm256_set1_epi16(1));
}

// Token row x [n_in] quantized, with its lane values for `offset`.
void quantize_token(const float* x, int64_t n_in, int32_t offset, int8_t* q, float* d, int32_t* lane_bias,
                    float* lane_dsum) {
  for (int64_t b = 0; b < n_in / 32; ++b) {
    d[b] = quantize_block(x + 32 * b, q + 32 * b);
    const __m256i sums = lane_sums(q + 32 * b);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(lane_bias + 8 * b),
                        _mm256_mullo_epi32(sums, _mm256_set1_epi32(-offset)));
    _mm256_storeu_ps(lane_dsum + 8 * b, _mm256_mul_ps(_mm256_set1_ps(d[b]), _mm256_cvtepi32_ps(sums)));
  }
}

LaneActs quantize_step(const float* x, int64_t n_tokens, int64_t n_in, int32_t offset) {
  const size_t q_bytes = round64(static_cast<size_t>(n_tokens * n_in));
  const size_t d_bytes = round64(static_cast<size_t>(n_tokens * n_in / 32) * 4);
  const size_t l_bytes = round64(static_cast<size_t>(n_tokens * n_in / 4) * 4);
  uint8_t* mem = scratch(Scratch::int8_acts, q_bytes + d_bytes + 2 * l_bytes);
  auto* q = reinterpret_cast<int8_t*>(mem);
  auto* d = reinterpret_cast<float*>(mem + q_bytes);
  auto* lane_bias = reinterpret_cast<int32_t*>(mem + q_bytes + d_bytes);
  auto* lane_dsum = reinterpret_cast<float*>(mem + q_bytes + d_bytes + l_bytes);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t l = t * n_in / 4;
    quantize_token(x + t * n_in, n_in, offset, q + t * n_in, d + t * n_in / 32, lane_bias + l, lane_dsum + l);
  }
  return {.n_in = n_in, .q = q, .d = d, .lane_bias = lane_bias, .lane_dsum = lane_dsum};
}

// Each lane's bias + u · x over its 4 inputs (vpdpbusd's result): vpmaddubsw
// sums pairs in int16, at most 2 · 63 · 127 for every reader with an offset
// below 128. The offset-128 readers' u reach 255, where a pair could pass
// int16; for them the signed weight w = u - 128 takes x's sign onto |w|
// (|w| <= 128, so a pair stays within 2 · 128 · 127), which is
// -128 · (sum of x), their bias, already in.
template <class Rd>
[[gnu::always_inline]] inline __m256i lane_dots(__m256i u, __m256i xq, const int32_t* bias) {
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (Rd::kOffset == 128) {
    const __m256i w = _mm256_xor_si256(u, _mm256_set1_epi8(static_cast<char>(0x80)));
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(xq, w)), ones);
  } else {
    const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(u, xq), ones);
    if constexpr (Rd::kOffset == 0) return dot;
    return _mm256_add_epi32(dot, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bias)));
  }
}

// The VNNI GEMV's 16-lane sum (reduce8), from its even-chunk lanes (0..7)
// and odd-chunk lanes (8..15): ((w0 + w2) + (w1 + w3)) with
// w = (even + odd).low128 + (even + odd).high128.
inline float lane_sum(__m256 even, __m256 odd) {
  const __m256 s = _mm256_add_ps(even, odd);
  const __m128 w = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  const __m128 r = _mm_add_ps(w, _mm_movehl_ps(w, w));
  return _mm_cvtss_f32(_mm_add_ss(r, _mm_movehdup_ps(r)));
}

// y[t0 + t][r0 + r] for t < T, r < R. Even and odd chunks accumulate apart,
// as the VNNI GEMV's two halves of a 512-bit pair do.
template <class Rd, int T, int R>
void gemv_tile(const MatmulProblem& p, const LaneActs& a, int64_t t0, int64_t r0) {
  const uint8_t* rows[R];
  for (int r = 0; r < R; ++r) rows[r] = p.w + (r0 + r) * p.w_row_bytes;
  __m256 acc[2][T][R];
  for (auto& half : acc) {
    for (auto& tok : half) {
      for (auto& v : tok) v = _mm256_setzero_ps();
    }
  }
  alignas(32) float sc[R][kReaderScales];
  const int64_t ldl = a.n_in / 4;
  auto chunk = [&]<int H>(int64_t c) {
    for (int r = 0; r < R; ++r) {
      if constexpr (H == 0) prefetch_ahead(chunk_addr<Rd>(rows[r], c));
      prepare_at<Rd>(rows[r], c, sc[r]);
      __m256i u;
      __m256 scale, min;
      Rd::chunk(rows[r], c, sc[r], u, scale, min);
      for (int t = 0; t < T; ++t) {
        const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q + (t0 + t) * a.n_in + 32 * c));
        const int64_t l = (t0 + t) * ldl + 8 * c;
        const __m256i dot = lane_dots<Rd>(u, xq, a.lane_bias + l);
        const __m256 d = _mm256_set1_ps(a.d[(t0 + t) * (a.n_in / 32) + c]);
        acc[H][t][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(scale, d), acc[H][t][r]);
        if constexpr (Rd::kMin) acc[H][t][r] = _mm256_fmadd_ps(min, _mm256_loadu_ps(a.lane_dsum + l), acc[H][t][r]);
      }
    }
  };
  const int64_t n_chunks = p.n_in / 32;
  int64_t c = 0;
  for (; c + 1 < n_chunks; c += 2) {
    chunk.template operator()<0>(c);
    chunk.template operator()<1>(c + 1);
  }
  if (c < n_chunks) chunk.template operator()<0>(c);
  for (int t = 0; t < T; ++t) {
    for (int r = 0; r < R; ++r) p.y[(t0 + t) * p.n_out + r0 + r] = lane_sum(acc[0][t][r], acc[1][t][r]);
  }
}

// Rows per tile for T tokens: the accumulators (2 T R) and a chunk's
// temporaries within 16 ymm registers.
template <int T>
constexpr int kTileRows = T == 1 ? 4 : T == 2 ? 2 : 1;

template <class Rd, int T>
void gemv_span(const MatmulProblem& p, const LaneActs& a, int64_t t0, int64_t r0, int64_t r1) {
  constexpr int R = kTileRows<T>;
  int64_t r = r0;
  for (; r + R <= r1; r += R) gemv_tile<Rd, T, R>(p, a, t0, r);
  for (; r < r1; ++r) gemv_tile<Rd, T, 1>(p, a, t0, r);
}

template <class Rd>
void run(const MatmulProblem& p, ThreadPool& pool) {
  const LaneActs a = quantize_step(p.x, p.n_tokens, p.n_in, Rd::kOffset);
  const int64_t unit = kMatmulRowUnit;
  pool.parallel_for((p.n_out + unit - 1) / unit, [&](int64_t u0, int64_t u1) {
    const int64_t row_end = std::min(u1 * unit, p.n_out);
    // Per unit of rows, every group of 4 tokens: the unit's weights stay in
    // cache for the second and later groups.
    for (int64_t r0 = u0 * unit; r0 < row_end; r0 += unit) {
      const int64_t r1 = std::min(r0 + unit, row_end);
      for (int64_t t0 = 0; t0 < p.n_tokens; t0 += 4) {
        switch (std::min<int64_t>(4, p.n_tokens - t0)) {
          case 1: gemv_span<Rd, 1>(p, a, t0, r0, r1); break;
          case 2: gemv_span<Rd, 2>(p, a, t0, r0, r1); break;
          case 3: gemv_span<Rd, 3>(p, a, t0, r0, r1); break;
          default: gemv_span<Rd, 4>(p, a, t0, r0, r1); break;
        }
      }
    }
  });
}

}  // namespace

QuantizedActs quantize_acts_avx2(const float* x, int64_t n_tokens, int64_t n_in, int32_t offset, int64_t sub_k) {
  QuantizedActs qa = act_sizes(n_tokens, n_in, sub_k);
  const size_t q_bytes = round64(static_cast<size_t>(n_tokens * qa.ldq));
  const size_t d_bytes = round64(static_cast<size_t>(n_tokens * qa.nb) * sizeof(float));
  const size_t s_bytes = round64(static_cast<size_t>(n_tokens * qa.n_sub) * 4);
  uint8_t* mem = scratch(Scratch::int8_acts, q_bytes + d_bytes + 2 * s_bytes);
  auto* q = reinterpret_cast<int8_t*>(mem);
  auto* d = reinterpret_cast<float*>(mem + q_bytes);
  auto* sub_bias = reinterpret_cast<int32_t*>(mem + q_bytes + d_bytes);
  auto* sub_dsum = reinterpret_cast<float*>(mem + q_bytes + d_bytes + s_bytes);
  const int64_t lanes_per_sub = sub_k / 4;
  for (int64_t t = 0; t < n_tokens; ++t) {
    int8_t* qt = q + t * qa.ldq;
    float* dt = d + t * qa.nb;
    std::fill(qt + n_in, qt + qa.ldq, int8_t{0});
    std::fill(dt + n_in / 32, dt + qa.nb, 0.0f);
    for (int64_t b = 0; b < n_in / 32; ++b) dt[b] = quantize_block(x + t * n_in + 32 * b, qt + 32 * b);
    for (int64_t k = 0; k < qa.n_sub; ++k) {
      int32_t sum = 0;
      if (k * sub_k < n_in) {
        alignas(32) int32_t lanes[8];
        _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), lane_sums(qt + k * sub_k / 32 * 32));
        const int64_t l0 = (k * sub_k % 32) / 4;
        for (int64_t l = l0; l < l0 + lanes_per_sub; ++l) sum += lanes[l];
      }
      sub_bias[t * qa.n_sub + k] = -offset * sum;
      sub_dsum[t * qa.n_sub + k] = dt[k * sub_k / 32] * static_cast<float>(sum);
    }
  }
  qa.q = q;
  qa.d = d;
  qa.sub_bias = sub_bias;
  qa.sub_dsum = sub_dsum;
  return qa;
}

void matmul_int8_avx2(const MatmulProblem& p, ThreadPool& pool) {
  with_reader(p.wtype, [&]<class Rd>() { run<Rd>(p, pool); });
}

}  // namespace troupe::kernels::detail

#endif  // x86

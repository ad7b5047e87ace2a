// Matmul on AVX2 over the f32 layout (f32_packed.hpp) and the 16-bit layout
// of f16 and bf16 weights (half_packed.hpp): each input's 16 rows read as
// two halves of 8, widened to f32, times the broadcast input. The chains and
// tiles are the AVX-512 f32 kernels' (matmul_packed_f32_avx512.cpp), lane for
// lane, so the f32 layout gives their bits on either ISA.
//
// Before these, AVX2 read f16, bf16 and f32 rows as stored, four at a time,
// and decoded a 110M model at 0.48-0.85x of llama.cpp's AVX2 build
// (docs/performance.md, "CPUs without AVX-512").
#include "kernels/cpu/f32_packed.hpp"
#include "kernels/cpu/half_packed.hpp"

#if defined(__x86_64__) || defined(__i386__)

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/cpu_features.hpp"
#include "kernels/cpu/packed_groups.hpp"
#include "kernels/cpu/simd_avx2.hpp"
#include "kernels/cpu/weight_prefetch.hpp"
#include "kernels/cpu/x86_intrinsics.hpp"

namespace troupe::kernels::detail {
namespace {

// Input k's rows 8 h .. 8 h + 7 of a group, as f32, in each layout.
struct F32Runs {
  static constexpr int64_t kInputBytes = 64;
  [[gnu::always_inline]] static __m256 rows(const uint8_t* group, int64_t k, int h) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(group + k * kInputBytes + 32 * h));
  }
};
struct F16Runs {
  static constexpr int64_t kInputBytes = 32;
  [[gnu::always_inline]] static __m256 rows(const uint8_t* group, int64_t k, int h) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(group + k * kInputBytes + 16 * h)));
  }
};
struct Bf16Runs {
  static constexpr int64_t kInputBytes = 32;
  [[gnu::always_inline]] static __m256 rows(const uint8_t* group, int64_t k, int h) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(group + k * kInputBytes + 16 * h));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
  }
};

// ---- decode: one token over one group, four chains an output ----

constexpr int kChains = 4;  // inputs k mod 4, summed (0 + 1) + (2 + 3)

template <class L>
void dot_token(const uint8_t* group, const float* x, int64_t n_in, float* y, int64_t n_rows) {
  __m256 acc[2][kChains];
  for (auto& half : acc) {
    for (auto& a : half) a = _mm256_setzero_ps();
  }
  auto step = [&](int64_t k, int c) {
    const __m256 xb = _mm256_set1_ps(x[k]);
    acc[0][c] = _mm256_fmadd_ps(L::rows(group, k, 0), xb, acc[0][c]);
    acc[1][c] = _mm256_fmadd_ps(L::rows(group, k, 1), xb, acc[1][c]);
  };
  int64_t k = 0;
  for (; k + kChains <= n_in; k += kChains) {
    for (int64_t b = 0; b < kChains * L::kInputBytes; b += 64) cpu::prefetch_ahead(group + k * L::kInputBytes + b);
#pragma GCC unroll 4
    for (int c = 0; c < kChains; ++c) step(k + c, c);
  }
  for (; k < n_in; ++k) step(k, static_cast<int>(k % kChains));
  for (int h = 0; h < 2; ++h) {
    const __m256 sum = _mm256_add_ps(_mm256_add_ps(acc[h][0], acc[h][1]), _mm256_add_ps(acc[h][2], acc[h][3]));
    cpu::store_first(y + 8 * h, sum, std::clamp<int64_t>(n_rows - 8 * h, 0, 8));
  }
}

// The decode kernel for dot_range (packed_groups.hpp): each token alone, so
// its bits do not depend on the tokens beside it.
template <class L>
struct DotKernels {
  const float* x;
  int64_t n_in, ldy;
  template <int G, int T>
  void dot(const GroupSet<G>& s, int64_t t0) const {
    for (int i = 0; i < G; ++i) {
      for (int t = 0; t < T; ++t) {
        dot_token<L>(s.lines[i], x + (t0 + t) * n_in, n_in, s.ys[i] + (t0 + t) * ldy, s.n_rows[i]);
      }
    }
  }
};

// ---- prefill: T tokens (up to 4) over one group, one chain an output ----

// Both halves of each input's rows against each broadcast input: 8
// accumulators at T = 4, the FMAs setting the pace.
template <class L, int T>
void gemm_tile(const uint8_t* group, const float* x, int64_t n_in, int64_t t0, float* y, int64_t ldy,
               int64_t n_rows) {
  __m256 acc[2][T];
  for (auto& half : acc) {
    for (auto& a : half) a = _mm256_setzero_ps();
  }
  const float* xt = x + t0 * n_in;
  for (int64_t k = 0; k < n_in; ++k) {
    const __m256 w0 = L::rows(group, k, 0), w1 = L::rows(group, k, 1);
    for (int t = 0; t < T; ++t) {
      const __m256 xb = _mm256_set1_ps(xt[t * n_in + k]);
      acc[0][t] = _mm256_fmadd_ps(w0, xb, acc[0][t]);
      acc[1][t] = _mm256_fmadd_ps(w1, xb, acc[1][t]);
    }
  }
  for (int h = 0; h < 2; ++h) {
    const int64_t rows = std::clamp<int64_t>(n_rows - 8 * h, 0, 8);
    for (int t = 0; t < T; ++t) cpu::store_first(y + (t0 + t) * ldy + 8 * h, acc[h][t], rows);
  }
}

// Every token over groups [g0, g1), a group at a time (its lines stay in L2
// while the tiles go past).
template <class L>
void gemm_groups(const uint8_t* packed, int64_t stride, const float* x, float* y, int64_t n_tokens, int64_t n_in,
                 int64_t n_out, int64_t g0, int64_t g1) {
  for (int64_t g = g0; g < g1; ++g) {
    const uint8_t* group = packed + g * stride;
    float* yg = y + g * kPackedGroupRows;
    const int64_t n_rows = std::min(kPackedGroupRows, n_out - g * kPackedGroupRows);
    int64_t t0 = 0;
    for (; t0 + 4 <= n_tokens; t0 += 4) gemm_tile<L, 4>(group, x, n_in, t0, yg, n_out, n_rows);
    switch (n_tokens - t0) {
      case 3: gemm_tile<L, 3>(group, x, n_in, t0, yg, n_out, n_rows); break;
      case 2: gemm_tile<L, 2>(group, x, n_in, t0, yg, n_out, n_rows); break;
      case 1: gemm_tile<L, 1>(group, x, n_in, t0, yg, n_out, n_rows); break;
      default: break;
    }
  }
}

template <class L>
void run(float* y, const float* x, const void* packed, int64_t n_tokens, int64_t n_in, int64_t n_out,
         int64_t stride, ThreadPool& pool) {
  const auto* bytes = static_cast<const uint8_t*>(packed);
  // Threads take guided chunks of groups (ThreadPool::parallel_guided).
  if (n_tokens >= kFloatGemmMinTokens && !batch_invariant()) {
    pool.parallel_guided(n_packed_groups(n_out), 2, [&](int64_t g0, int64_t g1) {
      gemm_groups<L>(bytes, stride, x, y, n_tokens, n_in, n_out, g0, g1);
    });
    return;
  }
  const DotKernels<L> k{.x = x, .n_in = n_in, .ldy = n_out};
  pool.parallel_guided(n_packed_groups(n_out), 2, [&](int64_t g0, int64_t g1) {
    dot_range(k, bytes, stride, y, n_tokens, n_out, g0, g1);
  });
}

}  // namespace

void matmul_f32_packed_avx2(float* y, const float* x, const void* packed, int64_t n_tokens, int64_t n_in,
                            int64_t n_out, ThreadPool& pool) {
  run<F32Runs>(y, x, packed, n_tokens, n_in, n_out, f32_group_bytes(n_in), pool);
}

void matmul_half_packed_avx2(float* y, const float* x, const void* packed, DType t, int64_t n_tokens, int64_t n_in,
                             int64_t n_out, ThreadPool& pool) {
  if (t == DType::bf16) {
    run<Bf16Runs>(y, x, packed, n_tokens, n_in, n_out, half_group_bytes(n_in), pool);
  } else {
    run<F16Runs>(y, x, packed, n_tokens, n_in, n_out, half_group_bytes(n_in), pool);
  }
}

}  // namespace troupe::kernels::detail

#endif  // x86

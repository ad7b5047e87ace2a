// Matmul over f32 weights repacked in lines of 16 rows (f32_packed.hpp) on
// AVX-512: FMAs of a broadcast input with a line of 16 rows. Built with
// -mavx512f and run only where the CPU has it (f32_packed.cpp chooses).
#include "kernels/cpu/f32_packed.hpp"

#if defined(__x86_64__) || defined(__i386__)

#include <algorithm>
#include <cstdint>

#include "core/cpu_features.hpp"
#include "kernels/cpu/packed_groups.hpp"
#include "kernels/cpu/simd_avx512.hpp"

namespace troupe::kernels::detail {
namespace {

inline __m512 line(const uint8_t* group, int64_t k) {
  return _mm512_load_ps(reinterpret_cast<const float*>(group + k * 64));
}

// ---- decode: T tokens (1..2) × G groups (1..2) ----

// Four chains per output (inputs k mod 4), summed in a fixed order: enough
// in flight for one token, and a token's bits do not depend on T or G.
constexpr int kChains = 4;

template <int G, int T>
void dot_groups(const GroupSet<G>& s, const float* x, int64_t n_in, int64_t t0, int64_t ldy) {
  __m512 acc[G][T][kChains];
  for (int i = 0; i < G; ++i) {
    for (int t = 0; t < T; ++t) {
      for (int c = 0; c < kChains; ++c) acc[i][t][c] = _mm512_setzero_ps();
    }
  }
  const float* xt = x + t0 * n_in;
  auto step = [&](int64_t k, int c) {
    for (int i = 0; i < G; ++i) {
      const __m512 w = line(s.lines[i], k);
      for (int t = 0; t < T; ++t) acc[i][t][c] = _mm512_fmadd_ps(w, _mm512_set1_ps(xt[t * n_in + k]), acc[i][t][c]);
    }
  };
  int64_t k = 0;
  for (; k + kChains <= n_in; k += kChains) {
    for (int i = 0; i < G; ++i) {
      for (int c = 0; c < kChains; ++c) cpu::prefetch_ahead(s.lines[i] + (k + c) * 64);
    }
#pragma GCC unroll 4
    for (int c = 0; c < kChains; ++c) step(k + c, c);
  }
  for (; k < n_in; ++k) step(k, static_cast<int>(k % kChains));
  for (int i = 0; i < G; ++i) {
    const __mmask16 m = cpu::tail_mask(s.n_rows[i]);
    for (int t = 0; t < T; ++t) {
      const __m512 sum = _mm512_add_ps(_mm512_add_ps(acc[i][t][0], acc[i][t][1]),
                                       _mm512_add_ps(acc[i][t][2], acc[i][t][3]));
      _mm512_mask_storeu_ps(s.ys[i] + (t0 + t) * ldy, m, sum);
    }
  }
}

// ---- prefill: T tokens (up to 8) × G groups (1..3), one chain an output ----

// Each line loaded serves T tokens and each broadcast input G groups: 24
// accumulators at T = 8, G = 3, so the FMAs, not the loads, set the pace.
template <int G, int T>
void gemm_tile(const GroupSet<G>& s, const float* x, int64_t n_in, int64_t t0, int64_t ldy) {
  __m512 acc[G][T];
  for (int i = 0; i < G; ++i) {
    for (int t = 0; t < T; ++t) acc[i][t] = _mm512_setzero_ps();
  }
  const float* xt = x + t0 * n_in;
  for (int64_t k = 0; k < n_in; ++k) {
    __m512 w[G];
    for (int i = 0; i < G; ++i) w[i] = line(s.lines[i], k);
    for (int t = 0; t < T; ++t) {
      const __m512 xb = _mm512_set1_ps(xt[t * n_in + k]);
      for (int i = 0; i < G; ++i) acc[i][t] = _mm512_fmadd_ps(w[i], xb, acc[i][t]);
    }
  }
  for (int i = 0; i < G; ++i) {
    const __mmask16 m = cpu::tail_mask(s.n_rows[i]);
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(s.ys[i] + (t0 + t) * ldy, m, acc[i][t]);
  }
}

// The kernels above for detail::dot_range and detail::gemm_split.
struct F32Kernels {
  const float* x;
  int64_t n_in, ldy;
  template <int G, int T>
  void dot(const GroupSet<G>& s, int64_t t0) const {
    dot_groups<G, T>(s, x, n_in, t0, ldy);
  }
  template <int G, int T>
  void gemm(const GroupSet<G>& s, int64_t t0) const {
    gemm_tile<G, T>(s, x, n_in, t0, ldy);
  }
};

}  // namespace

void matmul_f32_packed_avx512(float* y, const float* x, const void* packed, int64_t n_tokens, int64_t n_in,
                              int64_t n_out, ThreadPool& pool) {
  const auto* bytes = static_cast<const uint8_t*>(packed);
  const int64_t stride = f32_group_bytes(n_in);
  // Threads take guided chunks of groups (ThreadPool::parallel_guided).
  const F32Kernels k{.x = x, .n_in = n_in, .ldy = n_out};
  if (n_tokens >= kFloatGemmMinTokens && !batch_invariant()) {
    gemm_split(k, pool, bytes, stride, y, n_tokens, n_out);
    return;
  }
  pool.parallel_guided(n_packed_groups(n_out), 2, [&](int64_t g0, int64_t g1) {
    dot_range(k, bytes, stride, y, n_tokens, n_out, g0, g1);
  });
}

}  // namespace troupe::kernels::detail

#endif  // x86

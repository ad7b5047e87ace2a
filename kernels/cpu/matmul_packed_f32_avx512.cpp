// Repacking of f32 weights and matmul over them (kernels/cpu/f32_packed.hpp):
// FMAs of a broadcast input with a line of 16 rows. Built with -mavx512f and
// run only where the CPU has it.
#include "kernels/cpu/f32_packed.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/cpu_features.hpp"
#include "core/error.hpp"

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

#include "kernels/cpu/packed_groups.hpp"
#include "kernels/cpu/simd_avx512.hpp"

namespace troupe::kernels {
namespace {

using detail::GroupSet;
using detail::kPackedGroupRows;

int64_t group_bytes(int64_t n_in) { return n_in * 64; }  // a line per input
int64_t n_groups(int64_t n_out) { return (n_out + kPackedGroupRows - 1) / kPackedGroupRows; }

// w is read a float at a time through memcpy: safetensors data may sit at
// any address.
void pack_groups(uint8_t* dst, const uint8_t* w, int64_t n_in, int64_t n_out, int64_t g0, int64_t g1) {
  for (int64_t g = g0; g < g1; ++g) {
    auto* out = reinterpret_cast<float*>(dst + g * group_bytes(n_in));
    std::fill(out, out + n_in * kPackedGroupRows, 0.0f);
    const int64_t nr = std::min(kPackedGroupRows, n_out - g * kPackedGroupRows);
    for (int64_t r = 0; r < nr; ++r) {
      const uint8_t* row = w + (g * kPackedGroupRows + r) * n_in * 4;
      for (int64_t k = 0; k < n_in; ++k) std::memcpy(out + k * kPackedGroupRows + r, row + 4 * k, 4);
    }
  }
}

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

// From this many tokens on, the prefill tiles (as the bf16 path).
constexpr int64_t kGemmMinTokens = 16;

}  // namespace

bool f32_packing_available() { return isa_supported(Isa::avx512); }

int64_t f32_packed_bytes(int64_t n_in, int64_t n_out) { return n_groups(n_out) * group_bytes(n_in); }

void pack_f32(void* dst, const float* w, int64_t n_in, int64_t n_out, ThreadPool& pool) {
  if (!f32_packing_available()) throw Error(Errc::unsupported, "f32 repacking needs AVX-512");
  if (n_in <= 0 || n_out <= 0) {
    throw Error(Errc::invalid_argument,
                "f32 repacking: bad shape [" + std::to_string(n_out) + ", " + std::to_string(n_in) + "]");
  }
  pool.parallel_for(n_groups(n_out), [&](int64_t g0, int64_t g1) {
    pack_groups(static_cast<uint8_t*>(dst), reinterpret_cast<const uint8_t*>(w), n_in, n_out, g0, g1);
  });
}

void matmul_f32_packed(float* y, const float* x, const void* packed, int64_t n_tokens, int64_t n_in, int64_t n_out,
                       ThreadPool& pool) {
  if (n_tokens <= 0 || n_out <= 0) return;
  const auto* bytes = static_cast<const uint8_t*>(packed);
  const int64_t stride = group_bytes(n_in);
  // Threads take guided chunks of groups (ThreadPool::parallel_guided).
  const F32Kernels k{.x = x, .n_in = n_in, .ldy = n_out};
  if (n_tokens >= kGemmMinTokens && !batch_invariant()) {
    detail::gemm_split(k, pool, bytes, stride, y, n_tokens, n_out);
    return;
  }
  pool.parallel_guided(n_groups(n_out), 2, [&](int64_t g0, int64_t g1) {
    detail::dot_range(k, bytes, stride, y, n_tokens, n_out, g0, g1);
  });
}

}  // namespace troupe::kernels

#else  // not x86: the packed f32 path does not exist

namespace troupe::kernels {

bool f32_packing_available() { return false; }
int64_t f32_packed_bytes(int64_t, int64_t) { return 0; }
void pack_f32(void*, const float*, int64_t, int64_t, ThreadPool&) {
  throw Error(Errc::unsupported, "f32 repacking needs x86 AVX-512");
}
void matmul_f32_packed(float*, const float*, const void*, int64_t, int64_t, int64_t, ThreadPool&) {
  throw Error(Errc::unsupported, "packed f32 matmul needs x86 AVX-512");
}

}  // namespace troupe::kernels

#endif  // x86

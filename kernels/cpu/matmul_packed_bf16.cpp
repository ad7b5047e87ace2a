// Repacking of f16/bf16 weights for the bf16 path and matmul over them
// (kernels/cpu/bf16_packed.hpp): the activations are rounded to bf16 once
// per call; decode (and prefill without AMX) reads the packed lines with
// vdpbf16ps, prefill with AMX runs matmul_bf16_amx.cpp. Built with
// -mavx512bf16 and run only where the CPU has it.
#include "kernels/cpu/bf16_packed.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/cpu_features.hpp"
#include "core/error.hpp"

#if defined(__x86_64__) || defined(__i386__)

#include <cstring>

#include "kernels/cpu/packed_groups.hpp"
#include "kernels/cpu/scratch.hpp"
#include "kernels/cpu/simd_avx512.hpp"

namespace troupe::kernels {
namespace {

using detail::Bf16Acts;
using detail::GroupSet;
using detail::kBf16GroupRows;
using detail::kBf16KPad;
using detail::kBf16TokenPad;
static_assert(kBf16GroupRows == detail::kPackedGroupRows);

int64_t k_padded(int64_t n_in) { return (n_in + kBf16KPad - 1) / kBf16KPad * kBf16KPad; }
// One 64-byte line per pair of inputs.
int64_t group_bytes(int64_t n_in) { return k_padded(n_in) / 2 * 64; }
int64_t n_groups(int64_t n_out) { return (n_out + kBf16GroupRows - 1) / kBf16GroupRows; }

// 16 floats rounded to bf16 (nearest even), as 16 × u16.
inline __m256i to_bf16(__m512 v) { return reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)); }

// Row r of W (f16 or bf16) as n_in bf16 values, then zeros up to k_pad.
void row_to_bf16(const uint8_t* w, DType t, int64_t n_in, int64_t k_pad, uint16_t* out) {
  int64_t i = 0;
  if (t == DType::bf16) {
    std::memcpy(out, w, static_cast<size_t>(n_in) * 2);
    i = n_in;
  } else {
    const auto* h = reinterpret_cast<const uint16_t*>(w);
    for (; i + 16 <= n_in; i += 16) {
      const __m512 f = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), to_bf16(f));
    }
    for (; i < n_in; ++i) {
      uint16_t v;  // through memcpy: safetensors data may sit at an odd address
      std::memcpy(&v, h + i, sizeof v);
      out[i] = f32_to_bf16(fp16_to_f32(v));
    }
  }
  std::fill(out + i, out + k_pad, uint16_t{0});
}

void pack_groups(uint8_t* dst, const uint8_t* w, DType t, int64_t n_in, int64_t n_out, int64_t g0, int64_t g1) {
  const int64_t k_pad = k_padded(n_in);
  const int64_t w_row = row_bytes(t, n_in);
  std::vector<uint16_t> row(static_cast<size_t>(k_pad));
  for (int64_t g = g0; g < g1; ++g) {
    uint8_t* out = dst + g * group_bytes(n_in);
    std::memset(out, 0, static_cast<size_t>(group_bytes(n_in)));
    const int64_t nr = std::min<int64_t>(kBf16GroupRows, n_out - g * kBf16GroupRows);
    for (int64_t r = 0; r < nr; ++r) {
      row_to_bf16(w + (g * kBf16GroupRows + r) * w_row, t, n_in, k_pad, row.data());
      for (int64_t p = 0; p < k_pad / 2; ++p) std::memcpy(out + p * 64 + r * 4, row.data() + 2 * p, 4);
    }
  }
}

}  // namespace

namespace detail {

bool amx_bf16_prefill(int64_t n_tokens) {
  return n_tokens >= kAmxMinTokens && amx_enabled() && cpu_has_avx512_bf16() && !batch_invariant();
}

int64_t bf16_group_bytes(int64_t n_in) { return group_bytes(n_in); }

Bf16Acts round_acts_bf16(const float* x, int64_t n_tokens, int64_t n_in, ThreadPool& pool) {
  Bf16Acts a;
  a.n_tokens = n_tokens;
  a.k_pad = k_padded(n_in);
  // Only the AMX kernel's tile loads read past the last token.
  const int64_t rows =
      n_tokens < kAmxMinTokens ? n_tokens : (n_tokens + kBf16TokenPad - 1) / kBf16TokenPad * kBf16TokenPad;
  auto* out = reinterpret_cast<uint16_t*>(scratch(Scratch::bf16_acts, static_cast<size_t>(rows * a.k_pad) * 2));
  auto round_rows = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* xr = x + t * n_in;
      uint16_t* o = out + t * a.k_pad;
      int64_t i = 0;
      for (; i + 16 <= n_in; i += 16) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(o + i), to_bf16(_mm512_loadu_ps(xr + i)));
      }
      if (i < n_in) {
        const __mmask16 m = cpu::tail_mask(n_in - i);
        _mm256_mask_storeu_epi16(o + i, m, to_bf16(_mm512_maskz_loadu_ps(m, xr + i)));
      }
      std::fill(o + n_in, o + a.k_pad, uint16_t{0});
    }
  };
  if (n_tokens >= 16) {
    pool.parallel_for(n_tokens, round_rows);
  } else {
    round_rows(0, n_tokens);
  }
  std::fill(out + n_tokens * a.k_pad, out + rows * a.k_pad, uint16_t{0});
  a.x = out;
  return a;
}

}  // namespace detail

namespace {

// ---- vdpbf16ps: T tokens (1..2) × G groups (1..2) ----

// Four chains of vdpbf16ps per output (pairs p mod 4), summed at the end in
// a fixed order: enough in flight to hide the instruction's latency at one
// token, and a token's bits do not depend on T, G or which group pair it
// fell in.
constexpr int kChains = 4;

template <int G, int T>
void dot_groups(const GroupSet<G>& s, const Bf16Acts& a, int64_t t0, int64_t ldy) {
  __m512 acc[G][T][kChains];
  for (int i = 0; i < G; ++i) {
    for (int t = 0; t < T; ++t) {
      for (int c = 0; c < kChains; ++c) acc[i][t][c] = _mm512_setzero_ps();
    }
  }
  const int64_t n_pairs = a.k_pad / 2;  // a multiple of 16
  const uint16_t* xt = a.x + t0 * a.k_pad;
  for (int64_t p0 = 0; p0 < n_pairs; p0 += kChains) {
    for (int i = 0; i < G; ++i) {
      for (int c = 0; c < kChains; ++c) cpu::prefetch_ahead(s.lines[i] + (p0 + c) * 64);
    }
#pragma GCC unroll 4
    for (int c = 0; c < kChains; ++c) {
      const int64_t p = p0 + c;
      __m512i xw[T];
      for (int t = 0; t < T; ++t) {
        int32_t pair;
        std::memcpy(&pair, xt + t * a.k_pad + 2 * p, sizeof pair);
        xw[t] = _mm512_set1_epi32(pair);
      }
      for (int i = 0; i < G; ++i) {
        const __m512i wv = _mm512_load_si512(s.lines[i] + p * 64);
        for (int t = 0; t < T; ++t) {
          acc[i][t][c] = _mm512_dpbf16_ps(acc[i][t][c], reinterpret_cast<__m512bh>(wv),
                                          reinterpret_cast<__m512bh>(xw[t]));
        }
      }
    }
  }
  for (int i = 0; i < G; ++i) {
    const __mmask16 m = cpu::tail_mask(s.n_rows[i]);
    for (int t = 0; t < T; ++t) {
      const __m512 sum = _mm512_add_ps(_mm512_add_ps(acc[i][t][0], acc[i][t][1]),
                                       _mm512_add_ps(acc[i][t][2], acc[i][t][3]));
      _mm512_mask_storeu_ps(s.ys[i] + (t0 + t) * ldy, m, sum);
    }
  }
}

// ---- vdpbf16ps for many tokens: T tokens (up to 8) × G groups (1..3) ----

// Register-blocked for prefill without AMX: each weight line loaded serves T
// tokens (24 accumulators at T = 8, G = 3), where dot_groups (T <= 2)
// reloads the weights every two tokens and is bound by its loads. One chain
// an output, so a token's bits depend on the kernel: not batch-invariant.
template <int G, int T>
void gemm_tile(const GroupSet<G>& s, const Bf16Acts& a, int64_t t0, int64_t ldy) {
  __m512 acc[G][T];
  for (int i = 0; i < G; ++i) {
    for (int t = 0; t < T; ++t) acc[i][t] = _mm512_setzero_ps();
  }
  const int64_t n_pairs = a.k_pad / 2;
  const uint16_t* xt = a.x + t0 * a.k_pad;
  for (int64_t p = 0; p < n_pairs; ++p) {
    __m512i wv[G];
    for (int i = 0; i < G; ++i) wv[i] = _mm512_load_si512(s.lines[i] + p * 64);
    for (int t = 0; t < T; ++t) {
      int32_t pair;
      std::memcpy(&pair, xt + t * a.k_pad + 2 * p, sizeof pair);
      const __m512i xb = _mm512_set1_epi32(pair);
      for (int i = 0; i < G; ++i) {
        acc[i][t] = _mm512_dpbf16_ps(acc[i][t], reinterpret_cast<__m512bh>(wv[i]), reinterpret_cast<__m512bh>(xb));
      }
    }
  }
  for (int i = 0; i < G; ++i) {
    const __mmask16 m = cpu::tail_mask(s.n_rows[i]);
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(s.ys[i] + (t0 + t) * ldy, m, acc[i][t]);
  }
}

// The kernels above for detail::dot_range and detail::gemm_split.
struct Bf16Kernels {
  const Bf16Acts& a;
  int64_t ldy;
  template <int G, int T>
  void dot(const GroupSet<G>& s, int64_t t0) const {
    dot_groups<G, T>(s, a, t0, ldy);
  }
  template <int G, int T>
  void gemm(const GroupSet<G>& s, int64_t t0) const {
    gemm_tile<G, T>(s, a, t0, ldy);
  }
};

void amx_range(const uint8_t* packed, int64_t stride, const Bf16Acts& a, float* y, int64_t n_in, int64_t n_out,
               int64_t g0, int64_t g1) {
  const int64_t chunk = detail::amx_chunk_groups(n_in);
  for (int64_t g = g0; g < g1; g += chunk) {
    detail::amx_bf16_groups(a, packed + g * stride, stride, std::min(chunk, g1 - g), y + g * kBf16GroupRows, n_out,
                            n_out - g * kBf16GroupRows);
  }
}

}  // namespace

bool bf16_packing_available(DType t) {
  return (t == DType::f16 || t == DType::bf16) && isa_supported(Isa::avx512) && cpu_has_avx512_bf16();
}

int64_t bf16_packed_bytes(int64_t n_in, int64_t n_out) { return n_groups(n_out) * group_bytes(n_in); }

void pack_bf16(void* dst, const void* w, DType t, int64_t n_in, int64_t n_out, ThreadPool& pool) {
  if (!bf16_packing_available(t)) {
    throw Error(Errc::unsupported, "bf16 repacking of " + std::string(dtype_name(t)) + " needs AVX-512 BF16");
  }
  if (n_in <= 0 || n_out <= 0) {
    throw Error(Errc::invalid_argument,
                "bf16 repacking: bad shape [" + std::to_string(n_out) + ", " + std::to_string(n_in) + "]");
  }
  pool.parallel_for(n_groups(n_out), [&](int64_t g0, int64_t g1) {
    pack_groups(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(w), t, n_in, n_out, g0, g1);
  });
}

void matmul_bf16_packed(float* y, const float* x, const void* packed, int64_t n_tokens, int64_t n_in, int64_t n_out,
                        ThreadPool& pool) {
  if (n_tokens <= 0 || n_out <= 0) return;
  const Bf16Acts a = detail::round_acts_bf16(x, n_tokens, n_in, pool);
  const auto* bytes = static_cast<const uint8_t*>(packed);
  const int64_t stride = group_bytes(n_in);
  const int64_t groups = n_groups(n_out);
  if (detail::amx_bf16_prefill(n_tokens)) {
    // Threads take chunks of up to 1 MiB of groups in turn.
    pool.parallel_dynamic(groups, detail::amx_thread_grain(groups, n_in, pool.size()), [&](int64_t g0, int64_t g1) {
      amx_range(bytes, stride, a, y, n_in, n_out, g0, g1);
    });
    return;
  }
  // Threads take guided chunks of groups (ThreadPool::parallel_guided), as
  // the int8 decode.
  const Bf16Kernels k{.a = a, .ldy = n_out};
  if (n_tokens >= detail::kAmxMinTokens && !batch_invariant()) {
    detail::gemm_split(k, pool, bytes, stride, y, n_tokens, n_out);
    return;
  }
  pool.parallel_guided(groups, 2, [&](int64_t g0, int64_t g1) {
    detail::dot_range(k, bytes, stride, y, n_tokens, n_out, g0, g1);
  });
}

}  // namespace troupe::kernels

#else  // not x86: the bf16 path does not exist

namespace troupe::kernels {

bool bf16_packing_available(DType) { return false; }
int64_t bf16_packed_bytes(int64_t, int64_t) { return 0; }
void pack_bf16(void*, const void*, DType t, int64_t, int64_t, ThreadPool&) {
  throw Error(Errc::unsupported, "bf16 repacking of " + std::string(dtype_name(t)) + " needs x86 AVX-512 BF16");
}
void matmul_bf16_packed(float*, const float*, const void*, int64_t, int64_t, int64_t, ThreadPool&) {
  throw Error(Errc::unsupported, "bf16 matmul needs x86 AVX-512 BF16");
}

}  // namespace troupe::kernels

#endif  // x86

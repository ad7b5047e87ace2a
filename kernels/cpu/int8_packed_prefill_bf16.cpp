// The AMX prefill of the int8 path over repacked quantized weights
// (bf16_packed.hpp, detail::int8_packed_gemm_bf16). A 16-row group of the
// int8 layout is expanded once per call into a bf16 group (w = scale · (u −
// offset) + min per sub-block, rounded to bf16: relative error up to 2^-8),
// then AMX-BF16 runs it against all tokens, accumulating over all of K in
// the tile. The int8 AMX kernel has to scale every 16 × 16 tile product per
// sub-block of 32 inputs in vector registers, about three times the tile's
// own time; here the vector work is the expansion, once per group for all
// tokens. Built with -mavx512bf16 and VNNI (the layout readers).
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/bf16_packed.hpp"

#if defined(__x86_64__) || defined(__i386__)

#include "kernels/cpu/packed_lines_avx512.hpp"
#include "kernels/cpu/simd_avx512.hpp"
#include "kernels/cpu/int8_packed_layout.hpp"
#include "kernels/cpu/scratch.hpp"

namespace troupe::kernels::detail {
namespace {

using namespace cpu;  // NOLINT: the layouts and SIMD helpers of this path

// Word 2 r of a pair line is row r's first input, word 2 r + 1 its second.
inline __m512i pair_line(__m512 first, __m512 second, __m512i interleave) {
  const __m512i halves = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(second, first));  // [first | second]
  return _mm512_permutexvar_epi16(interleave, halves);
}

// One group of the int8 layout P into `out` (bf16_packed.hpp's layout: a
// 64-byte line per pair of inputs; n_in is a multiple of 32 for every
// quantized type, so there is no padding).
template <class P>
void expand_group(const uint8_t* group, int64_t n_in, uint8_t* out) {
  using Rd = typename P::Reader;
  constexpr int kLines = Rd::kSubK / 4;
  alignas(64) static constexpr uint16_t kInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,
                                                           21, 6, 22, 7, 23, 8, 24, 9, 25, 10, 26,
                                                           11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i interleave = _mm512_load_si512(kInterleave);
  const __m512i byte = _mm512_set1_epi32(0xff);
  const int64_t n_units = n_in / P::kUnitK;
  for (int64_t un = 0; un < n_units; ++un) {
    // A group is one stream (the layouts'): without the prefetch its
    // loads stalled, and 1B q4_0 prefill of 16 tokens ran 10-25% slower.
    P::prefetch(group, n_units, un);
    for (int j = 0; j < P::kSubs; ++j) {
      const int64_t k0 = (un * P::kSubs + j) * Rd::kSubK;
      __m512i lines[8];
      P::template lines<Lines512>(group, n_units, un, j, lines);
      __m512 scale, min;
      P::template scales<Lines512>(group, n_units, un, j, scale, min);
      // w = scale · u + (min − scale · offset)
      const __m512 bias = _mm512_fnmadd_ps(scale, _mm512_set1_ps(static_cast<float>(Rd::kOffset)), min);
      for (int g = 0; g < kLines; ++g) {  // inputs k0 + 4 g .. k0 + 4 g + 3 of the 16 rows
        __m512 w[4];
        for (int b = 0; b < 4; ++b) {
          const __m512i u = _mm512_and_si512(_mm512_srli_epi32(lines[g], 8 * b), byte);
          w[b] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(u), scale, bias);
        }
        uint8_t* dst = out + (k0 + 4 * g) / 2 * 64;
        _mm512_store_si512(dst, pair_line(w[0], w[1], interleave));
        _mm512_store_si512(dst + 64, pair_line(w[2], w[3], interleave));
      }
    }
  }
}

}  // namespace

void int8_packed_gemm_bf16(const uint8_t* packed, DType t, const Bf16Acts& a, float* y, int64_t n_in, int64_t n_out,
                           int64_t g0, int64_t g1) {
  const int64_t out_bytes = bf16_group_bytes(n_in);
  const int64_t chunk = amx_chunk_groups(n_in);
  uint8_t* buf = scratch(Scratch::bf16_groups, static_cast<size_t>(chunk * out_bytes));
  with_layout(t, [&]<class P>() {
    const int64_t stride = group_bytes<P>(n_in);
    for (int64_t g = g0; g < g1; g += chunk) {
      const int64_t n = std::min(chunk, g1 - g);
      for (int64_t i = 0; i < n; ++i) expand_group<P>(packed + (g + i) * stride, n_in, buf + i * out_bytes);
      amx_bf16_groups(a, buf, out_bytes, n, y + g * kBf16GroupRows, n_out, n_out - g * kBf16GroupRows);
    }
  });
}

}  // namespace troupe::kernels::detail

#endif  // x86

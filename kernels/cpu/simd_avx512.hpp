// What the AVX-512 kernel files (matmul, vec_ops, attention tiles, the int8
// path) share: <immintrin.h> with GCC 12's warnings about its own intrinsics
// silenced, the tail mask, the 8-way reduction and the weight prefetch. Include only from
// files built with -mavx512*: internal linkage keeps each copy in its own
// translation unit.
#pragma once

// GCC 12 flags the intentionally undefined pass-through operand inside its
// own AVX-512 intrinsics (_mm512_undefined_*) as uninitialised once they are
// inlined; the warning points into the header, so it is silenced there only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>

namespace troupe::kernels::cpu {
namespace {  // NOLINT: per-ISA translation units only

// Lanes < rem set (rem in 0..16).
inline __mmask16 tail_mask(int64_t rem) { return static_cast<__mmask16>((1u << rem) - 1u); }

// Sums each of v[0..7] across its 16 lanes; lane i of the result is v[i]'s
// sum. Every vector is reduced in the same order whatever its slot, so a row's
// result does not depend on which tile it fell in.
[[gnu::always_inline]] inline __m256 reduce8(const __m512 (&v)[8]) {
  __m512 s[4];
  for (int i = 0; i < 4; ++i) {  // 512 -> 256 bits: [a.lo + a.hi | b.lo + b.hi]
    const __m512 a = v[2 * i], b = v[2 * i + 1];
    s[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  __m512 q[2];
  for (int i = 0; i < 2; ++i) {  // 256 -> 128 bits: one 128-bit lane per vector
    const __m512 a = s[2 * i], b = s[2 * i + 1];
    q[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
  }
  // 128 -> 32 bits: lane L of q[0] holds v[L], of q[1] holds v[4 + L].
  const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(q[0], q[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_ps(q[0], q[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 t = _mm512_add_ps(r, _mm512_permute_ps(r, _MM_SHUFFLE(2, 3, 0, 1)));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castps512_ps256(_mm512_permutexvar_ps(order, t));
}

// Software prefetch far ahead in the weight stream. Measured on Zen 5 with
// weights in DRAM: without it a one-token GEMV reads only 8-15 GB/s for q8_0
// and q4 (the hardware prefetchers do not run far enough ahead), with 12 KiB
// 22-35 GB/s. The address is formed as an integer: it may lie past the end of
// the weights, which a prefetch tolerates.
constexpr uintptr_t kPrefetchBytes = 12288;
inline void prefetch_ahead(const uint8_t* p) {
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(p) + kPrefetchBytes), _MM_HINT_T0);
}

}  // namespace
}  // namespace troupe::kernels::cpu

// What the AVX-512 kernel files (vec_ops_avx512.cpp,
// attention_tiles_avx512.cpp) share: <immintrin.h> with GCC 12's warnings
// about its own intrinsics silenced, and the tail mask. Include only from
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

}  // namespace
}  // namespace troupe::kernels::cpu

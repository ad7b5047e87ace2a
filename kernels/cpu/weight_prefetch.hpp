// The GEMVs' software prefetch of the weight stream, shared by every x86
// kernel file (AVX2 and AVX-512 alike: _mm_prefetch is SSE). Internal
// linkage, as the per-ISA helpers.
#pragma once

#include <xmmintrin.h>

#include <cstdint>

namespace troupe::kernels::cpu {
namespace {  // NOLINT: per-ISA translation units only

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

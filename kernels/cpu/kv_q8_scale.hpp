// The fp16 scale of a q8_0 KV row's group (memory/kv_type.hpp's layout: the
// row's int8 values, then one scale per 32), for the AVX2 and AVX-512 KV row
// readers. Include only from files built with -mf16c.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cpu/x86_intrinsics.hpp"

namespace troupe::kernels::cpu {
namespace {  // NOLINT: per-ISA translation units only

// Scale of group g (32 values) of a q8_0 row of d values.
inline float q8_scale(const unsigned char* row, int64_t d, int64_t g) {
  uint16_t h;
  std::memcpy(&h, row + d + 2 * g, 2);
  return _cvtsh_ss(h);
}

}  // namespace
}  // namespace troupe::kernels::cpu

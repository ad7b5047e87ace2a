// The packed f32 path (f32_packed.hpp): the repacking, and which ISA's
// kernels run it. Built without ISA flags: it runs on every CPU.
#include "kernels/cpu/f32_packed.hpp"

#include <string>

#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "kernels/cpu/bf16_packed.hpp"
#include "kernels/cpu/packed_groups.hpp"

namespace troupe::kernels {

bool f32_packing_available() {
#if defined(__x86_64__) || defined(__i386__)
  return active_isa() == Isa::avx512 || active_isa() == Isa::avx2;
#else
  return false;
#endif
}

int64_t f32_packed_bytes(int64_t n_in, int64_t n_out) {
  return detail::n_packed_groups(n_out) * detail::f32_group_bytes(n_in);
}

void pack_f32(void* dst, const float* w, int64_t n_in, int64_t n_out, ThreadPool& pool) {
  if (!f32_packing_available()) throw Error(Errc::unsupported, "f32 repacking needs AVX2 or AVX-512");
  if (n_in <= 0 || n_out <= 0) {
    throw Error(Errc::invalid_argument,
                "f32 repacking: bad shape [" + std::to_string(n_out) + ", " + std::to_string(n_in) + "]");
  }
  pool.parallel_for(detail::n_packed_groups(n_out), [&](int64_t g0, int64_t g1) {
    detail::pack_by_input<4>(static_cast<uint8_t*>(dst), reinterpret_cast<const uint8_t*>(w), n_in, n_out,
                             detail::f32_group_bytes(n_in), g0, g1);
  });
}

void matmul_f32_packed(float* y, const float* x, const void* packed, int64_t n_tokens, int64_t n_in, int64_t n_out,
                       ThreadPool& pool) {
  if (n_tokens <= 0 || n_out <= 0) return;
#if defined(__x86_64__) || defined(__i386__)
  switch (active_isa()) {
    case Isa::avx512:
      if (f32_matmul_precision() != F32Precision::highest && detail::amx_bf16_prefill(n_tokens)) {
        return detail::matmul_f32_packed_amx(y, x, packed, n_tokens, n_in, n_out, f32_matmul_precision(), pool);
      }
      return detail::matmul_f32_packed_avx512(y, x, packed, n_tokens, n_in, n_out, pool);
    case Isa::avx2: return detail::matmul_f32_packed_avx2(y, x, packed, n_tokens, n_in, n_out, pool);
    case Isa::scalar: break;
  }
#endif
  (void)x, (void)packed, (void)n_in, (void)pool, (void)y;
  throw Error(Errc::unsupported, "packed f32 matmul needs AVX2 or AVX-512 at the active ISA");
}

}  // namespace troupe::kernels

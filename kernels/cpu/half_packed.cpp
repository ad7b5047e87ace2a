// The 16-bit layout for AVX2 (half_packed.hpp): the repacking, and the
// kernels' ISA. Built without ISA flags: it runs on every CPU.
#include "kernels/cpu/half_packed.hpp"

#include <string>

#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "kernels/cpu/packed_groups.hpp"

namespace troupe::kernels {

// AVX-512 without BF16 (Skylake to Ice Lake) runs these AVX2 kernels too:
// on one Zen 4 core the AVX-512 f32 path over the rows as stored, which it
// ran before, decoded 110M f16 at 51-53 tok/s, these at 101-102.
bool half_packing_available(DType t) {
#if defined(__x86_64__) || defined(__i386__)
  const bool isa = active_isa() == Isa::avx2 || (active_isa() == Isa::avx512 && !cpu_has_avx512_bf16());
  return (t == DType::f16 || t == DType::bf16) && isa;
#else
  (void)t;
  return false;
#endif
}

int64_t half_packed_bytes(int64_t n_in, int64_t n_out) {
  return detail::n_packed_groups(n_out) * detail::half_group_bytes(n_in);
}

void pack_half(void* dst, const void* w, DType t, int64_t n_in, int64_t n_out, ThreadPool& pool) {
  if (!half_packing_available(t)) {
    throw Error(Errc::unsupported, "16-bit repacking of " + std::string(dtype_name(t)) + " needs AVX2 at the active "
                                   "ISA, and f16 or bf16 weights");
  }
  if (n_in <= 0 || n_out <= 0) {
    throw Error(Errc::invalid_argument,
                "16-bit repacking: bad shape [" + std::to_string(n_out) + ", " + std::to_string(n_in) + "]");
  }
  pool.parallel_for(detail::n_packed_groups(n_out), [&](int64_t g0, int64_t g1) {
    detail::pack_by_input<2>(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(w), n_in, n_out,
                             detail::half_group_bytes(n_in), g0, g1);
  });
}

void matmul_half_packed(float* y, const float* x, const void* packed, DType t, int64_t n_tokens, int64_t n_in,
                        int64_t n_out, ThreadPool& pool) {
  if (n_tokens <= 0 || n_out <= 0) return;
  if (!half_packing_available(t)) {
    throw Error(Errc::unsupported, "16-bit packed matmul of " + std::string(dtype_name(t)) +
                                       " needs AVX2 at the active ISA");
  }
#if defined(__x86_64__) || defined(__i386__)
  detail::matmul_half_packed_avx2(y, x, packed, t, n_tokens, n_in, n_out, pool);
#else
  (void)y, (void)x, (void)packed, (void)n_in, (void)pool;
#endif
}

}  // namespace troupe::kernels

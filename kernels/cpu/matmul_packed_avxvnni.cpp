// The int8 path over repacked weights on CPUs with AVX-VNNI and no AVX-512
// VNNI (Intel client cores from Alder Lake, Sierra Forest): the 256-bit
// kernels (matmul_packed_256.hpp) with vpdpbusd in its VEX form. Built with
// -mavxvnni; matmul_packed_vnni256.cpp is the same kernels in the EVEX form,
// which the tests run where AVX-512 VNNI is (the two encodings compute the
// same integers).
#include "kernels/cpu/int8_packed.hpp"

#if defined(__x86_64__) || defined(__i386__)

#include "kernels/cpu/matmul_packed_256.hpp"

namespace troupe::kernels::detail {

void matmul_int8_packed_avxvnni(std::span<const PackedOutput> outs, const float* x, DType t, int64_t n_tokens,
                                int64_t n_in, ThreadPool& pool) {
  static_assert(__AVXVNNI__, "built with -mavxvnni: the VEX vpdpbusd");
  matmul_packed_256<Vpdpbusd256>(outs, x, t, n_tokens, n_in, pool);
}

}  // namespace troupe::kernels::detail

#endif  // x86

// The 256-bit int8 kernels (matmul_packed_256.hpp) with vpdpbusd in AVX-512
// VNNI's EVEX form on ymm: matmul_packed_avxvnni.cpp's kernels, runnable
// where AVX-512 VNNI is and AVX-VNNI is not (every machine lent so far), so
// that tests and benchmarks can run the vpdpbusd policy. Built with
// -mavx512vnni -mavx512vl and not -mavxvnni (which would pick the VEX form).
#include "kernels/cpu/int8_packed.hpp"

#if defined(__x86_64__) || defined(__i386__)

#include "kernels/cpu/matmul_packed_256.hpp"

namespace troupe::kernels::detail {

void matmul_int8_packed_vnni256(std::span<const PackedOutput> outs, const float* x, DType t, int64_t n_tokens,
                                int64_t n_in, ThreadPool& pool) {
#if defined(__AVXVNNI__)
#error "built with -mavxvnni: vpdpbusd would take its VEX form"
#endif
  matmul_packed_256<Vpdpbusd256>(outs, x, t, n_tokens, n_in, pool);
}

}  // namespace troupe::kernels::detail

#endif  // x86

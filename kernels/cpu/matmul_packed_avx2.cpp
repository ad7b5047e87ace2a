// The int8 path over repacked weights on any CPU with AVX2: the 256-bit
// kernels (matmul_packed_256.hpp) with vpmaddubsw pairs summed in int16 for
// the integer dots, which give vpdpbusd's integers, so the bits of the VNNI
// kernels (docs/performance.md, "CPUs without AVX-512").
#include "kernels/cpu/int8_packed.hpp"

#if defined(__x86_64__) || defined(__i386__)

#include "kernels/cpu/matmul_packed_256.hpp"

namespace troupe::kernels::detail {

void matmul_int8_packed_avx2(std::span<const PackedOutput> outs, const float* x, DType t, int64_t n_tokens,
                             int64_t n_in, ThreadPool& pool) {
  matmul_packed_256<PairDots>(outs, x, t, n_tokens, n_in, pool);
}

}  // namespace troupe::kernels::detail

#endif  // x86

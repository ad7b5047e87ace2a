// f16 and bf16 weights repacked once, at load, for CPUs without AVX-512
// BF16 (whose bf16 layout, bf16_packed.hpp, is read by vdpbf16ps), read by
// AVX2 kernels: rows in groups of 16, and per group one 32-byte run per input
// holding that input of each of the 16 rows as stored (row r at bytes 2r,
// 2r + 1), two inputs a 64-byte line. A run's halves are 8 rows each, which
// AVX2 widens to f32 (vcvtph2ps for f16; a shift for bf16) and multiplies by
// the broadcast input: no horizontal sums, and a group is one stream at the
// file's size. Values are the weights exactly (f32 activations); only the
// order of the f32 sums differs from the exact kernels, as for f32_packed.hpp,
// whose chains and tiles these kernels share (matmul_packed_float_avx2.cpp).
#pragma once

#include <cstdint>

#include "core/dtype.hpp"
#include "core/thread_pool.hpp"

namespace troupe::kernels {

// Whether the 16-bit layout runs at the active ISA (AVX2, or AVX-512 without
// BF16) and t is f16 or bf16.
bool half_packing_available(DType t);

// Bytes of W [n_out, n_in] repacked (a multiple of 64): the 16-bit size,
// rows rounded up to 16.
int64_t half_packed_bytes(int64_t n_in, int64_t n_out);

// Repacks W (f16 or bf16 rows, at any address) into dst, 64-byte aligned, of
// half_packed_bytes; groups are split over the pool.
void pack_half(void* dst, const void* w, DType t, int64_t n_in, int64_t n_out, ThreadPool& pool);

// y[n_tokens, n_out] = x[n_tokens, n_in] · W^T from the repacked W of type t.
void matmul_half_packed(float* y, const float* x, const void* packed, DType t, int64_t n_tokens, int64_t n_in,
                        int64_t n_out, ThreadPool& pool);

namespace detail {

// Bytes of one group: 32 per input, whole lines.
inline int64_t half_group_bytes(int64_t n_in) { return (n_in * 32 + 63) / 64 * 64; }

// The AVX2 kernels (matmul_packed_float_avx2.cpp).
void matmul_half_packed_avx2(float* y, const float* x, const void* packed, DType t, int64_t n_tokens, int64_t n_in,
                             int64_t n_out, ThreadPool& pool);

}  // namespace detail

}  // namespace troupe::kernels

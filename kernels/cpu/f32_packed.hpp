// f32 weights repacked once, at load, for the fast path (not under exact
// math): rows in groups of 16, and per group one 64-byte line per input
// holding that input of each of the 16 rows (row r at bytes 4r..4r+3). A
// broadcast input times a line is 16 outputs' products in one FMA: no
// horizontal sums, and a group is one stream of lines. Values are the
// weights exactly; the FMA kernels differ from the exact ones only in the
// order of the f32 sums.
//
// Decode (below 16 tokens) sums each output in four chains (inputs k mod 4);
// prefill runs tiles of 8 tokens × 3 groups on AVX-512 (24 accumulators; 2
// groups where three groups' lines would crowd L2), of 4 tokens × one group
// on AVX2 (each line's two 32-byte halves, 8 rows each), one chain an
// output. At a reduced f32 matmul precision (core/cpu_features.hpp) and
// where the CPU has AMX, prefill instead runs AMX-BF16 products of the
// operands split into bf16 parts (matmul_f32_packed_amx). A token's bits
// do not depend on the batch or the threads within one kernel; in
// batch-invariant mode every batch takes the decode kernel.
#pragma once

#include <cstdint>

#include "core/cpu_features.hpp"
#include "core/thread_pool.hpp"

namespace troupe::kernels {

// Whether the packed f32 path runs at the active ISA (AVX-512 or AVX2).
bool f32_packing_available();

// Bytes of W [n_out, n_in] repacked (a multiple of 64): the f32 size, rows
// rounded up to 16.
int64_t f32_packed_bytes(int64_t n_in, int64_t n_out);

// Repacks W (f32 rows, at any address) into dst, 64-byte aligned, of
// f32_packed_bytes; groups are split over the pool.
void pack_f32(void* dst, const float* w, int64_t n_in, int64_t n_out, ThreadPool& pool);

// y[n_tokens, n_out] = x[n_tokens, n_in] · W^T from the repacked W.
void matmul_f32_packed(float* y, const float* x, const void* packed, int64_t n_tokens, int64_t n_in, int64_t n_out,
                       ThreadPool& pool);

namespace detail {

// Bytes of one group: a line of the 16 rows per input.
inline int64_t f32_group_bytes(int64_t n_in) { return n_in * 64; }

// From this many tokens on (not under batch-invariant math), the prefill
// tiles of the f32 and 16-bit layouts (as the bf16 path's).
inline constexpr int64_t kFloatGemmMinTokens = 16;

// The kernels per ISA (f32_packed.cpp chooses): matmul_packed_f32_avx512.cpp,
// matmul_packed_float_avx2.cpp.
void matmul_f32_packed_avx512(float* y, const float* x, const void* packed, int64_t n_tokens, int64_t n_in,
                              int64_t n_out, ThreadPool& pool);
void matmul_f32_packed_avx2(float* y, const float* x, const void* packed, int64_t n_tokens, int64_t n_in,
                            int64_t n_out, ThreadPool& pool);

// Prefill (from kAmxMinTokens tokens, where bf16_packed.hpp's
// amx_bf16_prefill says so) at precision high (three AMX-BF16 products of
// the operands' bf16 high and low parts: within 3 · 2^-16 Σ|x w| of the
// exact sum besides the f32 accumulation error) or medium (one, of the
// high parts): f32_packed_prefill_bf16.cpp.
void matmul_f32_packed_amx(float* y, const float* x, const void* packed, int64_t n_tokens, int64_t n_in, int64_t n_out,
                           F32Precision precision, ThreadPool& pool);

}  // namespace detail

}  // namespace troupe::kernels

// f16 and bf16 weights repacked once, at load, for bf16 dot products (the
// fast path, not under exact math): AVX-512 BF16 `vdpbf16ps` for decode
// and, without AMX, for prefill (tiles of 8 tokens × 48 or 32 rows);
// AMX-BF16 tiles for prefill where the CPU has them.
//
// Layout: rows in groups of 16; per group, one 64-byte line per pair of
// inputs, holding that pair of each of the 16 rows as bf16 (row r at bytes
// 4r..4r+3). This is AMX's B-tile layout, and what vdpbf16ps with a
// broadcast pair of inputs wants. Inputs are padded with zeros to a multiple
// of 32 (one tile row), rows to a multiple of 16.
//
// Precision: bf16 weights are kept exactly; f16 weights lose 3 mantissa bits
// (relative rounding error up to 2^-8, as the activations, which are rounded
// to bf16 once per matmul). Products are exact in f32 and accumulate in f32.
// The packed matrix has the size of the f16/bf16 original.
//
// A token's result does not depend on the batch or thread count within one
// kernel: vdpbf16ps accumulates each output in input order, in four chains
// for decode (below 16 tokens, and every batch in batch-invariant mode) and
// one for the prefill tiles; AMX (16 tokens and more) rounds differently
// inside a tile. So prefill bits differ from decode's in the last place
// (unlike the int8 path, whose sums are integers).
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/dtype.hpp"
#include "core/thread_pool.hpp"

namespace troupe::kernels {

// Whether this CPU runs the bf16 path (AVX-512 BF16) and t is f16 or bf16.
bool bf16_packing_available(DType t);

// Bytes of W [n_out, n_in] repacked (a multiple of 64).
int64_t bf16_packed_bytes(int64_t n_in, int64_t n_out);

// Repacks W (f16 or bf16 rows) into dst, 64-byte aligned, of
// bf16_packed_bytes; groups are split over the pool.
void pack_bf16(void* dst, const void* w, DType t, int64_t n_in, int64_t n_out, ThreadPool& pool);

// y[n_tokens, n_out] = x[n_tokens, n_in] · W^T from the repacked W, with x
// rounded to bf16.
void matmul_bf16_packed(float* y, const float* x, const void* packed, int64_t n_tokens, int64_t n_in, int64_t n_out,
                        ThreadPool& pool);

namespace detail {

inline constexpr int64_t kBf16GroupRows = 16;
inline constexpr int64_t kBf16KPad = 32;       // inputs per tile row
inline constexpr int64_t kBf16TokenPad = 32;   // the activations' rows, for two 16-row tiles
inline constexpr int64_t kAmxMinTokens = 16;   // the fewest tokens the AMX kernel runs

// Whether a matmul of n_tokens over repacked weights (bf16 or int8) runs
// the AMX-BF16 kernel: AMX on, and not under batch-invariant math.
bool amx_bf16_prefill(int64_t n_tokens);

// x rounded to bf16: [n_tokens][k_pad], or for the AMX kernel [n_tokens
// rounded up to kBf16TokenPad][k_pad] with zero rows; inputs past n_in zero.
struct Bf16Acts {
  const uint16_t* x = nullptr;
  int64_t n_tokens = 0;
  int64_t k_pad = 0;  // n_in rounded up to kBf16KPad; also the row stride
};

// x rounded to bf16 into storage owned by the calling thread (valid until it
// calls again); the rows of a prefill are split over the pool.
Bf16Acts round_acts_bf16(const float* x, int64_t n_tokens, int64_t n_in, ThreadPool& pool);

// Bytes of one group of W [*, n_in] in the packed layout.
int64_t bf16_group_bytes(int64_t n_in);

// AMX-BF16 product of n_groups groups (each of bf16_group_bytes, `stride`
// apart) with all tokens of `a`: y [n_tokens, ldy], the groups' 16 columns
// each from y, of which n_out - 16 g0 exist (g0 the first group's index, as
// the caller counts). Tokens run in blocks of 32 outside the groups, so a
// block's activations stay in L2 while the groups stream past them; callers
// keep n_groups × the group size near 1 MiB (amx_chunk_groups). Only where
// amx_bf16_prefill says so, on activations rounded for it.
void amx_bf16_groups(const Bf16Acts& a, const uint8_t* groups, int64_t stride, int64_t n_groups, float* y,
                     int64_t ldy, int64_t n_rows);

// Groups per call of amx_bf16_groups for rows of n_in inputs: even, 2..16.
int64_t amx_chunk_groups(int64_t n_in);

// Groups per chunk that the threads of an AMX prefill take in turn
// (ThreadPool::parallel_dynamic): amx_chunk_groups, or fewer (even, at
// least 2) so that each of n_threads has about four chunks to balance with.
int64_t amx_thread_grain(int64_t n_groups, int64_t n_in, int n_threads);

// The AMX prefill of the int8 path (int8_packed.hpp): groups [g0, g1) of a
// repacked quantized W expanded to bf16 groups in this layout (w = scale ·
// (u − offset) + min, rounded to bf16), then the AMX-BF16 kernel over all
// tokens of `a`, accumulating over all of K in the tile: no per-block
// scaling after each tile product, which bounds the int8 AMX kernel.
void int8_packed_gemm_bf16(const uint8_t* packed, DType t, const Bf16Acts& a, float* y, int64_t n_in, int64_t n_out,
                           int64_t g0, int64_t g1);

}  // namespace detail
}  // namespace troupe::kernels

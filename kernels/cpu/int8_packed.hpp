// Quantized weights repacked once, at load, for the int8 path of matmul
// (kernels/cpu/matmul_int8.hpp): rows in groups of 16, and within a group,
// for each sub-block, 4 consecutive inputs of each of the 16 rows side by
// side (one 64-byte line per 4 inputs: AMX's B-tile layout, and what
// vpdpbusd with a broadcast input wants). Decode then does one vpdpbusd per
// 64 weights and one f32 scaling per sub-block of 16 rows, instead of
// unpacking and scaling every block of every row. On AVX2 (no VNNI) each
// 32-byte half of a line is 8 whole rows, read by vpmaddubsw + vpmaddwd to
// the same integer sums and scaled by the same f32 operations: decode and
// prefill alike have the VNNI GEMV's bits. Prefill on VNNI runs the
// same arithmetic as decode, so a sequence's logits do not depend on how
// many others share its step; prefill on AMX expands each group to bf16 and
// accumulates over all of K in the tile (bf16_packed.hpp), which is 1.5-3x
// faster than per-block int8 tile products and closer to exact, but not the
// decode's bits.
//
// Per group, the GGUF blocks keep their information and nearly their size:
// - q4_0, q4_1 (per block of 32): 4 lines of nibbles (input 4 g + i of row r
//   in line g mod 4, low nibble for g < 4); two blocks' lines, then the d
//   (and m) of the 16 rows as fp16 for both;
// - q8_0: 8 lines of bytes, then d as fp16, paired the same way;
// - q5_0, q5_1: the 8 lines' low nibbles as 4 nibble lines, then a line of
//   their fifth bits (bit g of a byte for line g), then d (and m), paired;
// - q4_K (per super-block of 256): d, dmin (fp16) and the 8 scales and mins
//   (u8) of the 16 rows, then 8 sub-blocks of 4 nibble lines;
// - q5_K: the same header, then 8 sub-blocks of 4 nibble lines and a line of
//   fifth bits;
// - q6_K: d (fp16) and the 16 scales (i8) of the 16 rows, then 16 sub-blocks
//   of 16 inputs: the low nibbles of their 4 lines in 2 nibble lines, then a
//   line of their top 2 bits (bits 2 g, 2 g + 1 of a byte for line g).
// - q3_K: q6_K's header (scales less 32, as i8), then per pair of sub-blocks
//   of 16 a line of 2-bit u for each (bits 2 g, 2 g + 1 for line g) and a
//   line of their third bits (bit g, and 4 + g for the second);
// - q2_K: d, dmin (fp16) and the 16 scale bytes (4-bit scale and min) of the
//   16 rows, then a line of 2-bit u per sub-block of 16;
// - iq4_nl: as q4_0, the nibbles being indices into the iq4 levels, which a
//   vpshufb turns into u (levels + 128) as they are read;
// - mxfp4: as iq4_nl, with the doubled E2M1 levels + 12 as u, and the
//   scales 2^(e - 128) as bf16 (exact) where iq4_nl has its fp16 d;
// - iq4_xs: q6_K's header with 8 scales less 32, then 8 sub-blocks of 4
//   nibble lines of indices, read as iq4_nl's.
// Weights are stored as unsigned u with w = scale * (u - offset) + min, as in
// matmul_int8.hpp. Size against GGUF: equal for q4_0/q4_1/q5_0/q5_1/q8_0,
// iq4_nl and q2_K, +1% for q6_K, +2.3% for q5_K, +2.8% for q4_K, +2.9% for
// iq4_xs, +5.5% for q3_K and +5.9% for mxfp4 (its 1-byte scale kept in 2)
// (headers and bit lines in whole cache lines).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/dtype.hpp"
#include "core/thread_pool.hpp"

namespace troupe::kernels {

// Whether the int8 path over repacked weights runs at the active ISA
// (AVX-512 with VNNI; AVX2, or AVX-512 without VNNI, on the 256-bit
// kernels: core/cpu_features.hpp) and the type is one it repacks. The
// layout is the same for all, so weights repacked under one run under the
// others.
bool int8_packing_available(DType t);

// Bytes of W [n_out, n_in] repacked (a multiple of 64).
int64_t int8_packed_bytes(DType t, int64_t n_in, int64_t n_out);

// Counts bytes of repacked int8 weights in use in the process (a CPU
// backend adds what it packs and takes it back when it goes): the GEMVs'
// prefetch distance follows whether they fit in L3.
void count_int8_packed_bytes(int64_t delta);

// Repacks W (GGUF blocks, rows of row_bytes(t, n_in)) into dst, 64-byte
// aligned, of int8_packed_bytes; groups are split over the pool.
void pack_int8(void* dst, const void* w, DType t, int64_t n_in, int64_t n_out, ThreadPool& pool);

// y[n_tokens, n_out] = x[n_tokens, n_in] · W^T from the repacked W, with the
// activations quantized to int8 (matmul_int8.hpp), or, for 16 tokens or more
// where AMX runs, rounded to bf16 against the weights expanded to bf16. A
// token's bits do not depend on n_tokens or the thread count within each.
void matmul_int8_packed(float* y, const float* x, const void* packed, DType t, int64_t n_tokens, int64_t n_in,
                        int64_t n_out, ThreadPool& pool);

// One of several matrices that read the same input (q, k and v; gate and
// up): y[n_tokens, n_out] = x · W^T, W repacked.
struct PackedOutput {
  float* y = nullptr;
  const void* packed = nullptr;
  int64_t n_out = 0;
};

// matmul_int8_packed for each of outs, all of type t and n_in inputs, as one
// matmul: x is quantized once, and the threads split the groups of all the
// matrices in one dispatch (a decode step waits at one barrier, not one per
// matrix). More than kMaxPackedOutputs run as several such calls. The bits
// are each matrix's own matmul_int8_packed's.
inline constexpr size_t kMaxPackedOutputs = 4;
void matmul_int8_packed_n(std::span<const PackedOutput> outs, const float* x, DType t, int64_t n_tokens,
                          int64_t n_in, ThreadPool& pool);

namespace detail {

// The per-ISA halves of the above (int8_packed.cpp chooses): bytes of one
// group of 16 rows and the repacking of groups [g0, g1), ISA-neutral but
// built for AVX2 (int8_pack_avx2.cpp); the matmuls for at most
// kMaxPackedOutputs matrices (matmul_packed_vnni.cpp, matmul_packed_avx2.cpp).
int64_t int8_group_bytes(DType t, int64_t n_in);
void pack_int8_groups(uint8_t* dst, const uint8_t* w, DType t, int64_t n_in, int64_t n_out, int64_t g0, int64_t g1);
void matmul_int8_packed_vnni(std::span<const PackedOutput> outs, const float* x, DType t, int64_t n_tokens,
                             int64_t n_in, ThreadPool& pool);
void matmul_int8_packed_avx2(std::span<const PackedOutput> outs, const float* x, DType t, int64_t n_tokens,
                             int64_t n_in, ThreadPool& pool);
// The 256-bit kernels with vpdpbusd: AVX-VNNI's VEX form
// (matmul_packed_avxvnni.cpp), and AVX-512 VNNI's EVEX form on ymm
// (matmul_packed_vnni256.cpp; tests and benchmarks).
void matmul_int8_packed_avxvnni(std::span<const PackedOutput> outs, const float* x, DType t, int64_t n_tokens,
                                int64_t n_in, ThreadPool& pool);
void matmul_int8_packed_vnni256(std::span<const PackedOutput> outs, const float* x, DType t, int64_t n_tokens,
                                int64_t n_in, ThreadPool& pool);

}  // namespace detail

}  // namespace troupe::kernels

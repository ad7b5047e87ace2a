// The int8 path of matmul for quantized weights (not under exact math): the
// activations are quantized once per call to int8 blocks of 32 with an f32
// scale each, and the products are integer dot products (AVX-512 VNNI
// vpdpbusd; AMX tiles for prefill where the CPU has them), with f32
// accumulation across blocks. The dispatcher is matmul.cpp; the kernels are
// quantize_acts_vnni.cpp (activations), matmul_int8_vnni.cpp (GEMV, VNNI
// GEMM) and matmul_int8_amx.cpp.
//
// Every supported weight type is read as unsigned integers u (0..255) with
// w = scale * (u - offset) + min per sub-block, so that vpdpbusd (u8 × s8)
// applies directly: the offset is folded into an integer bias computed from
// the activations' sums, and the min into an f32 term.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.hpp"
#include "core/thread_pool.hpp"
#include "kernels/cpu/matmul_impl.hpp"

namespace troupe::kernels::detail {

// A vpdpbusd lane covers 4 consecutive inputs; a 32-block spans 8 lanes.
inline constexpr int64_t kLaneInputs = 4;

// x[n_tokens, n_in] quantized: per block b of 32 inputs of token t,
// x ≈ d[t][b] * q[t][32 b .. 32 b + 32). Rows are padded with zeros to whole
// pairs of blocks (64 inputs), so a 512-bit load never leaves a row, and, for
// a GEMM, the token count to a multiple of kActTokenPad with zero rows, so a
// 16-row tile load never leaves the buffer.
inline constexpr int64_t kActTokenPad = 16;
// The VNNI GEMM runs tiles of kActTile tokens; for it the activations are
// also stored tile by tile, the tile's tokens side by side, so that one
// pointer (and displacements) reaches every token's inputs and one more its
// per-sub-block values: with a pointer a token, the 8-token tile spilled
// pointers to the stack and kept others in vector registers.
inline constexpr int64_t kActTile = 8;
static_assert(kActTokenPad % kActTile == 0);
struct TileSub {  // one sub-block of a tile's tokens
  int32_t bias[kActTile];  // sub_bias
  float d[kActTile];       // d of the sub-block's block
  float dsum[kActTile];    // sub_dsum
};

struct QuantizedActs {
  int64_t n_tokens = 0;
  int64_t n_in = 0;
  int64_t ldq = 0;                  // bytes of q per token: n_in rounded up to 64
  int64_t nb = 0;                   // blocks per token row: ldq / 32
  int64_t n_sub = 0;                // sub-blocks per token row (of sub_k inputs, see Int8Panel)
  const int8_t* q = nullptr;        // [padded tokens, ldq]
  const float* d = nullptr;         // [padded tokens, nb]
  const int32_t* sub_bias = nullptr;  // [padded tokens, n_sub]: -offset * (sum of q over the sub-block)
  const float* sub_dsum = nullptr;    // [padded tokens, n_sub]: d * (sum of q over the sub-block)
  // For the GEMV only (null when not asked for), one value per vpdpbusd lane:
  const float* lane_d = nullptr;       // [n_tokens, ldq / 4]: d of the lane's block
  const int32_t* lane_bias = nullptr;  // [n_tokens, ldq / 4]: -offset * (sum of the lane's 4 q)
  const float* lane_dsum = nullptr;    // [n_tokens, ldq / 4]: d * (sum of the lane's 4 q)
  // For a GEMM only (null for a GEMV), the same values tile by tile:
  const int8_t* tile_q = nullptr;      // [padded tokens / kActTile, ldq / 4, kActTile, 4]
  const TileSub* tile_sub = nullptr;   // [padded tokens / kActTile, n_sub]
};

// The sizes of x [n_tokens, n_in] quantized for sub-blocks of sub_k inputs
// (no storage yet).
inline QuantizedActs act_sizes(int64_t n_tokens, int64_t n_in, int64_t sub_k) {
  QuantizedActs qa;
  qa.n_tokens = n_tokens;
  qa.n_in = n_in;
  qa.ldq = (n_in + 63) / 64 * 64;
  qa.nb = qa.ldq / 32;
  qa.n_sub = qa.ldq / sub_k;
  return qa;
}

// Whether the int8 path reads this weight type (every GGUF block type; the
// offset and sub-block of each are its reader's, int8_readers.hpp).
bool int8_supports(DType t);

// Quantizes x into storage owned by the calling thread (valid until it calls
// again), with the sums for `offset` and `sub_k`; the rows of a prefill are
// split over `pool` when one is given. `lanes`: also fill the per-lane arrays.
QuantizedActs quantize_acts(const float* x, int64_t n_tokens, int64_t n_in, bool lanes, int32_t offset,
                            int64_t sub_k, ThreadPool* pool = nullptr);

// y = x · W^T for p over weights as stored: quantizes x, then splits whole
// row units over the pool (as matmul does).
void matmul_int8(const MatmulProblem& p, ThreadPool& pool);


// The int8 GEMV on CPUs with AVX2 and no AVX-512 VNNI (matmul_int8_avx2.cpp):
// y = x · W^T over weights as stored, with the activations quantized as
// above and each row's result the same bits as the VNNI GEMV's. matmul takes
// it for the AVX2 path's GEMV steps (under kAvx2GemmMinTokens tokens: a
// decode), and for every step under batch-invariant math; larger steps keep
// the exact f32 GEMM of matmul_avx2.cpp.
void matmul_int8_avx2(const MatmulProblem& p, ThreadPool& pool);

// quantize_acts for a CPU with AVX2 (matmul_int8_avx2.cpp): the same q, d,
// sub_bias and sub_dsum, no lane or tile arrays; one thread.
QuantizedActs quantize_acts_avx2(const float* x, int64_t n_tokens, int64_t n_in, int32_t offset, int64_t sub_k);

// Below this many tokens the int8 path is a GEMV over the weights as stored;
// from it on, a GEMM over panels of weights unpacked to int8.
inline constexpr int64_t kInt8GemmMinTokens = 16;

// A panel: kPanelRows rows of W unpacked for the GEMM. For each sub-block
// (32 inputs, or 16 for q6_K) the weights are laid out as AMX's B tile and
// vpdpbusd with a broadcast input want them: [K / 4][kPanelRows][4] bytes, so
// one 64-byte line holds 4 consecutive inputs of each of 16 rows.
inline constexpr int64_t kPanelRows = 16;
struct Int8Panel {
  int64_t n_sub = 0;       // sub-blocks per row
  int64_t sub_k = 32;      // inputs per sub-block
  uint8_t* u = nullptr;    // [n_sub][sub_k / 4][kPanelRows][4]
  float* scale = nullptr;  // [n_sub][kPanelRows]
  float* min = nullptr;    // [n_sub][kPanelRows], or null when the type has no min
  int32_t offset = 0;
};

// A panel for rows of n_in inputs in the calling thread's scratch (valid
// until it asks again): sub-blocks of sub_k, min only where has_min.
Int8Panel int8_panel_scratch(int64_t n_in, int64_t sub_k, int32_t offset, bool has_min);

// The VNNI micro-kernel over a panel (matmul_int8_vnni.cpp): y[t][0 .. n_rows)
// for every token t of qa (a GEMM's, with the tiled copy), y rows ldy apart.
void vnni_panel(const Int8Panel& pn, const QuantizedActs& qa, float* y, int64_t ldy, int64_t n_rows);

// The AMX micro-kernel (matmul_int8_amx.cpp): y[t][0 .. n_rows) for every
// token t of qa from one panel, y rows ldy apart. Returns false, having
// written nothing, when this CPU cannot run it.
bool amx_panel(const Int8Panel& pn, const QuantizedActs& qa, float* y, int64_t ldy, int64_t n_rows);

}  // namespace troupe::kernels::detail

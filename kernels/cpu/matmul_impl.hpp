// Internal interface between the matmul dispatcher (matmul.cpp: checks,
// threading, scalar path) and the per-ISA files (matmul_avx2.cpp,
// matmul_avx512.cpp), which each compute a range of output rows.
#pragma once

#include <cstdint>

#include "core/dtype.hpp"

namespace troupe::kernels::detail {

// One call of matmul, already checked: y[n_tokens, n_out] = x[n_tokens, n_in] · W^T.
struct MatmulProblem {
  float* y = nullptr;           // [n_tokens, n_out]
  const float* x = nullptr;     // [n_tokens, n_in]
  const uint8_t* w = nullptr;   // [n_out] rows of w_row_bytes each, in wtype
  DType wtype = DType::f32;
  int64_t n_tokens = 0;
  int64_t n_in = 0;
  int64_t n_out = 0;
  int64_t w_row_bytes = 0;
};

// Threads get output rows in whole units of this many, so that rows are tiled
// the same way for any thread count (a multiple of the 4-row tiles of the ISA
// paths). It is also the height of a prefill weight panel.
inline constexpr int64_t kMatmulRowUnit = 48;

// The AVX2 path's steps below this many tokens are GEMVs (the exact one of
// matmul_avx2.cpp, or the int8 one of matmul_int8_avx2.cpp), from it on the
// exact register-blocked GEMM.
inline constexpr int64_t kAvx2GemmMinTokens = 8;

// Weights per chunk in the per-ISA loaders: one q4_0/q4_1/q8_0 block, or an
// eighth of a k-quant super-block.
inline constexpr int64_t kMatmulChunk = 32;

// Computes y rows [row_begin, row_end) for all tokens. row_begin is a
// multiple of kMatmulRowUnit.
void matmul_rows_scalar(const MatmulProblem& p, int64_t row_begin, int64_t row_end);
void matmul_rows_avx2(const MatmulProblem& p, int64_t row_begin, int64_t row_end);
void matmul_rows_avx512(const MatmulProblem& p, int64_t row_begin, int64_t row_end);

// A per-thread scratch buffer of at least n floats, 64-byte aligned; valid
// until the same thread asks again. Holds a dequantized weight panel.
float* matmul_scratch(int64_t n);

}  // namespace troupe::kernels::detail

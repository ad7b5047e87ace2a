// Reference (scalar) quantization of rows to the k-quant block formats
// q2_K, q3_K, q4_K, q5_K and q6_K (core/dtype.hpp), used by quantize_row (n a
// multiple of kQK_K). The rounding search is Troupe's own (a weighted
// least-squares fit per sub-block), not bit-identical to llama.cpp's, but
// the blocks are the GGUF formats, so ggml and gguf-py read them.
#pragma once

#include <cstdint>

namespace troupe::detail {

void quantize_row_q2_K(const float* x, void* dst, int64_t n);
void quantize_row_q3_K(const float* x, void* dst, int64_t n);
void quantize_row_q4_K(const float* x, void* dst, int64_t n);
void quantize_row_q5_K(const float* x, void* dst, int64_t n);
void quantize_row_q6_K(const float* x, void* dst, int64_t n);
// The non-linear 4-bit types (n a multiple of 32 for iq4_nl): each weight
// takes the level nearest to it under a fitted scale.
void quantize_row_iq4_nl(const float* x, void* dst, int64_t n);
void quantize_row_iq4_xs(const float* x, void* dst, int64_t n);

}  // namespace troupe::detail

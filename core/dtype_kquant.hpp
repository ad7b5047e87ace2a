// Reference (scalar) quantization of rows to the k-quant block formats
// q4_K, q5_K and q6_K (core/dtype.hpp), used by quantize_row (n a multiple
// of kQK_K), and the widening of q3_K into q6_K. The rounding search is
// Troupe's own (a weighted least-squares fit per sub-block), not
// bit-identical to llama.cpp's, but the blocks are the GGUF formats, so ggml
// and gguf-py read them.
#pragma once

#include <cstdint>

namespace troupe::detail {

void quantize_row_q4_K(const float* x, void* dst, int64_t n);
void quantize_row_q5_K(const float* x, void* dst, int64_t n);
void quantize_row_q6_K(const float* x, void* dst, int64_t n);

// q3_K, GGUF type 11 (the bulk of Q3_K_S/M/L files): 16 sub-blocks of 16
// weights, 6-bit scales stored 32 above their value, 3-bit quants (2 low bits
// in qs, the third in hmask):
//   x = d * (sc[j] - 32) * (q - 4)   (q in 0..7)
// Troupe's kernels do not run it: the GGUF loader widens it into q6_K, which
// holds every q3_K weight exactly (sc - 32 is an int8 scale, q - 4 a 6-bit
// quant), at 6.56 bits a weight instead of 3.44.
inline constexpr uint32_t kGgmlQ3_K = 11;
struct BlockQ3_K {
  uint8_t hmask[32];  // bit k of hmask[l]: the third bit of weight 32 k + l
  uint8_t qs[64];     // 2 bits a weight: see widen_q3_K_to_q6_K
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);

// Writes n_blocks q6_K blocks (210 bytes each) that dequantize bit for bit to
// the n_blocks q3_K blocks at src (no alignment assumed).
void widen_q3_K_to_q6_K(const void* src, void* dst, int64_t n_blocks);

}  // namespace troupe::detail

// mxfp4 (core/dtype.hpp's BlockMXFP4) beyond decoding: the reference
// quantizer behind quantize_row, and the conversion from the layout of
// Hugging Face's gpt-oss checkpoints to GGUF blocks.
#pragma once

#include <cstdint>

namespace troupe {

// Hugging Face's MXFP4 (transformers' integrations/mxfp4.py,
// convert_moe_packed_tensors) to BlockMXFP4. A checkpoint stores a weight
// W [..., n_out, n_in] (gpt-oss: `*_blocks` and `*_scales` of each expert
// projection, `...` = n_expert) as
//   blocks: uint8 [..., n_out, n_in / 32, 16]: byte i of a block holds
//           element 2 i in its low nibble and 2 i + 1 in its high nibble
//   scales: uint8 [..., n_out, n_in / 32]: E8M0, x = fp4(q) * 2^(e - 127)
// with the same FP4 codes as GGUF. Both arrays run over the n_blocks =
// (prod ...) * n_out * n_in / 32 blocks in the order of GGUF's rows (ne0 =
// n_in, ne1 = n_out), so dst gets n_blocks BlockMXFP4 in that order; only
// the nibbles move (GGUF: byte j holds elements j and j + 16) and e is kept
// (GGUF's halved scale goes with its doubled levels). transformers
// transposes the dequantized weight to [..., n_in, n_out]; GGUF rows do not.
// Row order within n_out (gpt-oss interleaves gate and up rows) is the
// caller's.
void mxfp4_blocks_from_hf(const uint8_t* blocks, const uint8_t* scales, int64_t n_blocks, void* dst);

namespace detail {

// ggml's reference rule (quantize_row_mxfp4_ref, and gguf-py's MXFP4):
// e = floor(log2(max |x|)) - 2 + 127 (the largest magnitude, 6, is
// 1.5 * 2^2), then each weight takes the level nearest to x / 2^(e - 128),
// a tie to the lower code. n is a multiple of 32.
void quantize_row_mxfp4(const float* x, void* dst, int64_t n);

}  // namespace detail
}  // namespace troupe

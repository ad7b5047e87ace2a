// 8-bit checkpoints: matrices stored as float8 e4m3 or int8 with a scale per
// block, per row or per matrix. float8 as the FP8 releases publish it
// (transformers' quant_method "fp8": DeepSeek-V3/R1, Qwen3-*-FP8,
// MiniMax-M2, Ministral 3; compressed-tensors' "float-quantized":
// llm-compressor's -FP8 releases); int8 as compressed-tensors'
// "int-quantized" (llm-compressor's -quantized.w8a8 releases).
// No CPU multiplies float8, so each such matrix is dequantized once at load
// into the checkpoint's own float type (HfQuantScheme::to), as transformers
// does on a machine without FP8 units; --quantize then takes it from there.
// int8 rows whose blocks of 32 share a scale on fp16's grid are q8_0 blocks
// already (d x q, the file's very bytes) and keep the file's size.
#pragma once

#include <cstdint>

#include "core/dtype.hpp"
#include "kernels/backend.hpp"
#include "model/hf_quantization.hpp"
#include "model/safetensors.hpp"

namespace troupe {

class ThreadPool;
class WeightStore;

// One float8 e4m3fn byte's value: 1 sign, 4 exponent (bias 7), 3 mantissa
// bits, subnormals, no infinities; 0x7f and 0xff are NaN.
float e4m3_to_f32(uint8_t b);

// w ([n_out, n_in] F8_E4M3 or I8) times its scale tensor, as a q8_0 or s.to
// matrix in store, rows split over pool's threads. Throws
// Error(bad_format) naming both tensors when the scale's shape is none of
// the scheme's, and Error(unsupported) for a scale dtype other than F32,
// BF16 or F16.
Weight read_8bit(const safetensors::TensorInfo& w, const safetensors::TensorInfo& scale, const HfQuantScheme& s,
                 WeightStore& store, ThreadPool& pool);

}  // namespace troupe

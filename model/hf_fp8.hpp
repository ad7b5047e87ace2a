// FP8 checkpoints: matrices stored as float8 e4m3 with a scale per block,
// per row or per matrix, as the FP8 releases publish them (transformers'
// quant_method "fp8": DeepSeek-V3/R1, Qwen3-*-FP8, MiniMax-M2, Ministral 3;
// compressed-tensors' "float-quantized": llm-compressor's -FP8 releases).
// No CPU multiplies float8, so each such matrix is dequantized once at load
// into the checkpoint's own float type (its config's dtype, bf16 when
// unsaid), as transformers does on a machine without FP8 units; --quantize
// then takes it from there.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/dtype.hpp"
#include "kernels/backend.hpp"
#include "model/hf_config.hpp"
#include "model/safetensors.hpp"

namespace troupe {

class ThreadPool;
class WeightStore;

// How one checkpoint's FP8 matrices are scaled. A matrix "<m>.weight"
// [n_out, n_in] has its scale in "<m>.<scale_suffix>": a scalar ([] or
// [1]), one per row ([n_out] or [n_out, 1]), or a grid of blocks
// [ceil(n_out / block_rows), ceil(n_in / block_cols)]; the value is
// float8 x scale.
struct Fp8Scheme {
  std::string scale_suffix;  // "weight_scale_inv" (quant_method "fp8"), "weight_scale" (compressed-tensors)
  int64_t block_rows = 0;    // 0: the checkpoint has no block grid
  int64_t block_cols = 0;
  DType to = DType::bf16;    // the dequantized matrices' type
};

// config.json's quantization_config. nullopt when there is none, or when it
// is one the architecture reads itself (gpt-oss's "mxfp4"). Throws
// Error(unsupported) naming any method or format Troupe cannot run (GPTQ,
// AWQ, bitsandbytes, compressed-tensors' integer formats, ...), and
// Error(bad_format) for a malformed one.
std::optional<Fp8Scheme> read_quantization_config(const HfConfig& cfg);

// One float8 e4m3fn byte's value: 1 sign, 4 exponent (bias 7), 3 mantissa
// bits, subnormals, no infinities; 0x7f and 0xff are NaN.
float e4m3_to_f32(uint8_t b);

// w ([n_out, n_in] F8_E4M3) times its scale tensor, as an s.to matrix in
// store, rows split over pool's threads. Throws Error(bad_format) naming
// both tensors when the scale's shape is none of the scheme's, and
// Error(unsupported) for a scale dtype other than F32, BF16 or F16.
Weight dequantize_fp8(const safetensors::TensorInfo& w, const safetensors::TensorInfo& scale, const Fp8Scheme& s,
                      WeightStore& store, ThreadPool& pool);

}  // namespace troupe

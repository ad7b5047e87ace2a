// Pre-quantized Hugging Face checkpoints: what config.json's
// quantization_config says about the matrices, for the methods Troupe reads
// (the FP8 releases, model/hf_fp8.hpp; compressed-tensors' packed 4-bit
// integers, model/hf_int_packed.hpp). Every other method is refused by name.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/dtype.hpp"
#include "model/hf_config.hpp"

namespace troupe {

struct HfQuantScheme {
  enum class Kind {
    // "<m>.weight" F8_E4M3 [n_out, n_in] with "<m>.<scale_suffix>": a scalar
    // ([] or [1]), one per row ([n_out] or [n_out, 1]), or a grid
    // [ceil(n_out / block_rows), ceil(n_in / block_cols)]; value = float8 x scale.
    fp8,
    // compressed-tensors "pack-quantized": "<m>.weight_packed" I32
    // [n_out, n_in / 8] (element i of a row at bits 4 (i % 8) of word i / 8,
    // stored as q + 8), "<m>.weight_scale" [n_out, n_in / group_size], and
    // without symmetric "<m>.weight_zero_point" I32 [ceil(n_out / 8),
    // groups] packed along the rows; value = (q - zero) x scale.
    int4_packed,
  };
  Kind kind = Kind::fp8;
  std::string scale_suffix;  // fp8: "weight_scale_inv" (quant_method "fp8") or "weight_scale"
  int64_t block_rows = 0;    // fp8: 0 when the checkpoint has no block grid
  int64_t block_cols = 0;
  int64_t group_size = 0;    // int4_packed: 0 for one group per row (strategy "channel")
  bool symmetric = true;     // int4_packed
  DType to = DType::bf16;    // the type a matrix is dequantized to: the config's dtype (bf16 when unsaid)
};

// config.json's quantization_config. nullopt when there is none, or when it
// is one the architecture reads itself (gpt-oss's "mxfp4"). Throws
// Error(unsupported) naming any method or format Troupe cannot run (GPTQ,
// AWQ, bitsandbytes, compressed-tensors' other formats, ...) with what to
// use instead, and Error(bad_format) for a malformed one.
std::optional<HfQuantScheme> read_quantization_config(const HfConfig& cfg);

}  // namespace troupe

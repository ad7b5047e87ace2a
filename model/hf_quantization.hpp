// Pre-quantized Hugging Face checkpoints: what config.json's
// quantization_config says about the matrices, for the methods Troupe reads
// (the FP8 and int8 releases, model/hf_8bit.hpp; 4-bit integers from GPTQ, AWQ and
// compressed-tensors, model/hf_int4.hpp). Every other method is refused by
// name.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "model/hf_config.hpp"
#include "model/safetensors.hpp"

namespace troupe {

struct HfQuantScheme {
  enum class Kind {
    // "<m>.weight" F8_E4M3 [n_out, n_in] with "<m>.<scale_suffix>": a scalar
    // ([] or [1]), one per row ([n_out] or [n_out, 1]), or a grid
    // [ceil(n_out / block_rows), ceil(n_in / block_cols)]; value = float8 x scale.
    fp8,
    // compressed-tensors "int-quantized" (or "naive-quantized"):
    // "<m>.weight" I8 [n_out, n_in] with "<m>.weight_scale", the grids of
    // fp8 (a group of g inputs: blocks of 1 x g); value = int8 x scale.
    int8,
    // The 4-bit integers (model/hf_int4.hpp), value = (q - zero) x scale
    // over groups of group_size inputs (0: a group per row):
    // compressed-tensors "pack-quantized": "<m>.weight_packed" I32
    // [n_out, n_in / 8] (input i of a row in bits 4 (i % 8) of word i / 8,
    // stored q + 8), "<m>.weight_scale" [n_out, groups], and unless
    // symmetric "<m>.weight_zero_point" I32 [ceil(n_out / 8), groups]
    // packed down the rows (zero + 8).
    int4_packed,
    // GPTQ: "<m>.qweight" I32 [n_in / 8, n_out] (input k of output o in bits
    // 4 (k % 8) of word [k / 8][o]), "<m>.qzeros" I32 [groups, n_out / 8]
    // (output o in bits 4 (o % 8); the first format, checkpoint_format
    // "gptq", stores zero - 1), "<m>.scales" [groups, n_out], and
    // "<m>.g_idx" I32 [n_in], each input's group (act-order checkpoints).
    gptq,
    // AWQ (version "gemm"): "<m>.qweight" I32 [n_in, n_out / 8] and
    // "<m>.qzeros" [groups, n_out / 8] with the 8 outputs of a word in the
    // order 0 2 4 6 1 3 5 7, "<m>.scales" [groups, n_out].
    awq,
  };
  Kind kind = Kind::fp8;
  std::string scale_suffix;  // fp8, int8: "weight_scale_inv" (quant_method "fp8") or "weight_scale"
  int64_t block_rows = 0;    // fp8, int8: 0 when the checkpoint has no block grid
  int64_t block_cols = 0;
  int64_t group_size = 0;    // the integer kinds: 0 for one group per row
  bool symmetric = true;     // int4_packed: no zero points stored (all 8)
  int zero_offset = 0;       // gptq: 1 for checkpoint_format "gptq", whose zeros are stored minus 1
  DType to = DType::bf16;    // the type a matrix is dequantized to: the config's dtype (bf16 when unsaid)
};

// config.json's quantization_config. nullopt when there is none, or when it
// is one the architecture reads itself (gpt-oss's "mxfp4"). Throws
// Error(unsupported) naming any method or format Troupe cannot run (GPTQ,
// AWQ, bitsandbytes, compressed-tensors' other formats, ...) with what to
// use instead, and Error(bad_format) for a malformed one.
std::optional<HfQuantScheme> read_quantization_config(const HfConfig& cfg);

// A scale tensor's values in f32 (copied first: the file promises no
// alignment). Throws Error(unsupported) naming it for a dtype other than
// F32, BF16 or F16.
std::vector<float> scale_floats(const safetensors::TensorInfo& scale);

// Whether fp16 holds every value exactly, as a GGUF block's scale must to
// keep a checkpoint's groups bit for bit.
bool on_fp16_grid(const std::vector<float>& values);

}  // namespace troupe

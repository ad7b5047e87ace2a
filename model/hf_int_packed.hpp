// compressed-tensors' "pack-quantized" 4-bit integer matrices, as
// llm-compressor's W4A16 releases store them (model/hf_quantization.hpp has
// the layout). Symmetric groups of a multiple of 32 whose scales fp16 holds
// exactly are q4_0 blocks already (value = d (nibble - 8), the same nibble),
// so they are repacked bit for bit and run on the q4_0 kernels at the file's
// size. Any other (asymmetric, narrower groups, scales off fp16's grid) is
// dequantized into the checkpoint's float type.
#pragma once

#include <cstdint>

#include "kernels/backend.hpp"
#include "model/hf_quantization.hpp"
#include "model/safetensors.hpp"

namespace troupe {

class ThreadPool;
class WeightStore;

// packed (I32 [n_out, n_in / 8]), its scale and, for an asymmetric scheme,
// its zero point, as one matrix [n_out, n_in] in store. Throws
// Error(bad_format) naming the tensor whose dtype or shape is wrong, and
// Error(unsupported) for a scale dtype other than F32, BF16 or F16.
Weight unpack_int4(const safetensors::TensorInfo& packed, const safetensors::TensorInfo& scale,
                   const safetensors::TensorInfo* zero_point, const HfQuantScheme& s, int64_t n_in, int64_t n_out,
                   WeightStore& store, ThreadPool& pool);

}  // namespace troupe

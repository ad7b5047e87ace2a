// 4-bit integer checkpoints: GPTQ ("qweight" packed down the input, "qzeros",
// "scales", "g_idx"), AWQ's GEMM layout ("qweight" packed across the outputs
// in AWQ's interleaved order) and compressed-tensors' "pack-quantized"
// ("weight_packed" along each row). Every one stores value = (q - zero) x
// scale over groups of the input; model/hf_quantization.hpp has the layouts.
//
// Where each block of 32 inputs lies in one group and the scales are on
// fp16's grid (GPTQ's and AWQ's fp16 scales always are; bf16 ones of any
// usual size too), the groups are GGUF blocks already: with every zero at 8,
// q4_0 (d (q - 8), the same nibble, bit for bit); with other zeros, q4_1
// (d q + m, m = -d zero rounded once to fp16). They keep the file's size
// and run on those types' kernels. Other layouts (narrower groups, GPTQ's
// act-order g_idx, scales off fp16's grid) are dequantized into the
// checkpoint's float type.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/backend.hpp"
#include "model/hf_quantization.hpp"
#include "model/safetensors.hpp"

namespace troupe {

class ThreadPool;
class WeightStore;

// The tensors of one quantized nn.Linear [n_out, n_in], by role; zero and
// g_idx may be null where the scheme has none.
struct Int4Tensors {
  const safetensors::TensorInfo* codes = nullptr;  // weight_packed, or qweight
  const safetensors::TensorInfo* scale = nullptr;  // weight_scale, or scales
  const safetensors::TensorInfo* zero = nullptr;   // weight_zero_point, or qzeros
  const safetensors::TensorInfo* g_idx = nullptr;  // GPTQ's column -> group map
};

// The matrix in store: q4_0, q4_1 or s.to as above. Throws
// Error(bad_format) naming the tensor whose dtype, shape or content (a
// g_idx out of range) is wrong, and Error(unsupported) for a scale dtype
// other than F32, BF16 or F16.
Weight read_int4(const Int4Tensors& t, const HfQuantScheme& s, int64_t n_in, int64_t n_out, WeightStore& store,
                 ThreadPool& pool);

}  // namespace troupe

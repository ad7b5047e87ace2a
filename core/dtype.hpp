// Element types of weights and activations, including the GGUF block formats.
// Block layouts are bit-exact to the GGUF definitions (ggml-common.h), so a
// memory-mapped GGUF tensor can be used in place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace troupe {

// Values are GGUF's ggml_type ids where GGUF has the type, so a GGUF tensor
// table converts by a checked cast.
enum class DType : uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q4_1 = 3,
  q8_0 = 8,
  bf16 = 30,
};

struct DTypeInfo {
  std::string_view name;
  int64_t block_size;   // elements per block (1 for plain floats)
  int64_t block_bytes;  // bytes per block
};

// Throws Error(unsupported) for an id Troupe does not know.
const DTypeInfo& dtype_info(DType t);
bool dtype_known(uint32_t ggml_type);
std::string_view dtype_name(DType t);
// Bytes of a row of n elements; n must be a multiple of the block size.
int64_t row_bytes(DType t, int64_t n);
bool is_quantized(DType t);

inline constexpr int64_t kQK = 32;  // elements per q4_0/q4_1/q8_0 block

// GGUF block layouts. `d` is the scale, `m` the minimum, both IEEE fp16 bits.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];  // x[i] = d * qs[i]
};
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];  // x[i] = d * (nibble - 8); low nibbles hold i < 16
};
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];  // x[i] = d * nibble + m; low nibbles hold i < 16
};
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);

// IEEE half and bfloat16 conversions (round to nearest even).
float fp16_to_f32(uint16_t h);
uint16_t f32_to_fp16(float f);
inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
uint16_t f32_to_bf16(float f);

// Row conversions between a weight dtype and f32; n is a multiple of the
// block size. quantize_row uses GGUF's reference rounding.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);
void quantize_row(DType t, const float* src, void* dst, int64_t n);

}  // namespace troupe

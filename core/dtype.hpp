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
  q5_0 = 6,
  q5_1 = 7,
  q8_0 = 8,
  q2_K = 10,
  q3_K = 11,
  q4_K = 12,
  q5_K = 13,
  q6_K = 14,
  iq4_nl = 20,
  iq4_xs = 23,
  bf16 = 30,
  mxfp4 = 39,
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

inline constexpr int64_t kQK = 32;  // elements per q4_0/q4_1/q5_0/q5_1/q8_0 block

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
// k-quants: super-blocks of 256 weights (GGUF's QK_K). q4_K and q5_K split a
// super-block into 8 sub-blocks of 32, each with a 6-bit scale and a 6-bit
// minimum relative to the fp16 super-scales d and dmin:
//   x = d * sc[j] * q - dmin * m[j]   (q in 0..15, or 0..31 for q5_K)
// q6_K splits it into 16 sub-blocks of 16 with int8 scales:
//   x = d * sc[j] * (q - 32)          (q in 0..63)
// q3_K (16 sub-blocks of 16, 6-bit scales stored 32 above their value):
//   x = d * (sc[j] - 32) * (q - 4)    (q in 0..7)
// q2_K (16 sub-blocks of 16, a 4-bit scale and a 4-bit minimum each):
//   x = d * sc[j] * q - dmin * m[j]   (q in 0..3)
inline constexpr int64_t kQK_K = 256;
inline constexpr int kKScaleBytes = 12;  // 8 packed 6-bit (scale, min) pairs
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];  // unpack with kquant_scale_min
  // Sub-blocks 2i and 2i + 1 share bytes qs[32 i .. 32 i + 32): low nibbles
  // hold sub-block 2i, high nibbles 2i + 1.
  uint8_t qs[kQK_K / 2];
};
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQK_K / 8];  // bit j of qh[l]: the 5th bit of weight l of sub-block j
  uint8_t qs[kQK_K / 2];  // low 4 bits, laid out as in q4_K
};
struct BlockQ6_K {
  // Each half (128 weights) of the block uses 64 bytes of ql and 32 of qh:
  // weight 32 k + l of half h (k < 4, l < 32) takes the low (k < 2) or high
  // nibble of ql[64 h + 32 (k & 1) + l] and bits 2k, 2k + 1 of qh[32 h + l].
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
// In q2_K and q3_K, weight l < 32 of chunk j < 8 (half h = j / 4, k = j % 4)
// takes bits 2k, 2k + 1 of qs[32 h + l] as its low 2 bits (and, in q3_K, bit
// j of hmask[l] as the third); chunk j holds sub-blocks 2j (l < 16) and
// 2j + 1, as in q6_K.
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];  // sub-block j: scale in the low nibble, minimum in the high
  uint8_t qs[kQK_K / 4];
  uint16_t d;
  uint16_t dmin;
};
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[kKScaleBytes];  // 16 packed 6-bit scales: unpack with q3_K_scale
  uint16_t d;
};
// iq4_nl and iq4_xs: 4-bit indices into a fixed non-uniform table of int8
// levels (GGUF's kvalues_iq4nl), x = scale * kIq4Levels[q]. iq4_nl: blocks
// of 32 under one fp16 d, laid out as q4_0 (4.5 bits a weight). iq4_xs:
// super-blocks of 256, 8 sub-blocks of 32 with 6-bit scales stored 32 above
// their value, x = d * (sc[j] - 32) * kIq4Levels[q] (4.25 bits a weight).
inline constexpr int8_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113};
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQK / 2];  // as q4_0: low nibbles hold weights 0..15
};
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;  // bits 2j, 2j + 1: the top 2 bits of sub-block j's scale
  uint8_t scales_l[kQK_K / 64];  // nibble j % 2 of byte j / 2: its low 4 bits
  uint8_t qs[kQK_K / 2];  // sub-block j: bytes 16 j .. 16 j + 16, low nibbles weights 0..15
};
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockIQ4_XS) == 136);
// mxfp4 (OCP microscaling FP4; gpt-oss ships its MoE experts in it): blocks
// of 32 FP4 E2M1 codes under one E8M0 exponent e. Bit 3 of a code is its
// sign, bits 0..2 pick a magnitude in {0, 0.5, 1, 1.5, 2, 3, 4, 6}, and
// x = fp4(q) * 2^(e - 127). As in ggml, the levels are kept doubled, as
// integers, and the scale halved: x = kMxfp4Levels[q] * 2^(e - 128)
// (mxfp4_scale), the same value. Nibbles as q4_0 (low nibbles weights
// 0..15); 17 bytes, byte-aligned (4.25 bits a weight).
inline constexpr int8_t kMxfp4Levels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
struct BlockMXFP4 {
  uint8_t e;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockMXFP4) == 17 && alignof(BlockMXFP4) == 1);
// 2^(e - 128), exact: e = 0 and 1 give the subnormals 2^-128 and 2^-127
// (ggml's E8M0-to-fp32-half; e = 255 is 2^127, not a NaN, as in ggml).
inline uint32_t mxfp4_scale_bits(uint8_t e) { return e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23; }
inline float mxfp4_scale(uint8_t e) {
  const uint32_t bits = mxfp4_scale_bits(e);
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
// The stored scale (0..63, 32 above its value) of sub-block j < 8 of an
// iq4_xs block.
inline int iq4_xs_scale(const BlockIQ4_XS& b, int j) {
  return ((b.scales_l[j / 2] >> (4 * (j % 2))) & 0x0f) | (((b.scales_h >> (2 * j)) & 3) << 4);
}
// The 2 low bits of weight l < 32 of chunk j < 8 of a q2_K or q3_K block.
inline int kquant_crumb(const uint8_t* qs, int j, int l) { return (qs[32 * (j / 4) + l] >> (2 * (j % 4))) & 3; }
// The stored scale (0..63, 32 above its value) of sub-block j < 16 of a q3_K
// block: 4 low bits from a nibble of bytes 0-7, 2 high bits from bytes 8-11.
inline int q3_K_scale(const uint8_t* s, int j) {
  const int low = j < 8 ? s[j] & 0x0f : s[j - 8] >> 4;
  const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return low | (high << 4);
}
// Scale and minimum (6 bits each) of sub-block j < 8 of a q4_K/q5_K block.
inline void kquant_scale_min(const uint8_t* scales, int j, uint8_t& sc, uint8_t& m) {
  if (j < 4) {
    sc = scales[j] & 63;
    m = scales[j + 4] & 63;
  } else {
    sc = static_cast<uint8_t>((scales[j + 4] & 0x0f) | ((scales[j - 4] >> 6) << 4));
    m = static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
// q5: a 4-bit nibble as in q4 plus a 5th bit: bit i of qh is weight i's.
// llama.cpp gives q5_0/q5_1 to the tensors of a Q4_K_M/Q5_K_M file whose rows
// are not a whole number of 256-weight super-blocks.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];        // little-endian uint32, unaligned in the block
  uint8_t qs[kQK / 2];  // x[i] = d * (q - 16)
};
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];  // x[i] = d * q + m
};
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
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

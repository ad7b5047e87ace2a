// Element types of the KV cache pages and the byte layout of one cached row
// (one slot of one kv head: head_dim values). f32 is exact; f16 and bf16
// halve the bytes; q8_0 stores int8 values with one fp16 scale per group of
// 32, about 3.8x smaller than f32. Kernels read these rows directly and
// dequantize in registers (kernels/cpu/attention_tiles*.cpp, kernels/cuda).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace troupe {

enum class KvType : uint8_t { f32 = 0, f16 = 1, bf16 = 2, q8_0 = 3 };

// Values sharing one q8_0 scale. A row whose head_dim is not a multiple of 32
// ends with a shorter group (stories260K has head_dim 8: one group of 8).
inline constexpr int64_t kKvQ8Group = 32;

// "f32", "f16", "bf16", "q8_0".
const char* kv_type_name(KvType t);
// Throws Error(invalid_argument) naming the accepted spellings.
KvType parse_kv_type(std::string_view name);

// Bytes of one row of head_dim values. q8_0: head_dim int8 quants, then
// ceil(head_dim / 32) fp16 scales (quants first, so a SIMD load takes 8 or
// 16 of them at offset i whatever the row's scales).
constexpr int64_t kv_row_bytes(KvType t, int64_t head_dim) {
  switch (t) {
    case KvType::f32: return head_dim * 4;
    case KvType::f16:
    case KvType::bf16: return head_dim * 2;
    case KvType::q8_0: return head_dim + 2 * ((head_dim + kKvQ8Group - 1) / kKvQ8Group);
  }
  return 0;
}

// Bytes per cached token of a model: K and V rows of every kv head of
// n_layer layers.
constexpr int64_t kv_token_bytes(KvType t, int64_t n_layer, int64_t n_head_kv, int64_t head_dim) {
  return 2 * n_layer * n_head_kv * kv_row_bytes(t, head_dim);
}

// Reference conversions of one row (head_dim values) to and from a cached
// row. q8_0 rounds like GGUF's reference quantizer: scale = max|x| / 127,
// stored as fp16, values round(x / scale).
void kv_quantize_row(KvType t, const float* src, void* dst, int64_t head_dim);
void kv_dequantize_row(KvType t, const void* src, float* dst, int64_t head_dim);

// Parses a byte size: a plain number of bytes or one with a suffix K, M, G
// (powers of 1000) or KiB, MiB, GiB (powers of 1024), e.g. "2GiB", "512MiB".
// Throws Error(invalid_argument) for anything else or zero.
int64_t parse_byte_size(std::string_view text);
std::string format_bytes(int64_t bytes);

}  // namespace troupe

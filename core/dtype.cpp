// DType metadata, half/bfloat16 conversion and the reference (scalar) GGUF
// block quantization. SIMD kernels in kernels/cpu are tested against these.
#include "core/dtype.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.hpp"

namespace troupe {
namespace {

const DTypeInfo kF32{"f32", 1, 4};
const DTypeInfo kF16{"f16", 1, 2};
const DTypeInfo kBF16{"bf16", 1, 2};
const DTypeInfo kQ8_0{"q8_0", kQK, sizeof(BlockQ8_0)};
const DTypeInfo kQ4_0{"q4_0", kQK, sizeof(BlockQ4_0)};
const DTypeInfo kQ4_1{"q4_1", kQK, sizeof(BlockQ4_1)};

uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float bits_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace

const DTypeInfo& dtype_info(DType t) {
  switch (t) {
    case DType::f32: return kF32;
    case DType::f16: return kF16;
    case DType::bf16: return kBF16;
    case DType::q8_0: return kQ8_0;
    case DType::q4_0: return kQ4_0;
    case DType::q4_1: return kQ4_1;
  }
  throw Error(Errc::unsupported, "unknown dtype id " + std::to_string(static_cast<uint32_t>(t)));
}

bool dtype_known(uint32_t id) {
  switch (static_cast<DType>(id)) {
    case DType::f32: case DType::f16: case DType::bf16:
    case DType::q8_0: case DType::q4_0: case DType::q4_1:
      return true;
  }
  return false;
}

std::string_view dtype_name(DType t) { return dtype_info(t).name; }

bool is_quantized(DType t) { return dtype_info(t).block_size > 1; }

int64_t row_bytes(DType t, int64_t n) {
  const DTypeInfo& info = dtype_info(t);
  if (n % info.block_size != 0) {
    throw Error(Errc::invalid_argument, "row of " + std::to_string(n) + " elements is not a multiple of the " +
                                            std::string(info.name) + " block size " + std::to_string(info.block_size));
  }
  return n / info.block_size * info.block_bytes;
}

float fp16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (mant << 13));  // inf / nan
  if (exp != 0) return bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return bits_f32(sign);
  // Subnormal half: value = mant * 2^-24, exact in f32.
  float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
  return sign ? -v : v;
}

uint16_t f32_to_fp16(float f) {
  const uint32_t x = f32_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u);
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: inf
  if (ax < 0x38800000u) {
    // Result is subnormal (or zero): scale so the integer part is the mantissa,
    // and let the FPU round to nearest even.
    float v = bits_f32(ax) * 16777216.0f;  // 2^24
    return sign | static_cast<uint16_t>(std::nearbyint(v));
  }
  uint32_t mant = ax & 0x7fffffu;
  uint32_t exp = (ax >> 23) - 112;
  uint32_t h = (exp << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // may carry into exp: still correct
  return sign | static_cast<uint16_t>(h);
}

uint16_t f32_to_bf16(float f) {
  uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet nan
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
  switch (t) {
    case DType::f32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case DType::f16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(s[i]);
      return;
    }
    case DType::bf16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::q8_0: {
      auto* b = static_cast<const BlockQ8_0*>(src);
      for (int64_t i = 0; i < n / kQK; ++i) {
        const float d = fp16_to_f32(b[i].d);
        for (int j = 0; j < kQK; ++j) dst[i * kQK + j] = d * static_cast<float>(b[i].qs[j]);
      }
      return;
    }
    case DType::q4_0: {
      auto* b = static_cast<const BlockQ4_0*>(src);
      for (int64_t i = 0; i < n / kQK; ++i) {
        const float d = fp16_to_f32(b[i].d);
        for (int j = 0; j < kQK / 2; ++j) {
          dst[i * kQK + j] = d * static_cast<float>((b[i].qs[j] & 0x0f) - 8);
          dst[i * kQK + j + kQK / 2] = d * static_cast<float>((b[i].qs[j] >> 4) - 8);
        }
      }
      return;
    }
    case DType::q4_1: {
      auto* b = static_cast<const BlockQ4_1*>(src);
      for (int64_t i = 0; i < n / kQK; ++i) {
        const float d = fp16_to_f32(b[i].d);
        const float m = fp16_to_f32(b[i].m);
        for (int j = 0; j < kQK / 2; ++j) {
          dst[i * kQK + j] = d * static_cast<float>(b[i].qs[j] & 0x0f) + m;
          dst[i * kQK + j + kQK / 2] = d * static_cast<float>(b[i].qs[j] >> 4) + m;
        }
      }
      return;
    }
  }
  throw Error(Errc::unsupported, "dequantize_row: unknown dtype");
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  (void)row_bytes(t, n);  // validates n against the block size
  switch (t) {
    case DType::f32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case DType::f16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_fp16(src[i]);
      return;
    }
    case DType::bf16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::q8_0: {
      auto* b = static_cast<BlockQ8_0*>(dst);
      for (int64_t i = 0; i < n / kQK; ++i) {
        const float* x = src + i * kQK;
        float amax = 0.0f;
        for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = f32_to_fp16(d);
        for (int j = 0; j < kQK; ++j) b[i].qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
      }
      return;
    }
    case DType::q4_0: {
      auto* b = static_cast<BlockQ4_0*>(dst);
      for (int64_t i = 0; i < n / kQK; ++i) {
        const float* x = src + i * kQK;
        // The scale keeps the sign of the element largest in magnitude, so
        // that element maps exactly to -8.
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < kQK; ++j) {
          if (std::fabs(x[j]) > amax) {
            amax = std::fabs(x[j]);
            max = x[j];
          }
        }
        const float d = max / -8.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = f32_to_fp16(d);
        for (int j = 0; j < kQK / 2; ++j) {
          const auto lo = static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f))));
          const auto hi = static_cast<uint8_t>(
              std::min(15, static_cast<int>(static_cast<int8_t>(x[j + kQK / 2] * id + 8.5f))));
          b[i].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
        }
      }
      return;
    }
    case DType::q4_1: {
      auto* b = static_cast<BlockQ4_1*>(dst);
      for (int64_t i = 0; i < n / kQK; ++i) {
        const float* x = src + i * kQK;
        float lo_v = x[0], hi_v = x[0];
        for (int j = 1; j < kQK; ++j) {
          lo_v = std::min(lo_v, x[j]);
          hi_v = std::max(hi_v, x[j]);
        }
        const float d = (hi_v - lo_v) / 15.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = f32_to_fp16(d);
        b[i].m = f32_to_fp16(lo_v);
        for (int j = 0; j < kQK / 2; ++j) {
          const auto q0 = static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>((x[j] - lo_v) * id + 0.5f))));
          const auto q1 = static_cast<uint8_t>(
              std::min(15, static_cast<int>(static_cast<int8_t>((x[j + kQK / 2] - lo_v) * id + 0.5f))));
          b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
        }
      }
      return;
    }
  }
}

}  // namespace troupe

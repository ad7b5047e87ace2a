// DType metadata, half/bfloat16 conversion and the reference (scalar) GGUF
// block quantization. SIMD kernels in kernels/cpu are tested against these.
#include "core/dtype.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/dtype_kquant.hpp"
#include "core/dtype_mxfp4.hpp"
#include "core/error.hpp"

namespace troupe {
namespace {

const DTypeInfo kF32{"f32", 1, 4};
const DTypeInfo kF16{"f16", 1, 2};
const DTypeInfo kBF16{"bf16", 1, 2};
const DTypeInfo kQ8_0{"q8_0", kQK, sizeof(BlockQ8_0)};
const DTypeInfo kQ4_0{"q4_0", kQK, sizeof(BlockQ4_0)};
const DTypeInfo kQ4_1{"q4_1", kQK, sizeof(BlockQ4_1)};
const DTypeInfo kQ5_0{"q5_0", kQK, sizeof(BlockQ5_0)};
const DTypeInfo kQ5_1{"q5_1", kQK, sizeof(BlockQ5_1)};
const DTypeInfo kQ2_K{"q2_K", kQK_K, sizeof(BlockQ2_K)};
const DTypeInfo kQ3_K{"q3_K", kQK_K, sizeof(BlockQ3_K)};
const DTypeInfo kQ4_K{"q4_K", kQK_K, sizeof(BlockQ4_K)};
const DTypeInfo kIQ4_NL{"iq4_nl", kQK, sizeof(BlockIQ4_NL)};
const DTypeInfo kIQ4_XS{"iq4_xs", kQK_K, sizeof(BlockIQ4_XS)};
const DTypeInfo kMXFP4{"mxfp4", kQK, sizeof(BlockMXFP4)};
const DTypeInfo kQ5_K{"q5_K", kQK_K, sizeof(BlockQ5_K)};
const DTypeInfo kQ6_K{"q6_K", kQK_K, sizeof(BlockQ6_K)};

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

// One q4_K (qh null) or q5_K super-block. d * sc and dmin * m are exact
// (11 x 6 bits), and so is d * sc * q, so each weight is rounded once, in the
// final subtraction, as in ggml and gguf-py.
void dequantize_q45_K(uint16_t d16, uint16_t dmin16, const uint8_t* scales, const uint8_t* qs, const uint8_t* qh,
                      float* y) {
  const float d = fp16_to_f32(d16);
  const float dmin = fp16_to_f32(dmin16);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    kquant_scale_min(scales, j, sc, m);
    const float ds = d * static_cast<float>(sc);
    const float dm = dmin * static_cast<float>(m);
    const uint8_t* q = qs + (j / 2) * 32;
    const int shift = (j & 1) * 4;
    for (int l = 0; l < 32; ++l) {
      int v = (q[l] >> shift) & 0x0f;
      if (qh != nullptr) v |= ((qh[l] >> j) & 1) << 4;
      y[j * 32 + l] = ds * static_cast<float>(v) - dm;
    }
  }
}

// The 5-bit quant (0..31) of weight j of a q5_0/q5_1 block.
int q5_quant(const uint8_t* qh, const uint8_t* qs, int j) {
  const int nibble = j < kQK / 2 ? (qs[j] & 0x0f) : (qs[j - kQK / 2] >> 4);
  return nibble | (((qh[j / 8] >> (j % 8)) & 1) << 4);
}

// Packs 32 quants (0..31) into a q5 block's qh and qs.
// The element of x[0, kQK) largest in magnitude, with its sign: q4_0 and
// q5_0 scale so that it maps exactly to the lowest level.
float signed_absmax(const float* x) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kQK; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// The range of x[0, kQK): q4_1 and q5_1 store its minimum and step.
void min_max(const float* x, float& lo, float& hi) {
  lo = hi = x[0];
  for (int j = 1; j < kQK; ++j) {
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
}

void q5_pack(const int* q, uint8_t* qh, uint8_t* qs) {
  std::memset(qh, 0, 4);
  for (int j = 0; j < kQK; ++j) qh[j / 8] = static_cast<uint8_t>(qh[j / 8] | (((q[j] >> 4) & 1) << (j % 8)));
  for (int j = 0; j < kQK / 2; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + kQK / 2] & 0x0f) << 4));
}

// The 6-bit quant (0..63) of weight l < 32 of chunk j < 8 of a q6_K block.
int q6_K_quant(const BlockQ6_K& b, int j, int l) {
  const int h = j / 4, k = j % 4;
  const int lo = (b.ql[64 * h + 32 * (k & 1) + l] >> (4 * (k >> 1))) & 0x0f;
  const int hi = (b.qh[32 * h + l] >> (2 * k)) & 3;
  return lo | (hi << 4);
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
    case DType::q5_0: return kQ5_0;
    case DType::q5_1: return kQ5_1;
    case DType::q2_K: return kQ2_K;
    case DType::q3_K: return kQ3_K;
    case DType::q4_K: return kQ4_K;
    case DType::q5_K: return kQ5_K;
    case DType::q6_K: return kQ6_K;
    case DType::iq4_nl: return kIQ4_NL;
    case DType::iq4_xs: return kIQ4_XS;
    case DType::mxfp4: return kMXFP4;
  }
  throw Error(Errc::unsupported, "unknown dtype id " + std::to_string(static_cast<uint32_t>(t)));
}

bool dtype_known(uint32_t id) {
  switch (static_cast<DType>(id)) {
    case DType::f32: case DType::f16: case DType::bf16:
    case DType::q8_0: case DType::q4_0: case DType::q4_1:
    case DType::q5_0: case DType::q5_1:
    case DType::q2_K: case DType::q3_K:
    case DType::q4_K: case DType::q5_K: case DType::q6_K:
    case DType::iq4_nl: case DType::iq4_xs: case DType::mxfp4:
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
    case DType::q5_0: {
      auto* b = static_cast<const BlockQ5_0*>(src);
      for (int64_t i = 0; i < n / kQK; ++i) {
        const float d = fp16_to_f32(b[i].d);
        for (int j = 0; j < kQK; ++j) dst[i * kQK + j] = d * static_cast<float>(q5_quant(b[i].qh, b[i].qs, j) - 16);
      }
      return;
    }
    case DType::q5_1: {
      auto* b = static_cast<const BlockQ5_1*>(src);
      for (int64_t i = 0; i < n / kQK; ++i) {
        const float d = fp16_to_f32(b[i].d);
        const float m = fp16_to_f32(b[i].m);
        // d * q is exact (11 x 5 bits): one rounding, in the addition.
        for (int j = 0; j < kQK; ++j) dst[i * kQK + j] = d * static_cast<float>(q5_quant(b[i].qh, b[i].qs, j)) + m;
      }
      return;
    }
    case DType::q2_K: {
      auto* b = static_cast<const BlockQ2_K*>(src);
      for (int64_t i = 0; i < n / kQK_K; ++i) {
        const float d = fp16_to_f32(b[i].d);
        const float dmin = fp16_to_f32(b[i].dmin);
        float* y = dst + i * kQK_K;
        for (int s = 0; s < 16; ++s) {  // sub-blocks of 16
          // d * sc and dmin * m are exact (11 x 4 bits), and so is d * sc * q:
          // one rounding, in the subtraction, as in ggml and gguf-py.
          const float ds = d * static_cast<float>(b[i].scales[s] & 0x0f);
          const float dm = dmin * static_cast<float>(b[i].scales[s] >> 4);
          for (int l = 0; l < 16; ++l) {
            y[16 * s + l] = ds * static_cast<float>(kquant_crumb(b[i].qs, s / 2, 16 * (s % 2) + l)) - dm;
          }
        }
      }
      return;
    }
    case DType::q3_K: {
      auto* b = static_cast<const BlockQ3_K*>(src);
      for (int64_t i = 0; i < n / kQK_K; ++i) {
        const float d = fp16_to_f32(b[i].d);
        float* y = dst + i * kQK_K;
        for (int s = 0; s < 16; ++s) {
          // Exact products again (11 x 6 x 3 bits): no rounding at all.
          const float ds = d * static_cast<float>(q3_K_scale(b[i].scales, s) - 32);
          const int j = s / 2;
          for (int l = 16 * (s % 2); l < 16 * (s % 2) + 16; ++l) {
            const int q = kquant_crumb(b[i].qs, j, l) | (((b[i].hmask[l] >> j) & 1) << 2);
            y[32 * j + l] = ds * static_cast<float>(q - 4);
          }
        }
      }
      return;
    }
    case DType::q4_K: {
      auto* b = static_cast<const BlockQ4_K*>(src);
      for (int64_t i = 0; i < n / kQK_K; ++i) dequantize_q45_K(b[i].d, b[i].dmin, b[i].scales, b[i].qs, nullptr, dst + i * kQK_K);
      return;
    }
    case DType::q5_K: {
      auto* b = static_cast<const BlockQ5_K*>(src);
      for (int64_t i = 0; i < n / kQK_K; ++i) dequantize_q45_K(b[i].d, b[i].dmin, b[i].scales, b[i].qs, b[i].qh, dst + i * kQK_K);
      return;
    }
    case DType::q6_K: {
      auto* b = static_cast<const BlockQ6_K*>(src);
      for (int64_t i = 0; i < n / kQK_K; ++i) {
        const float d = fp16_to_f32(b[i].d);
        float* y = dst + i * kQK_K;
        for (int j = 0; j < kQK_K / 32; ++j) {  // 32-weight chunks
          for (int l = 0; l < 32; ++l) {
            const int q = q6_K_quant(b[i], j, l);
            // d * sc is exact (11 x 8 bits), and so is its product with q - 32
            // (6 more bits): one rounding-free value, as ggml computes it.
            y[j * 32 + l] = d * static_cast<float>(b[i].scales[2 * j + l / 16]) * static_cast<float>(q - 32);
          }
        }
      }
      return;
    }
    case DType::iq4_nl: {
      auto* b = static_cast<const BlockIQ4_NL*>(src);
      for (int64_t i = 0; i < n / kQK; ++i) {
        const float d = fp16_to_f32(b[i].d);
        for (int j = 0; j < kQK / 2; ++j) {  // d * level is exact (11 x 7 bits)
          dst[i * kQK + j] = d * static_cast<float>(kIq4Levels[b[i].qs[j] & 0x0f]);
          dst[i * kQK + j + kQK / 2] = d * static_cast<float>(kIq4Levels[b[i].qs[j] >> 4]);
        }
      }
      return;
    }
    case DType::iq4_xs: {
      auto* b = static_cast<const BlockIQ4_XS*>(src);
      for (int64_t i = 0; i < n / kQK_K; ++i) {
        const float d = fp16_to_f32(b[i].d);
        float* y = dst + i * kQK_K;
        for (int j = 0; j < 8; ++j) {
          // Exact products (11 x 6 x 7 significant bits at most).
          const float ds = d * static_cast<float>(iq4_xs_scale(b[i], j) - 32);
          for (int l = 0; l < 16; ++l) {
            y[32 * j + l] = ds * static_cast<float>(kIq4Levels[b[i].qs[16 * j + l] & 0x0f]);
            y[32 * j + l + 16] = ds * static_cast<float>(kIq4Levels[b[i].qs[16 * j + l] >> 4]);
          }
        }
      }
      return;
    }
    case DType::mxfp4: {
      auto* b = static_cast<const BlockMXFP4*>(src);
      for (int64_t i = 0; i < n / kQK; ++i) {
        const float d = mxfp4_scale(b[i].e);
        for (int j = 0; j < kQK / 2; ++j) {  // a power of two times a level: exact (short of overflow)
          dst[i * kQK + j] = d * static_cast<float>(kMxfp4Levels[b[i].qs[j] & 0x0f]);
          dst[i * kQK + j + kQK / 2] = d * static_cast<float>(kMxfp4Levels[b[i].qs[j] >> 4]);
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
        const float d = signed_absmax(x) / -8.0f;
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
        float lo_v, hi_v;
        min_max(x, lo_v, hi_v);
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
    case DType::q5_0: {
      // As q4_0, with 32 levels: the element largest in magnitude maps to -16.
      auto* b = static_cast<BlockQ5_0*>(dst);
      for (int64_t i = 0; i < n / kQK; ++i) {
        const float* x = src + i * kQK;
        const float d = signed_absmax(x) / -16.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = f32_to_fp16(d);
        int q[kQK];
        for (int j = 0; j < kQK; ++j) q[j] = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
        q5_pack(q, b[i].qh, b[i].qs);
      }
      return;
    }
    case DType::q5_1: {
      auto* b = static_cast<BlockQ5_1*>(dst);
      for (int64_t i = 0; i < n / kQK; ++i) {
        const float* x = src + i * kQK;
        float lo_v, hi_v;
        min_max(x, lo_v, hi_v);
        const float d = (hi_v - lo_v) / 31.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = f32_to_fp16(d);
        b[i].m = f32_to_fp16(lo_v);
        int q[kQK];
        for (int j = 0; j < kQK; ++j) q[j] = std::min(31, static_cast<int>(static_cast<int8_t>((x[j] - lo_v) * id + 0.5f)));
        q5_pack(q, b[i].qh, b[i].qs);
      }
      return;
    }
    case DType::q2_K: return detail::quantize_row_q2_K(src, dst, n);
    case DType::q3_K: return detail::quantize_row_q3_K(src, dst, n);
    case DType::q4_K: return detail::quantize_row_q4_K(src, dst, n);
    case DType::q5_K: return detail::quantize_row_q5_K(src, dst, n);
    case DType::q6_K: return detail::quantize_row_q6_K(src, dst, n);
    case DType::iq4_nl: return detail::quantize_row_iq4_nl(src, dst, n);
    case DType::iq4_xs: return detail::quantize_row_iq4_xs(src, dst, n);
    case DType::mxfp4: return detail::quantize_row_mxfp4(src, dst, n);
  }
}

}  // namespace troupe

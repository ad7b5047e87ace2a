// Decoders of the GGUF blocks that the CUDA kernels read as they are stored:
// q5_0, q5_1, the k-quants q2_K, q3_K, q4_K, q5_K, q6_K and the non-linear
// iq4_nl, iq4_xs and mxfp4. Host and device
// code both: the GEMV and the
// row dequantization run them on the GPU, and tests/cuda checks them on the
// host against core's dequantize_row, so the block arithmetic is verified
// where no GPU is present. Every block field is read a byte at a time: q5_0
// (22 bytes), q3_K (110) and q6_K (210) blocks are only 2-byte aligned in a
// row.
//
// The products are formed as dequantize_row forms them (d * sc exact, one
// rounding in the last add or multiply), so a fused multiply-add gives the
// same bits.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/dtype.hpp"

#ifdef __CUDACC__
#include <cuda_fp16.h>
#define TROUPE_HD __host__ __device__ __forceinline__
#else
#define TROUPE_HD inline
#endif

namespace troupe::cuda {

TROUPE_HD float fp16_at(const unsigned char* p) {
  const auto h = static_cast<uint16_t>(p[0] | (p[1] << 8));
#ifdef __CUDA_ARCH__
  return __half2float(__ushort_as_half(h));
#else
  return fp16_to_f32(h);
#endif
}

// The 6-bit scale and min of sub-block j < 8 of a q4_K/q5_K block (as
// core's kquant_scale_min).
TROUPE_HD void scale_min_at(const unsigned char* scales, int j, int& sc, int& m) {
  if (j < 4) {
    sc = scales[j] & 63;
    m = scales[j + 4] & 63;
  } else {
    sc = (scales[j + 4] & 0x0f) | ((scales[j - 4] >> 6) << 4);
    m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// ---- the 32-weight blocks: chunk c is block c ----

// q5_0 (d, qh[4], qs[16]): weight l = d * (q - 16), q's low nibble from
// qs[l % 16] (low half for l < 16), its 5th bit bit l of qh.
template <bool kMin>
TROUPE_HD void decode_q5(const unsigned char* row, int64_t c, float* w) {
  constexpr int64_t kBytes = kMin ? sizeof(BlockQ5_1) : sizeof(BlockQ5_0);
  const unsigned char* b = row + c * kBytes;
  const float d = fp16_at(b);
  const float m = kMin ? fp16_at(b + 2) : 0.0f;
  const unsigned char* qh = b + (kMin ? 4 : 2);
  const unsigned char* qs = qh + 4;
  const uint32_t high = qh[0] | (qh[1] << 8) | (qh[2] << 16) | (static_cast<uint32_t>(qh[3]) << 24);
  for (int l = 0; l < kQK; ++l) {
    const int nibble = l < kQK / 2 ? (qs[l] & 0x0f) : (qs[l - kQK / 2] >> 4);
    const int q = nibble | static_cast<int>(((high >> l) & 1) << 4);
    w[l] = kMin ? d * static_cast<float>(q) + m : d * static_cast<float>(q - 16);
  }
}

// ---- the k-quants: chunk c is weights 32 (c % 8).. of super-block c / 8 ----

// q4_K (d, dmin, scales[12], qs[128]) and q5_K (the same, qh[32] before
// qs): weight l of chunk j = d * sc_j * q - dmin * m_j, q's nibble from
// qs[32 (j / 2) + l] (low for even j), its 5th bit (q5_K) bit j of qh[l].
template <bool kFive>
TROUPE_HD void decode_q45_K(const unsigned char* row, int64_t c, float* w) {
  constexpr int64_t kBytes = kFive ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K);
  const unsigned char* b = row + (c / 8) * kBytes;
  const int j = static_cast<int>(c % 8);
  int sc, m;
  scale_min_at(b + 4, j, sc, m);
  const float ds = fp16_at(b) * static_cast<float>(sc);
  const float dm = fp16_at(b + 2) * static_cast<float>(m);
  const unsigned char* qh = b + 4 + kKScaleBytes;
  const unsigned char* qs = qh + (kFive ? kQK_K / 8 : 0) + (j / 2) * 32;
  const int shift = (j & 1) * 4;
  for (int l = 0; l < 32; ++l) {
    int q = (qs[l] >> shift) & 0x0f;
    if (kFive) q |= ((qh[l] >> j) & 1) << 4;
    w[l] = ds * static_cast<float>(q) - dm;
  }
}

// q6_K (ql[128], qh[64], scales[16] int8, d): chunk j = 4 h + k, weight l:
// the low (k < 2) or high nibble of ql[64 h + 32 (k & 1) + l] under bits
// 2k, 2k + 1 of qh[32 h + l]; value d * scale[2 j + l / 16] * (q - 32).
TROUPE_HD void decode_q6_K(const unsigned char* row, int64_t c, float* w) {
  const unsigned char* b = row + (c / 8) * static_cast<int64_t>(sizeof(BlockQ6_K));
  const int j = static_cast<int>(c % 8);
  const int h = j / 4, k = j % 4;
  const unsigned char* ql = b + 64 * h + 32 * (k & 1);
  const unsigned char* qh = b + kQK_K / 2 + 32 * h;
  const auto* scales = reinterpret_cast<const signed char*>(b + kQK_K / 2 + kQK_K / 4);
  const float d = fp16_at(b + kQK_K / 2 + kQK_K / 4 + kQK_K / 16);
  const float s0 = d * static_cast<float>(scales[2 * j]);
  const float s1 = d * static_cast<float>(scales[2 * j + 1]);
  for (int l = 0; l < 32; ++l) {
    const int q = ((ql[l] >> (4 * (k >> 1))) & 0x0f) | (((qh[l] >> (2 * k)) & 3) << 4);
    w[l] = (l < 16 ? s0 : s1) * static_cast<float>(q - 32);
  }
}

// q2_K (scales[16], qs[64], d, dmin): chunk j = 4 h + k, weight l: bits 2k,
// 2k + 1 of qs[32 h + l]; value d * sc * q - dmin * m, sub-block 2 j + l / 16
// holding sc in its low nibble and m in its high.
TROUPE_HD void decode_q2_K(const unsigned char* row, int64_t c, float* w) {
  const unsigned char* b = row + (c / 8) * static_cast<int64_t>(sizeof(BlockQ2_K));
  const int j = static_cast<int>(c % 8);
  const unsigned char* qs = b + kQK_K / 16 + 32 * (j / 4);
  const float d = fp16_at(b + kQK_K / 16 + kQK_K / 4);
  const float dmin = fp16_at(b + kQK_K / 16 + kQK_K / 4 + 2);
  for (int half = 0; half < 2; ++half) {
    const int s = b[2 * j + half];
    const float ds = d * static_cast<float>(s & 0x0f);
    const float dm = dmin * static_cast<float>(s >> 4);
    for (int l = 16 * half; l < 16 * half + 16; ++l) {
      w[l] = ds * static_cast<float>((qs[l] >> (2 * (j % 4))) & 3) - dm;
    }
  }
}

// q3_K (hmask[32], qs[64], scales[12], d): as q2_K for the 2 low bits, the
// third bit j of hmask[l]; value d * (sc - 32) * (q - 4), sc as core's
// q3_K_scale.
TROUPE_HD void decode_q3_K(const unsigned char* row, int64_t c, float* w) {
  const unsigned char* b = row + (c / 8) * static_cast<int64_t>(sizeof(BlockQ3_K));
  const int j = static_cast<int>(c % 8);
  const unsigned char* hmask = b;
  const unsigned char* qs = b + kQK_K / 8 + 32 * (j / 4);
  const unsigned char* scales = b + kQK_K / 8 + kQK_K / 4;
  const float d = fp16_at(scales + kKScaleBytes);
  for (int half = 0; half < 2; ++half) {
    const int s = 2 * j + half;
    const int low = s < 8 ? scales[s] & 0x0f : scales[s - 8] >> 4;
    const int high = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
    const float ds = d * static_cast<float>((low | (high << 4)) - 32);
    for (int l = 16 * half; l < 16 * half + 16; ++l) {
      const int q = ((qs[l] >> (2 * (j % 4))) & 3) | (((hmask[l] >> j) & 1) << 2);
      w[l] = ds * static_cast<float>(q - 4);
    }
  }
}

// The iq4 level of nibble index q (core/dtype.hpp's kIq4Levels).
TROUPE_HD float iq4_level(int q) {
  constexpr signed char kLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  return static_cast<float>(kLevels[q]);
}

// 32 weights ds * level from 16 q4_0-style bytes of nibble indices.
TROUPE_HD void decode_iq4(const unsigned char* qs, float ds, float* w) {
  for (int l = 0; l < 16; ++l) {
    w[l] = ds * iq4_level(qs[l] & 0x0f);
    w[l + 16] = ds * iq4_level(qs[l] >> 4);
  }
}

// iq4_nl (d, qs[16]): chunk c is block c.
TROUPE_HD void decode_iq4_nl(const unsigned char* row, int64_t c, float* w) {
  const unsigned char* b = row + c * static_cast<int64_t>(sizeof(BlockIQ4_NL));
  decode_iq4(b + 2, fp16_at(b), w);
}

// iq4_xs (d, scales_h, scales_l[4], qs[128]): chunk j of the super-block is
// sub-block j, scale d * (sc - 32), its indices qs[16 j .. 16 j + 16).
TROUPE_HD void decode_iq4_xs(const unsigned char* row, int64_t c, float* w) {
  const unsigned char* b = row + (c / 8) * static_cast<int64_t>(sizeof(BlockIQ4_XS));
  const int j = static_cast<int>(c % 8);
  const int high = ((b[2] | (b[3] << 8)) >> (2 * j)) & 3;
  const int sc = ((b[4 + j / 2] >> (4 * (j % 2))) & 0x0f) | (high << 4);
  decode_iq4(b + 8 + 16 * j, fp16_at(b) * static_cast<float>(sc - 32), w);
}

// The doubled FP4 level of code q (core/dtype.hpp's kMxfp4Levels).
TROUPE_HD float mxfp4_level(int q) {
  constexpr signed char kLevels[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  return static_cast<float>(kLevels[q]);
}

// mxfp4 (e, qs[16]): chunk c is block c, its scale 2^(e - 128) (core's
// mxfp4_scale, subnormal for e < 2). A power of two times a level: exact.
TROUPE_HD void decode_mxfp4(const unsigned char* row, int64_t c, float* w) {
  const unsigned char* b = row + c * static_cast<int64_t>(sizeof(BlockMXFP4));
  const uint32_t bits = b[0] < 2 ? 0x00200000u << b[0] : static_cast<uint32_t>(b[0] - 1) << 23;
#ifdef __CUDA_ARCH__
  const float d = __uint_as_float(bits);
#else
  float d;
  std::memcpy(&d, &bits, sizeof d);
#endif
  for (int l = 0; l < 16; ++l) {
    w[l] = d * mxfp4_level(b[1 + l] & 0x0f);
    w[l + 16] = d * mxfp4_level(b[1 + l] >> 4);
  }
}

TROUPE_HD bool decodes_blocks(DType t) {
  return t == DType::q5_0 || t == DType::q5_1 || t == DType::q2_K || t == DType::q3_K || t == DType::q4_K ||
         t == DType::q5_K || t == DType::q6_K || t == DType::iq4_nl || t == DType::iq4_xs ||
         t == DType::mxfp4;
}

// Chunk c of a row of type t, for the types above; false for any other.
TROUPE_HD bool decode_block_chunk(const unsigned char* row, DType t, int64_t c, float* w) {
  switch (t) {
    case DType::q5_0: decode_q5<false>(row, c, w); return true;
    case DType::q5_1: decode_q5<true>(row, c, w); return true;
    case DType::q2_K: decode_q2_K(row, c, w); return true;
    case DType::q3_K: decode_q3_K(row, c, w); return true;
    case DType::q4_K: decode_q45_K<false>(row, c, w); return true;
    case DType::q5_K: decode_q45_K<true>(row, c, w); return true;
    case DType::q6_K: decode_q6_K(row, c, w); return true;
    case DType::iq4_nl: decode_iq4_nl(row, c, w); return true;
    case DType::iq4_xs: decode_iq4_xs(row, c, w); return true;
    case DType::mxfp4: decode_mxfp4(row, c, w); return true;
    default: return false;
  }
}

}  // namespace troupe::cuda

#undef TROUPE_HD

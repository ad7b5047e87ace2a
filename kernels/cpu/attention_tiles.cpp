// The portable attention tiles over quantized KV rows, and their ISA
// dispatch. These loops are what the SIMD tiles are tested against; like
// vec_ops' scalar path they keep several partial sums.
#include "kernels/cpu/attention_tiles.hpp"

#include <algorithm>
#include <cstring>

#include "core/dtype.hpp"
#include "core/error.hpp"

namespace troupe::kernels::cpu {
namespace {

constexpr int kLanes = 8;

// Value i of a row, for q8_0 without its scale.
template <KvType T>
inline float raw(const unsigned char* row, int64_t i) {
  if constexpr (T == KvType::q8_0) {
    return static_cast<float>(static_cast<int8_t>(row[i]));
  } else {
    uint16_t h;
    std::memcpy(&h, row + 2 * i, 2);
    if constexpr (T == KvType::f16) {
      return fp16_to_f32(h);
    } else {
      return bf16_to_f32(h);
    }
  }
}

// Scale of group g of a q8_0 row of d values.
inline float q8_scale(const unsigned char* row, int64_t d, int64_t g) {
  uint16_t h;
  std::memcpy(&h, row + d + 2 * g, 2);
  return fp16_to_f32(h);
}

// Group g spans [g * 32, min(d, g * 32 + 32)); f16/bf16 rows are one "group"
// with scale 1 so both share the loops below.
template <KvType T>
float dot_row(const float* q, const unsigned char* row, int64_t d) {
  const int64_t group = T == KvType::q8_0 ? kKvQ8Group : d;
  float total = 0.0f;
  for (int64_t g0 = 0; g0 < d; g0 += group) {
    const int64_t end = std::min(d, g0 + group);
    float part[kLanes] = {};
    int64_t i = g0;
    for (; i + kLanes <= end; i += kLanes) {
      for (int l = 0; l < kLanes; ++l) part[l] += q[i + l] * raw<T>(row, i + l);
    }
    float s = 0.0f;
    for (; i < end; ++i) s += q[i] * raw<T>(row, i);
    for (float x : part) s += x;
    total += T == KvType::q8_0 ? s * q8_scale(row, d, g0 / kKvQ8Group) : s;
  }
  return total;
}

template <KvType T>
void dot_tile(float* s, const float* q, const unsigned char* k, int64_t stride, int64_t n, int64_t d, float scale) {
  for (int64_t j = 0; j < n; ++j) s[j] = scale * dot_row<T>(q, k + j * stride, d);
}

template <KvType T>
void acc_tile(float* acc, float c, const float* p, const unsigned char* v, int64_t stride, int64_t n, int64_t d) {
  for (int64_t i = 0; i < d; ++i) acc[i] *= c;
  for (int64_t j = 0; j < n; ++j) {
    const unsigned char* row = v + j * stride;
    for (int64_t i = 0; i < d; ++i) {
      const float w = T == KvType::q8_0 ? p[j] * q8_scale(row, d, i / kKvQ8Group) : p[j];
      acc[i] += w * raw<T>(row, i);
    }
  }
}

template <KvType T>
void write_row(unsigned char* row, const float* src, int64_t d) {
  kv_quantize_row(T, src, row, d);
}

template <KvType T>
void read_row(float* dst, const unsigned char* row, int64_t d) {
  kv_dequantize_row(T, row, dst, d);
}

template <KvType T>
constexpr KvTileOps kOps{
    .dot_tile = dot_tile<T>, .acc_tile = acc_tile<T>, .write_row = write_row<T>, .read_row = read_row<T>};

}  // namespace

const KvTileOps& kv_tile_ops_for(KvType t, const KvTileOps& f16, const KvTileOps& bf16, const KvTileOps& q8_0) {
  switch (t) {
    case KvType::f16:
      return f16;
    case KvType::bf16:
      return bf16;
    case KvType::q8_0:
      return q8_0;
    case KvType::f32: break;
  }
  throw Error(Errc::internal, "kv_tile_ops: f32 caches use vec_ops' tiles");
}

const KvTileOps& kv_tile_ops_scalar(KvType t) {
  return kv_tile_ops_for(t, kOps<KvType::f16>, kOps<KvType::bf16>, kOps<KvType::q8_0>);
}

const KvTileOps& kv_tile_ops(KvType t, Isa isa) {
  switch (isa) {
    case Isa::avx512: return kv_tile_ops_avx512(t);
    case Isa::avx2: return kv_tile_ops_avx2(t);
    case Isa::scalar: break;
  }
  return kv_tile_ops_scalar(t);
}

}  // namespace troupe::kernels::cpu

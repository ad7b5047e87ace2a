// Attention tiles that read a quantized KV cache (f16, bf16, q8_0) in place:
// the rows are converted to f32 in registers as they are used, never copied
// out; and a row's store into such a cache and its values read back. One
// table per ISA (attention_tiles*.cpp), like vec_ops; f32 caches take
// vec_ops' own tiles and a copy.
#pragma once

#include <cstdint>

#include "core/cpu_features.hpp"
#include "memory/kv_type.hpp"

namespace troupe::kernels::cpu {

// Over n cached rows laid out `stride` bytes apart (one kv head of
// consecutive slots of a paged block), each of d values of the table's type:
//   s[j] = scale * (q . k_j)                      for j < n
//   acc  = acc * c + sum_j p[j] * v_j
// write_row stores d values into one cached row with kv_quantize_row's bytes
// (memory/kv_type.hpp): kv_write's conversion, which a prefill runs for
// every token, layer and kv head. read_row gives a row's values as
// kv_dequantize_row does (the short convolution's window).
struct KvTileOps {
  void (*dot_tile)(float* s, const float* q, const unsigned char* k, int64_t stride, int64_t n, int64_t d,
                   float scale);
  void (*acc_tile)(float* acc, float c, const float* p, const unsigned char* v, int64_t stride, int64_t n,
                   int64_t d);
  void (*write_row)(unsigned char* row, const float* src, int64_t d);
  void (*read_row)(float* dst, const unsigned char* row, int64_t d);
};

// Tables for f16, bf16 and q8_0 (f32 throws Error(internal): use vec_ops).
// The ISA getters return the scalar table when the compiler cannot target it.
const KvTileOps& kv_tile_ops_scalar(KvType t);
const KvTileOps& kv_tile_ops_avx2(KvType t);
const KvTileOps& kv_tile_ops_avx512(KvType t);
const KvTileOps& kv_tile_ops(KvType t, Isa isa);
// The one of an ISA's three tables for t (f32 throws): what each getter returns.
const KvTileOps& kv_tile_ops_for(KvType t, const KvTileOps& f16, const KvTileOps& bf16, const KvTileOps& q8_0);

}  // namespace troupe::kernels::cpu

// Prefill attention with the (query, head) rows of one work item in the
// lanes of SIMD registers: on AVX-512 16 rows a register, one register for
// up to 16 rows and two for up to 32; on AVX2 8 rows a register, one to
// four. The tile kernels (vec_ops, attention_tiles)
// score one row against one key at a time and end every dot product with a
// horizontal sum; here each key's scores for 16 rows come out of one chain of
// FMAs (a key value broadcast against 16 rows' query values), and the online
// softmax (max, exp, sum, rescale) runs once per tile for all rows. Two
// registers give 16 FMA chains a pass and use each broadcast twice: 1.5x the
// GFLOP/s of one on Zen 5 (bench_attention, docs/performance.md).
// Worth it from about 8 rows; decode (1 query) keeps the tile kernels.
#pragma once

#include <cstdint>

#include "memory/paged_kv.hpp"

namespace troupe::kernels::cpu {

inline constexpr int kLaneRows = 32;
// Rows of a wide item, which prefill sequences of kWideMinQueries or more
// get: one read of each tile of keys and values serves them all. The AMX
// kernel (attend_amx_bf16) takes them as up to 8 tiles of 16 rows, the lane
// kernels as up to 4 groups of kLaneRows.
inline constexpr int kWideRows = 128;
inline constexpr int32_t kWideMinQueries = 16;
// Below this many rows an item keeps the tile kernels: the lanes left empty
// would cost more than the horizontal sums saved.
inline constexpr int kLaneMinRows = 8;
// The largest head_dim the lane kernel takes (its per-item buffers live on
// the stack); larger heads keep the tile kernels.
inline constexpr int64_t kLaneMaxHeadDim = 256;

// Up to kWideRows rows that all read kv head
// `kv_head` of one sequence. Row r
// attends to positions [lo[r], hi[r]); rows come ordered so that neither lo
// nor hi decreases (queries in order, the heads of one query alike).
struct LaneItem {
  const float* q[kWideRows];  // [head_dim] each
  float* out[kWideRows];      // [head_dim] each
  int64_t lo[kWideRows];
  int64_t hi[kWideRows];
  // Each row's attention sink (kernels::attention), read only when
  // has_sinks: it joins the softmax's denominator at the end.
  float sink[kWideRows];
  bool has_sinks = false;
  int n_rows;
};

// Whether attend_lanes_<isa> runs here: built with that ISA and the CPU
// runs it.
bool lanes_available_avx512();
bool lanes_available_avx2();

// out[r] = softmax_j(scale * q[r] . k_j) . v_j over the item's visible
// positions, each row's arithmetic in its own lane (so a row's bits do not
// depend on the other rows of its item). Keys are taken in tiles of 32
// positions from the first row's lo. Items of more than kLaneRows rows take
// them in groups of kLaneRows rows (attention_lanes_impl.hpp). Both ISAs run one walk
// (attention_lanes_impl.hpp): per lane the same operations in the same order.
void attend_lanes_avx512(const LaneItem& item, const PagedKvView& kv, const int32_t* block_table, int64_t kv_head,
                         float scale);
void attend_lanes_avx2(const LaneItem& item, const PagedKvView& kv, const int32_t* block_table, int64_t kv_head,
                       float scale);

// The same on AMX-BF16 tiles (attention_amx.cpp): q, k, v and the softmax
// weights rounded to bf16, sums in f32, as the AMX prefill matmuls round
// their activations. For wide items (kWideMinQueries or more queries) over a
// cache of 16 bits or fewer (f16, bf16, q8_0: an f32 cache keeps f32 math)
// where amx_attention_available() (AMX enabled, AVX-512 BF16); exact and
// batch-invariant math keep the f32 lanes.
bool amx_attention_available();
void attend_amx_bf16(const LaneItem& item, const PagedKvView& kv, const int32_t* block_table, int64_t kv_head,
                     float scale);

}  // namespace troupe::kernels::cpu

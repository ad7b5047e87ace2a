// Host side of the paged attention launch: checks a batch's sequences as the
// CPU kernels do, lays out the metadata blob the kernels read (sequences,
// block tables padded to a power-of-two context bucket, the decode list and
// the prefill tiles) and chooses the flash-decoding split. Everything here
// depends only on the batch shape and the bucket, so the decode steps of one
// batch shape produce byte-identical launches (what graph replay needs).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cuda/launchers.hpp"
#include "memory/paged_kv.hpp"

namespace troupe::cuda {

inline constexpr int64_t kMinContextBucket = 256;

struct AttnPlan {
  // DevSeq[n_seqs] | int32 tables[n_seqs][table_cap] | int32 dec[n_dec] | int32 tiles[n_tiles][2]
  //   | int32 key_end[rows] (when a sequence has AttnSeq::key_end)
  std::vector<unsigned char> blob;
  int64_t tables_off = 0;
  int64_t dec_off = 0;
  int64_t tiles_off = 0;
  int64_t key_end_off = -1;  // -1: no key_end (causal)
  int32_t n_seqs = 0;
  int32_t n_dec = 0;
  int32_t n_tiles = 0;
  int32_t max_q = 0;
  int64_t bucket = 0;     // power of two >= every sequence's n_past + n_q
  int64_t table_cap = 0;  // bucket / block_size, rounded up
};

// Throws Error(invalid_argument) naming fn and the sequence, as the CPU
// kernels do. whole_history: check block-table entries from position 0
// (attention), else only those the new tokens land in (kv_write).
void check_attn_seqs(const char* fn, const PagedKvView& kv, const AttnSeq* seqs, int n_seqs, bool whole_history);

// Fills plan (reusing its storage) for sequences already checked.
void build_attn_plan(const AttnSeq* seqs, int n_seqs, int64_t block_size, AttnPlan& plan);

struct DecodeSplit {
  int32_t n_splits = 1;
  int32_t split_len = 1;
};
// Enough (sequence, head, split) blocks to fill n_sm SMs a few times over,
// splits of at least kMinSplit keys, covering any visible range of a
// context within the bucket (or the window).
DecodeSplit plan_decode_split(int64_t n_dec, int64_t n_head, int64_t bucket, int32_t window, int n_sm);

}  // namespace troupe::cuda

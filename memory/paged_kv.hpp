// The paged KV cache as kernels see it: raw storage of one layer plus, per
// sequence, a block table. Which block belongs to whom is decided elsewhere
// (memory/kv_block_pool, integers only); kernels only follow the tables.
#pragma once

#include <cstdint>

namespace troupe {

// K and V storage of one layer. Token t of a sequence lives in physical block
// block_table[t / block_size], slot t % block_size.
struct PagedKvView {
  float* k = nullptr;  // [n_blocks, block_size, n_head_kv, head_dim]
  float* v = nullptr;  // [n_blocks, block_size, n_head_kv, head_dim]
  int64_t n_blocks = 0;
  int64_t block_size = 16;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;

  int64_t block_stride() const { return block_size * n_head_kv * head_dim; }
  // Offset of (block, slot, kv_head) in k or v.
  int64_t offset(int64_t block, int64_t slot, int64_t kv_head) const {
    return block * block_stride() + (slot * n_head_kv + kv_head) * head_dim;
  }
};

// One sequence of a batch. Its query rows are q_begin .. q_begin + n_q - 1;
// query i sits at position n_past + i and attends to cached positions
// 0 .. n_past + i (causal), or the last `window` of them when a sliding
// window is set.
struct AttnSeq {
  int32_t q_begin = 0;
  int32_t n_q = 0;
  int32_t n_past = 0;
  const int32_t* block_table = nullptr;  // [ceil((n_past + n_q) / block_size)]
};

}  // namespace troupe

// The paged KV cache as kernels see it: raw storage of one layer plus, per
// sequence, a block table. Which block belongs to whom is decided elsewhere
// (memory/kv_block_pool, integers only); kernels only follow the tables.
#pragma once

#include <cstdint>

#include "memory/kv_type.hpp"

namespace troupe {

// K and V storage of one layer. Token t of a sequence lives in physical block
// block_table[t / block_size], slot t % block_size. Each (slot, kv head) is
// one row of head_dim values in `type` (memory/kv_type.hpp): row_bytes()
// bytes, f32 rows being plain floats.
struct PagedKvView {
  void* k = nullptr;  // [n_blocks, block_size, n_head_kv] rows of row_bytes()
  void* v = nullptr;  // [n_blocks, block_size, n_head_kv] rows of row_bytes()
  int64_t n_blocks = 0;
  int64_t block_size = 16;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  KvType type = KvType::f32;
  // A recurrent layer keeps no pages (n_head_kv 0) but a fixed state per
  // running sequence: n_state_slots slots of state_floats f32 values, the
  // slot named by AttnSeq::state_slot. Null elsewhere.
  float* state = nullptr;
  int64_t n_state_slots = 0;
  int64_t state_floats = 0;

  int64_t row_bytes() const { return kv_row_bytes(type, head_dim); }
  // Bytes between consecutive slots of one kv head.
  int64_t slot_bytes() const { return n_head_kv * row_bytes(); }
  int64_t block_bytes() const { return block_size * slot_bytes(); }
  // Byte offset of the row (block, slot, kv_head) in k or v.
  int64_t byte_offset(int64_t block, int64_t slot, int64_t kv_head) const {
    return block * block_bytes() + (slot * n_head_kv + kv_head) * row_bytes();
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
  // The sequence's recurrent-state slot (PagedKvView::state), -1: none. A
  // step at n_past 0 starts the slot from zero.
  int32_t state_slot = -1;
  // Where some queries see keys after their own (Gemma 3's image tokens see
  // their whole image): query i sees positions up to key_end[i] - 1, at
  // least its own and at most the step's last (n_past + n_q - 1), never
  // falling as i rises. Null: causal. Causal kernels only.
  const int32_t* key_end = nullptr;  // [n_q]
};

}  // namespace troupe

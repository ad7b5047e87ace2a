// AttnPlan building and the decode split choice.
#include "kernels/cuda/attn_plan.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/error.hpp"

namespace troupe::cuda {
namespace {

constexpr int64_t kMinSplit = 64;    // keys per decode split at least
constexpr int64_t kMaxSplits = 64;
constexpr int64_t kBlocksPerSm = 4;  // decode blocks wanted per SM

int64_t align16(int64_t n) { return (n + 15) / 16 * 16; }

int64_t next_pow2(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

std::string seq_name(const char* fn, int i) { return std::string("cuda ") + fn + ": sequence " + std::to_string(i); }

}  // namespace

void check_attn_seqs(const char* fn, const PagedKvView& kv, const AttnSeq* seqs, int n_seqs, bool whole_history) {
  if (n_seqs < 0 || (n_seqs > 0 && seqs == nullptr)) {
    throw Error(Errc::invalid_argument, std::string("cuda ") + fn + ": bad sequences");
  }
  for (int i = 0; i < n_seqs; ++i) {
    const AttnSeq& s = seqs[i];
    if (s.n_q < 0 || s.n_past < 0 || s.q_begin < 0) {
      throw Error(Errc::invalid_argument, seq_name(fn, i) + " has negative q_begin, n_q or n_past");
    }
    if (s.n_q == 0) continue;
    if (s.block_table == nullptr) throw Error(Errc::invalid_argument, seq_name(fn, i) + " has no block table");
    const int64_t end = static_cast<int64_t>(s.n_past) + s.n_q;
    for (int32_t q = 0; s.key_end != nullptr && q < s.n_q; ++q) {
      if (s.key_end[q] <= int64_t{s.n_past} + q || s.key_end[q] > end || (q > 0 && s.key_end[q] < s.key_end[q - 1])) {
        throw Error(Errc::invalid_argument, seq_name(fn, i) + " query " + std::to_string(q) + " sees keys to " +
                                                std::to_string(s.key_end[q]) +
                                                ": before its own position, past the step's end " +
                                                std::to_string(end) + " or before the previous query's");
      }
    }
    const int64_t first = whole_history ? 0 : s.n_past;
    for (int64_t b = first / kv.block_size; b < (end + kv.block_size - 1) / kv.block_size; ++b) {
      if (s.block_table[b] < 0 || s.block_table[b] >= kv.n_blocks) {
        throw Error(Errc::invalid_argument, seq_name(fn, i) + " block table entry " + std::to_string(b) + " = " +
                                                std::to_string(s.block_table[b]) + " is outside the cache's " +
                                                std::to_string(kv.n_blocks) + " blocks");
      }
    }
  }
}

void build_attn_plan(const AttnSeq* seqs, int n_seqs, int64_t block_size, AttnPlan& plan) {
  int64_t max_ctx = 0, n_rows = 0;
  int32_t max_q = 0, n_dec = 0, n_tiles = 0;
  bool key_end = false;
  for (int i = 0; i < n_seqs; ++i) {
    n_rows = std::max<int64_t>(n_rows, int64_t{seqs[i].q_begin} + seqs[i].n_q);
    key_end = key_end || (seqs[i].key_end != nullptr && seqs[i].n_q > 0);
    max_ctx = std::max<int64_t>(max_ctx, static_cast<int64_t>(seqs[i].n_past) + seqs[i].n_q);
    max_q = std::max(max_q, seqs[i].n_q);
    if (seqs[i].n_q == 1) ++n_dec;
    if (seqs[i].n_q > 1) n_tiles += (seqs[i].n_q + kAttnTileQ - 1) / kAttnTileQ;
  }
  plan.n_seqs = n_seqs;
  plan.n_dec = n_dec;
  plan.n_tiles = n_tiles;
  plan.max_q = max_q;
  plan.bucket = std::max(kMinContextBucket, next_pow2(max_ctx));
  plan.table_cap = (plan.bucket + block_size - 1) / block_size;
  plan.tables_off = align16(n_seqs * static_cast<int64_t>(sizeof(DevSeq)));
  plan.dec_off = align16(plan.tables_off + n_seqs * plan.table_cap * 4);
  plan.tiles_off = align16(plan.dec_off + int64_t{n_dec} * 4);
  const int64_t tiles_end = align16(plan.tiles_off + int64_t{n_tiles} * 8);
  plan.key_end_off = key_end ? tiles_end : -1;
  const int64_t total = key_end ? align16(tiles_end + n_rows * 4) : tiles_end;
  plan.blob.assign(static_cast<size_t>(total), 0);  // padding and unused table slots are zero

  // Written through memcpy: the blob is raw bytes the device reads as int32.
  unsigned char* b = plan.blob.data();
  auto put = [](unsigned char* at, int32_t v) { std::memcpy(at, &v, sizeof v); };
  unsigned char* dec = b + plan.dec_off;
  unsigned char* tiles = b + plan.tiles_off;
  for (int i = 0; i < n_seqs; ++i) {
    const AttnSeq& s = seqs[i];
    const DevSeq d{.q_begin = s.q_begin,
                   .n_q = s.n_q,
                   .n_past = s.n_past,
                   .table = static_cast<int32_t>(i * plan.table_cap),
                   .state_slot = s.state_slot};
    std::memcpy(b + i * sizeof(DevSeq), &d, sizeof d);
    if (s.n_q > 0) {
      const int64_t used = (static_cast<int64_t>(s.n_past) + s.n_q + block_size - 1) / block_size;
      std::memcpy(b + plan.tables_off + i * plan.table_cap * 4, s.block_table, static_cast<size_t>(used) * 4);
    }
    for (int32_t q = 0; key_end && q < s.n_q; ++q) {
      const int32_t own = s.n_past + q + 1;
      put(b + plan.key_end_off + (int64_t{s.q_begin} + q) * 4, s.key_end != nullptr ? s.key_end[q] : own);
    }
    if (s.n_q == 1) {
      put(dec, i);
      dec += 4;
    }
    // Prefill tiles, latest (longest key range) first so they start early.
    for (int32_t q0 = (s.n_q > 1 ? (s.n_q - 1) / kAttnTileQ * kAttnTileQ : -1); q0 >= 0; q0 -= kAttnTileQ) {
      put(tiles, i);
      put(tiles + 4, q0);
      tiles += 8;
    }
  }
}

DecodeSplit plan_decode_split(int64_t n_dec, int64_t n_head, int64_t bucket, int32_t window, int n_sm) {
  if (n_dec <= 0 || n_head <= 0) return {};
  const int64_t span = window > 0 ? std::min<int64_t>(bucket, window) : bucket;
  const int64_t work = n_dec * n_head;
  const int64_t want = (kBlocksPerSm * std::max(1, n_sm) + work - 1) / work;
  const int64_t by_len = std::max<int64_t>(1, span / kMinSplit);
  const int64_t n_splits = std::clamp<int64_t>(want, 1, std::min(by_len, kMaxSplits));
  return {.n_splits = static_cast<int32_t>(n_splits), .split_len = static_cast<int32_t>((span + n_splits - 1) / n_splits)};
}

}  // namespace troupe::cuda

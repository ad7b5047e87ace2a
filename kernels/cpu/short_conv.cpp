// LFM2's gated short convolution over the paged cache (cpu_kernels.hpp).
//
// The convolution's input b*x of every position is kept in the layer's cache
// rows, as attention keeps its keys: a sequence's history is read back by
// position through its block table. So prefix sharing, chunked prefill,
// speculative rollback and preemption treat a conv layer as they treat an
// attention layer, and no per-sequence state exists to copy or lose. The
// price is a row of n_embd per cached token where taps - 1 rows per sequence
// would do (docs/models.md).
#include <algorithm>
#include <string>

#include "core/cpu_features.hpp"
#include "core/error.hpp"
#include "kernels/cpu/attention_tiles.hpp"
#include "kernels/cpu/scratch.hpp"
#include "kernels/cpu_kernels.hpp"

namespace troupe::kernels {
namespace {

void check_conv(const PagedKvView& cache, const AttnSeq* seqs, int n_seqs, const float* weight, int64_t taps) {
  if (cache.k == nullptr || cache.n_blocks <= 0 || cache.block_size <= 0 || cache.n_head_kv != 1 ||
      cache.head_dim <= 0) {
    throw Error(Errc::invalid_argument,
                "short_conv: bad cache view (n_blocks=" + std::to_string(cache.n_blocks) + " block_size=" +
                    std::to_string(cache.block_size) + " rows=" + std::to_string(cache.n_head_kv) +
                    " width=" + std::to_string(cache.head_dim) + "; wants one row per token)");
  }
  if (taps < 1 || weight == nullptr) {
    throw Error(Errc::invalid_argument, "short_conv: needs a weight of at least one tap, got " + std::to_string(taps));
  }
  if (n_seqs < 0 || (n_seqs > 0 && seqs == nullptr)) throw Error(Errc::invalid_argument, "short_conv: bad sequences");
  for (int i = 0; i < n_seqs; ++i) {
    const AttnSeq& s = seqs[i];
    if (s.n_q < 0 || s.n_past < 0 || s.q_begin < 0) {
      throw Error(Errc::invalid_argument, "short_conv: sequence " + std::to_string(i) +
                                              " has negative q_begin, n_q or n_past");
    }
    if (s.n_q == 0) continue;
    if (s.block_table == nullptr) {
      throw Error(Errc::invalid_argument, "short_conv: sequence " + std::to_string(i) + " has no block table");
    }
    // Blocks of every position read (taps - 1 back) or written.
    const int64_t first = std::max<int64_t>(0, static_cast<int64_t>(s.n_past) - (taps - 1));
    const int64_t end = static_cast<int64_t>(s.n_past) + s.n_q;
    for (int64_t b = first / cache.block_size; b < (end + cache.block_size - 1) / cache.block_size; ++b) {
      if (s.block_table[b] < 0 || s.block_table[b] >= cache.n_blocks) {
        throw Error(Errc::invalid_argument, "short_conv: sequence " + std::to_string(i) + " block table entry " +
                                                std::to_string(b) + " = " + std::to_string(s.block_table[b]) +
                                                " is outside the cache's " + std::to_string(cache.n_blocks) +
                                                " blocks");
      }
    }
  }
}

unsigned char* cache_row(const PagedKvView& cache, const AttnSeq& s, int64_t pos) {
  return static_cast<unsigned char*>(cache.k) +
         cache.byte_offset(s.block_table[pos / cache.block_size], pos % cache.block_size, 0);
}

}  // namespace

void short_conv(float* y, const float* bcx, const PagedKvView& cache, const AttnSeq* seqs, int n_seqs,
                const float* weight, const float* bias, int64_t taps, ThreadPool& pool) {
  check_conv(cache, seqs, n_seqs, weight, taps);
  const int64_t E = cache.head_dim;
  // A 16- or 8-bit cache converts its rows with the ISA's code, as kv_write
  // does (cpu/attention_tiles.hpp); the values are the reference's either way.
  const cpu::KvTileOps* rows = cache.type == KvType::f32 ? nullptr : &cpu::kv_tile_ops(cache.type, active_isa());

  // Every new token's b*x into its position's row first: the convolution
  // then reads the history and this step's tokens alike, from the cache, so
  // a prompt gives the same rows whether it arrives in one chunk or many.
  // Scratch is per thread and grow-only: no allocation once steps repeat.
  using detail::Scratch;
  int64_t n_rows = 0;
  for (int i = 0; i < n_seqs; ++i) n_rows = std::max<int64_t>(n_rows, static_cast<int64_t>(seqs[i].q_begin) + seqs[i].n_q);
  // [n_rows] the sequence of each token row (-1: none), read by every worker
  auto* owner = reinterpret_cast<int32_t*>(detail::scratch(Scratch::conv_owner, static_cast<size_t>(n_rows) * 4));
  std::fill(owner, owner + n_rows, -1);
  auto* bx = reinterpret_cast<float*>(detail::scratch(Scratch::conv_window, static_cast<size_t>(E) * 4));  // [E]
  for (int i = 0; i < n_seqs; ++i) {
    const AttnSeq& s = seqs[i];
    for (int64_t j = 0; j < s.n_q; ++j) {
      const float* t = bcx + (static_cast<int64_t>(s.q_begin) + j) * 3 * E;  // [B | C | x]
      for (int64_t c = 0; c < E; ++c) bx[c] = t[c] * t[2 * E + c];
      unsigned char* row = cache_row(cache, s, s.n_past + j);
      if (rows != nullptr) {
        rows->write_row(row, bx, E);
      } else {
        kv_quantize_row(cache.type, bx, row, E);
      }
      owner[s.q_begin + j] = i;
    }
  }

  pool.parallel_for(n_rows, [&](int64_t r0, int64_t r1) {
    // [taps, E], oldest first
    auto* window = reinterpret_cast<float*>(detail::scratch(Scratch::conv_window, static_cast<size_t>(taps * E) * 4));
    for (int64_t r = r0; r < r1; ++r) {
      if (owner[r] < 0) continue;
      const AttnSeq& s = seqs[owner[r]];
      const int64_t pos = static_cast<int64_t>(s.n_past) + (r - s.q_begin);
      for (int64_t k = 0; k < taps; ++k) {
        float* dst = window + k * E;
        const int64_t p = pos - (taps - 1) + k;
        if (p < 0) {
          std::fill(dst, dst + E, 0.0f);  // the causal padding before position 0
        } else {
          const unsigned char* row = cache_row(cache, s, p);
          if (rows != nullptr) {
            rows->read_row(dst, row, E);
          } else {
            kv_dequantize_row(cache.type, row, dst, E);
          }
        }
      }
      const float* gate_c = bcx + r * 3 * E + E;
      float* out = y + r * E;
      for (int64_t c = 0; c < E; ++c) {
        const float* w = weight + c * taps;
        float acc = bias != nullptr ? bias[c] : 0.0f;
        for (int64_t k = 0; k < taps; ++k) acc += w[k] * window[k * E + c];
        out[c] = gate_c[c] * acc;
      }
    }
  });
}

}  // namespace troupe::kernels

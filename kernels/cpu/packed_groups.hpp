// The groups of 16 rows that the repacked layouts (int8, bf16, f32) store
// one after another: what a kernel needs to run G of them side by side, and
// the walks over a thread's range of groups that the bf16 and f32 paths
// share (their kernels differ, their tiling does not).
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/thread_pool.hpp"

namespace troupe::kernels::detail {

inline constexpr int64_t kPackedGroupRows = 16;

// The G groups from g on: their bytes, their first output column and their
// rows (16, or fewer in the last group).
template <int G>
struct GroupSet {
  const uint8_t* lines[G];
  float* ys[G];
  int64_t n_rows[G];

  GroupSet(const uint8_t* packed, int64_t stride, float* y, int64_t n_out, int64_t g) {
    for (int i = 0; i < G; ++i) {
      lines[i] = packed + (g + i) * stride;
      ys[i] = y + (g + i) * kPackedGroupRows;
      n_rows[i] = std::min<int64_t>(kPackedGroupRows, n_out - (g + i) * kPackedGroupRows);
    }
  }
};

// K: the kernels of one layout, called as k.template dot<G, T>(set, t0)
// (decode: T <= 2 tokens from t0) and k.template gemm<G, T>(set, t0)
// (prefill tiles: T <= 8 tokens).

// Decode over groups [g0, g1): one token reads one group (one stream) at a
// time; more tokens take two groups side by side where the range has them,
// two tokens at a time.
template <class K>
void dot_range(const K& k, const uint8_t* packed, int64_t stride, float* y, int64_t n_tokens, int64_t n_out,
               int64_t g0, int64_t g1) {
  auto tokens = [&]<int G>(const GroupSet<G>& s) {
    for (int64_t t0 = 0; t0 < n_tokens; t0 += 2) {
      n_tokens - t0 >= 2 ? k.template dot<G, 2>(s, t0) : k.template dot<G, 1>(s, t0);
    }
  };
  for (int64_t g = g0; g < g1;) {
    const bool pair = n_tokens >= 2 && g + 1 < g1;
    if (pair) {
      tokens(GroupSet<2>(packed, stride, y, n_out, g));
    } else {
      tokens(GroupSet<1>(packed, stride, y, n_out, g));
    }
    g += pair ? 2 : 1;
  }
}

// Prefill over groups [g0, g1), kMaxG (2 or 3) at a time: every token over
// them, in tiles of 8 tokens, then 4, 2 and 1 for the rest; the range's last
// groups in a pair or alone. The groups' lines stay in L2 while the tokens
// go past.
template <int kMaxG, class K>
void gemm_range(const K& k, const uint8_t* packed, int64_t stride, float* y, int64_t n_tokens, int64_t n_out,
                int64_t g0, int64_t g1) {
  static_assert(kMaxG == 2 || kMaxG == 3);
  auto tokens = [&]<int G>(const GroupSet<G>& s) {
    int64_t t0 = 0;
    for (; t0 + 8 <= n_tokens; t0 += 8) k.template gemm<G, 8>(s, t0);
    if (t0 + 4 <= n_tokens) k.template gemm<G, 4>(s, t0), t0 += 4;
    if (t0 + 2 <= n_tokens) k.template gemm<G, 2>(s, t0), t0 += 2;
    if (t0 < n_tokens) k.template gemm<G, 1>(s, t0);
  };
  int64_t g = g0;
  if constexpr (kMaxG == 3) {
    for (; g + 3 <= g1; g += 3) tokens(GroupSet<3>(packed, stride, y, n_out, g));
  }
  for (; g < g1; g += 2) {
    if (g + 1 < g1) {
      tokens(GroupSet<2>(packed, stride, y, n_out, g));
    } else {
      tokens(GroupSet<1>(packed, stride, y, n_out, g));
    }
  }
}

// Prefill tiles take three groups at a time while their lines fit in half of
// a Zen 4/5 core's 1 MiB L2, two otherwise. On one Zen 5 core, alternated
// runs: f32 110M shapes (n_in 768, 2048) 193-195 -> 208-209 GFLOP/s, bf16
// 355-404 -> 390-435; the 1.24B shapes (n_in 2048, 8192) even for both.
inline constexpr int64_t kTripleBytes = 512 << 10;

// The prefill of a whole matrix of groups `stride` bytes apart: threads take
// guided chunks (ThreadPool::parallel_guided) of whole triples or pairs.
template <class K>
void gemm_split(const K& k, ThreadPool& pool, const uint8_t* packed, int64_t stride, float* y, int64_t n_tokens,
                int64_t n_out) {
  const int64_t groups = (n_out + kPackedGroupRows - 1) / kPackedGroupRows;
  if (3 * stride <= kTripleBytes) {
    pool.parallel_guided(groups, 6, [&](int64_t g0, int64_t g1) {
      gemm_range<3>(k, packed, stride, y, n_tokens, n_out, g0, g1);
    });
  } else {
    pool.parallel_guided(groups, 2, [&](int64_t g0, int64_t g1) {
      gemm_range<2>(k, packed, stride, y, n_tokens, n_out, g0, g1);
    });
  }
}

}  // namespace troupe::kernels::detail

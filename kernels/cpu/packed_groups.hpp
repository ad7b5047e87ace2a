// The groups of 16 rows that the repacked layouts (int8, bf16, f32) store
// one after another: what a kernel needs to run G of them side by side, and
// the walks over a thread's range of groups that the bf16 and f32 paths
// share (their kernels differ, their tiling does not).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/cpu_features.hpp"
#include "core/thread_pool.hpp"

namespace troupe::kernels::detail {

inline constexpr int64_t kPackedGroupRows = 16;

inline int64_t n_packed_groups(int64_t n_out) { return (n_out + kPackedGroupRows - 1) / kPackedGroupRows; }

// Groups [g0, g1) of W (rows of n_in values of kBytes each, at any address:
// safetensors data need not be aligned) into dst, each group group_bytes
// apart: per input, its value in each of the 16 rows side by side (row r at
// bytes kBytes r), zeros past the last row and the last input. The f32 and
// 16-bit layouts (f32_packed.hpp, half_packed.hpp).
template <int64_t kBytes>
void pack_by_input(uint8_t* dst, const uint8_t* w, int64_t n_in, int64_t n_out, int64_t group_bytes, int64_t g0,
                   int64_t g1) {
  for (int64_t g = g0; g < g1; ++g) {
    uint8_t* out = dst + g * group_bytes;
    std::memset(out, 0, static_cast<size_t>(group_bytes));
    const int64_t nr = std::min(kPackedGroupRows, n_out - g * kPackedGroupRows);
    for (int64_t r = 0; r < nr; ++r) {
      const uint8_t* row = w + (g * kPackedGroupRows + r) * n_in * kBytes;
      for (int64_t k = 0; k < n_in; ++k) {
        std::memcpy(out + (k * kPackedGroupRows + r) * kBytes, row + k * kBytes, kBytes);
      }
    }
  }
}

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

// How far ahead the int8 GEMVs over packed groups prefetch, now: 0 for the
// same unit of the group each stream reads next, else a distance ahead in
// its own stream (matmul_packed_vnni.cpp's gemv_group says why). On Intel it
// depends on whether the int8 weights the CPU backends hold fit in L3
// (int8_packed.cpp).
uintptr_t packed_gemv_prefetch_ahead();

// The groups of up to N matrices numbered one after another (a fused q/k/v
// or gate/up matmul), so that the threads split all of them in one dispatch
// and a decode step waits at one barrier, not one per matrix.
template <size_t N>
class GroupNumbering {
 public:
  // outs: up to N values with an n_out member.
  template <class Outs>
  explicit GroupNumbering(const Outs& outs) : n_(outs.size()) {
    for (size_t i = 0; i < n_; ++i) {
      first_[i + 1] = first_[i] + (outs[i].n_out + kPackedGroupRows - 1) / kPackedGroupRows;
    }
  }
  int64_t total() const { return first_[n_]; }
  // f(i, g0, g1): groups [g0, g1) of matrix i, its part of [j0, j1).
  template <class F>
  void each_part(int64_t j0, int64_t j1, F&& f) const {
    for (size_t i = 0; i < n_; ++i) {
      const int64_t lo = std::max(j0, first_[i]), hi = std::min(j1, first_[i + 1]);
      if (lo < hi) f(i, lo - first_[i], hi - first_[i]);
    }
  }

 private:
  size_t n_;
  int64_t first_[N + 1] = {};  // first_[i]: the number of matrix i's first group
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

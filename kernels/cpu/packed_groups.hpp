// The groups of 16 rows that the repacked layouts (int8, bf16, f32) store
// one after another: what a kernel needs to run G of them side by side.
#pragma once

#include <algorithm>
#include <cstdint>

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

}  // namespace troupe::kernels::detail

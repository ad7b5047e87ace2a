// Embedding lookup for each weight dtype, against rows written by hand from
// the GGUF block definitions (q8_0: d * q; q4_0: d * (nibble - 8); q4_1:
// d * nibble + m; low nibbles hold the first 16 values). Exact comparison:
// these values are representable.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "kernels/cpu_kernels.hpp"

namespace troupe {
namespace {

constexpr uint16_t kHalfOne = 0x3C00;      // 1.0 in IEEE half
constexpr uint16_t kHalfHalf = 0x3800;     // 0.5
constexpr uint16_t kHalfTwo = 0x4000;      // 2.0
constexpr uint16_t kHalfMinusOne = 0xBC00; // -1.0

TEST(Embedding, F32RowsByIdIncludingRepeats) {
  const int64_t n_embd = 3;
  const std::vector<float> table = {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32};
  const int32_t ids[] = {3, 0, 3, 2};
  std::vector<float> y(4 * n_embd);
  kernels::embedding(y.data(), table.data(), DType::f32, ids, 4, n_embd);
  const std::vector<float> want = {30, 31, 32, 0, 1, 2, 30, 31, 32, 20, 21, 22};
  EXPECT_EQ(y, want);
}

TEST(Embedding, HalfAndBfloatRows) {
  // Row 1 of each table: f16 {1, 0.5, 2, -1}; bf16 {1, -2, 0.5, 3}.
  const uint16_t f16[] = {0, 0, 0, 0, kHalfOne, kHalfHalf, kHalfTwo, kHalfMinusOne};
  const uint16_t bf16[] = {0, 0, 0, 0, 0x3F80, 0xC000, 0x3F00, 0x4040};
  const int32_t id = 1;
  float y[4];
  kernels::embedding(y, f16, DType::f16, &id, 1, 4);
  EXPECT_EQ(std::vector<float>(y, y + 4), (std::vector<float>{1.0f, 0.5f, 2.0f, -1.0f}));
  kernels::embedding(y, bf16, DType::bf16, &id, 1, 4);
  EXPECT_EQ(std::vector<float>(y, y + 4), (std::vector<float>{1.0f, -2.0f, 0.5f, 3.0f}));
}

TEST(Embedding, Q8_0Row) {
  // Two rows of one block each; row 1 has d = 0.5, q[i] = i - 16.
  BlockQ8_0 rows[2] = {};
  rows[1].d = kHalfHalf;
  for (int i = 0; i < 32; ++i) rows[1].qs[i] = static_cast<int8_t>(i - 16);
  const int32_t id = 1;
  float y[32];
  kernels::embedding(y, rows, DType::q8_0, &id, 1, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], 0.5f * float(i - 16)) << i;
}

TEST(Embedding, Q4_0AndQ4_1Rows) {
  // Byte j holds value j in its low nibble and value j + 16 in its high one.
  BlockQ4_0 a[2] = {};
  BlockQ4_1 b[2] = {};
  a[1].d = kHalfOne;
  b[1].d = kHalfTwo;
  b[1].m = kHalfMinusOne;
  for (int j = 0; j < 16; ++j) {
    const uint8_t lo = static_cast<uint8_t>(j);
    const uint8_t hi = static_cast<uint8_t>(15 - j);
    a[1].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    b[1].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
  }
  const int32_t id = 1;
  float y[32];
  kernels::embedding(y, a, DType::q4_0, &id, 1, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], float(j - 8)) << j;
    EXPECT_EQ(y[j + 16], float(15 - j - 8)) << j;
  }
  kernels::embedding(y, b, DType::q4_1, &id, 1, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 2.0f * float(j) - 1.0f) << j;
    EXPECT_EQ(y[j + 16], 2.0f * float(15 - j) - 1.0f) << j;
  }
}

TEST(Embedding, RejectsNegativeIdsAndPartialBlocks) {
  const std::vector<float> table(8, 1.0f);
  float y[4];
  const int32_t bad = -1;
  EXPECT_THROW(kernels::embedding(y, table.data(), DType::f32, &bad, 1, 4), Error);
  BlockQ8_0 blk{};
  const int32_t id = 0;
  EXPECT_THROW(kernels::embedding(y, &blk, DType::q8_0, &id, 1, 16), Error);
}

}  // namespace
}  // namespace troupe
